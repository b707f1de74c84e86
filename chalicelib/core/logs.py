"""Structured JSON log lines, each carrying the current correlation ID. Never log secrets or tokens."""
from __future__ import annotations

import json
import logging
import sys
from typing import Any

from chalicelib.core import clock, correlation
from chalicelib.core.config import settings

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None)))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": clock.iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "correlation_id": correlation.current(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                line[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["error_type"] = record.exc_info[0].__name__
        return json.dumps(line, default=str)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is now (Lambda, the local runner and test capture differ).

    Logs go to stderr so command output on stdout (e.g. the audit verifier's report) stays clean;
    Lambda sends both streams to CloudWatch."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


LOGGER_ROOT = "aiplat-svc"  # not "aiplat": Chalice owns the logger named after the app and sets it to ERROR


def get_logger(name: str) -> logging.Logger:
    logger = logging.getLogger(f"{LOGGER_ROOT}.{name}")
    root = logging.getLogger(LOGGER_ROOT)
    if not root.handlers:
        handler = _StderrHandler()
        handler.setFormatter(JsonFormatter())
        root.addHandler(handler)
        level = settings().log_level
        root.setLevel(level if level in _LEVELS else logging.INFO)
        root.propagate = False
    return logger
