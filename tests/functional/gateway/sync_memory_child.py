"""Run one FULL_REFRESH sync of an N-row CSV object through the real worker (moto in process) and print
JSON: the run's outcome and memory figures. Run as ``python -m tests.functional.gateway.sync_memory_child N``
in a fresh process, so its peak RSS is the sync's (``test_sync_memory.py``, ``bench/bench_gateway_sync.py``).

- ``base_mb``: RSS once the worker's modules (boto3, PynamoDB, DuckDB) are imported: what a Lambda holds;
- ``before_mb``: RSS just before the sync (moto's tables and the source object in memory too);
- ``peak_mb``: the peak RSS during the sync (the high-water mark is reset just before it). ``peak_mb - before_mb`` is the sync's own growth,
  including moto's in-memory copies of the object it serves and of the Parquet written (real S3 streams).
The knowledge index build that follows a sync is the knowledge package's (capped at its ``MAX_ROWS``) and
is left out here.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time


def rss_mb(field: str = "VmRSS") -> float:
    """The process's resident set (``VmRSS``) or its high-water mark (``VmHWM``), in MB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def reset_peak() -> None:
    """Start the high-water mark afresh (Linux: ``5`` into ``clear_refs``), so the peak measured after the
    sync is the sync's, not that of writing the source CSV or of boto3's threaded upload before it."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def main(rows: int) -> dict:
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    os.environ.update({"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                       "RESOURCE_PREFIX": "aiplat-memtest"})
    import duckdb  # noqa: F401

    from chalicelib.gateway.ingest import sync_worker  # noqa: F401

    base = rss_mb()
    import boto3
    from moto import mock_aws

    from chalicelib.core import aws, process_state
    from chalicelib.core.authz import Principal
    from chalicelib.core.config import settings
    from chalicelib.gateway import storage
    from chalicelib.gateway.ingest import connectors, sync
    from chalicelib.identity import users
    from chalicelib.knowledge import indexer
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_global, bootstrap_region

    logging.disable(logging.CRITICAL)
    indexer.on_sync = lambda *a, **k: None
    settings.cache_clear()
    process_state.reset_all(derived=True)
    with mock_aws(), tempfile.TemporaryDirectory() as tmp:
        region = "us-east-1"
        bootstrap_global()
        bootstrap_region(region)
        user = users.create_user("mem@example.com", email_verified=True)
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Mem", residency="us-east", enforce_mfa=False)
        principal = Principal(user.id, ws.id, ("admin",), user.email, ("pwd",), "mem")
        creds = aws.client("sts", region).assume_role(RoleArn="arn:aws:iam::111122223333:role/owner",
                                                      RoleSessionName="mem")["Credentials"]
        s3 = boto3.client("s3", region_name=region, aws_access_key_id=creds["AccessKeyId"],
                          aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"])
        s3.create_bucket(Bucket="mem-source")
        path = os.path.join(tmp, "rows.csv")
        con = duckdb.connect(config={"threads": 1, "memory_limit": "128MB"})  # a bounded setup
        con.execute(f"""COPY (SELECT i AS id, 'user' || i || '@example.com' AS email, i % 997 AS amount,
                        round((i % 100) / 7, 4) AS score,
                        strftime(TIMESTAMP '2024-01-01' + INTERVAL (i % 100000) MINUTE, '%Y-%m-%dT%H:%M:%SZ') AS created_at,
                        'note ' || (i % 13) AS note FROM range({rows}) t(i)) TO '{path}' (HEADER, DELIMITER ',')""")
        con.close()
        with open(path, "rb") as fh:  # one PUT, not the threaded transfer manager
            s3.put_object(Bucket="mem-source", Key="rows/all.csv", Body=fh)
        os.remove(path)
        conn = connectors.create_connector(principal, {"name": "Memory rows", "kind": "s3", "config": {
            "role_arn": "arn:aws:iam::111122223333:role/mem-reader", "bucket": "mem-source", "prefix": "rows/",
            "primary_key": ["id"]}}, None)
        run = sync.request_sync(principal, conn["id"], mode="FULL_REFRESH")
        before = rss_mb()
        reset_peak()
        t0 = time.perf_counter()
        out = sync_worker.run_sync(ws.id, run["id"])
        seconds = time.perf_counter() - t0
        peak = rss_mb("VmHWM")
        got = sync.get_sync_run(principal, run["id"])
        from chalicelib.gateway import models

        ds = models.datasets(region).get(ws.id, conn["dataset"]["id"])
        manifest = storage.read_manifest(region, ds.data_prefix)
    return {"outcome": out.status, "status": got["status"], "rows_written": got["rows_written"],
            "row_count": int(ds.row_count), "parts": len(manifest.base), "seconds": seconds,
            "base_mb": round(base, 1), "before_mb": round(before, 1), "peak_mb": round(peak, 1)}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))), flush=True)
