"""Every environment variable is read in one place, ``core/config.Settings``; ``LOG_LEVEL`` takes effect."""
from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from chalicelib.core import logs
from chalicelib.core.config import settings

ROOT = Path(__file__).resolve().parents[3]
ENV_READ = re.compile(r"os\.environ|os\.getenv|getenv\(")


def test_only_config_reads_the_environment() -> None:
    readers = [str(p.relative_to(ROOT)) for p in [ROOT / "app.py", *(ROOT / "chalicelib").rglob("*.py")]
               if ENV_READ.search(p.read_text()) and p != ROOT / "chalicelib" / "core" / "config.py"]
    assert readers == []


@pytest.mark.parametrize(("value", "level"), [("WARNING", logging.WARNING), ("debug", logging.DEBUG),
                                              ("nonsense", logging.INFO)])
def test_log_level_sets_the_service_logger(monkeypatch: pytest.MonkeyPatch, value: str, level: int) -> None:
    root = logging.getLogger(logs.LOGGER_ROOT)
    saved = (list(root.handlers), root.level)
    monkeypatch.setenv("LOG_LEVEL", value)
    settings.cache_clear()
    try:
        root.handlers.clear()  # the first get_logger of a process configures the service logger
        logs.get_logger("test")
        assert root.level == level
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        settings.cache_clear()
