"""A 1M-row CSV sync finishes within the workers function's memory (completion and peak RSS are asserted,
never time). The sync runs in a fresh process (``sync_memory_child.py``) so its peak RSS is its own, with
the emulator (a moto server) in a third process, so the peak is a clean worker's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.emulator.process import moto_process
from infra.template import GROUP_SETTINGS

ROOT = Path(__file__).resolve().parents[3]
ROWS = 1_000_000
CLEAN_WORKER_PEAK_MB = 400  # a clean worker's process peak at 1M rows (docs/architecture.md, "Sync data path")


@pytest.fixture
def emulator() -> Iterator[str]:
    """A moto server of its own, in its own process (stopped by its PID)."""
    with moto_process(dict(os.environ)) as endpoint:
        yield endpoint


def test_a_million_row_csv_syncs_within_a_clean_workers_memory(emulator: str) -> None:
    limit_mb = GROUP_SETTINGS["workers"]["lambda_memory_size"]
    out = subprocess.run([sys.executable, "-m", "tests.functional.gateway.sync_memory_child", str(ROWS), emulator],
                         cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["outcome"] == "done", got
    assert got["status"] == "SUCCEEDED", got
    assert got["rows_written"] == got["row_count"] == ROWS, got
    assert got["parts"] == 4, got
    # the worker process's own peak during the sync (the emulator is another process)
    assert got["peak_mb"] <= CLEAN_WORKER_PEAK_MB < limit_mb, got
