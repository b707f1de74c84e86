"""A 1M-row CSV sync finishes within the workers function's memory (completion and peak RSS are asserted,
never time). The sync runs in a fresh process (``sync_memory_child.py``) so its peak RSS is its own."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from infra.template import GROUP_SETTINGS

ROOT = Path(__file__).resolve().parents[3]
ROWS = 1_000_000


def test_a_million_row_csv_syncs_within_the_workers_memory() -> None:
    limit_mb = GROUP_SETTINGS["workers"]["lambda_memory_size"]
    out = subprocess.run([sys.executable, "-m", "tests.functional.gateway.sync_memory_child", str(ROWS)], cwd=ROOT,
                         capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["outcome"] == "done", got
    assert got["status"] == "SUCCEEDED", got
    assert got["rows_written"] == got["row_count"] == ROWS, got
    assert got["parts"] == 4, got
    # what a Lambda holds (the worker's modules) plus what the sync added at its peak, moto's in-memory
    # copies of the source object and of the written Parquet included (real S3 streams them)
    assert got["base_mb"] + got["peak_mb"] - got["before_mb"] < limit_mb, got
