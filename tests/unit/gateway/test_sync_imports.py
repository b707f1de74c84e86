from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_workers_entry_registers_sync_handler_without_loading_duckdb_or_graphql() -> None:
    code = ("import sys, app; from chalicelib.workers.jobs import QUEUE_HANDLERS; "
            "assert 'sync-jobs' in QUEUE_HANDLERS; "
            "import chalicelib.gateway.ingest.sync_worker; "
            "print(sorted(m for m in ('duckdb', 'graphql') if m in sys.modules))")
    env = {**os.environ, "ROUTE_GROUP": "workers", "AWS_DEFAULT_REGION": "us-east-1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_lambda_delegate_raises_on_failed_records_so_sqs_redelivers() -> None:
    import pytest

    from chalicelib.workers import jobs

    assert jobs.as_lambda(lambda e: {"batchItemFailures": []}, {}) == {"batchItemFailures": []}
    with pytest.raises(jobs.RecordFailed):
        jobs.as_lambda(lambda e: {"batchItemFailures": [{"itemIdentifier": "m-1"}]}, {})
