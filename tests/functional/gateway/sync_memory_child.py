"""Run one FULL_REFRESH sync of an N-row CSV object through the real worker and print JSON: the run's
outcome and memory figures. Run as ``python -m tests.functional.gateway.sync_memory_child N [ENDPOINT]`` in a
fresh process, so its peak RSS is the sync's (``test_sync_memory.py``, ``bench/bench_gateway_sync.py``). With
an ``ENDPOINT`` (a moto server in another process) the emulator and the setup (writing and uploading the
CSV) run in other processes, so this one is a clean worker that only runs the sync; without one moto and the
setup run in process.

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


def _environment(endpoint: str | None) -> None:
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    os.environ.update({"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                       "RESOURCE_PREFIX": "aiplat-memtest"})
    if endpoint:
        os.environ["AWS_ENDPOINT_URL"] = endpoint


def prepare(rows: int, endpoint: str | None, tmp: str) -> dict:
    """The stores, a workspace, the N-row CSV in a source bucket, a connector and a queued FULL_REFRESH run."""
    import boto3
    import duckdb

    from chalicelib.core import aws
    from chalicelib.core.authz import Principal
    from chalicelib.core.tenancy import scope_of
    from chalicelib.gateway.ingest import connectors, sync
    from chalicelib.identity import users
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_global, bootstrap_region

    region = "us-east-1"
    bootstrap_global()
    bootstrap_region(region)
    user = users.create_user("mem@example.com", email_verified=True)
    ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Mem", residency="us-east", enforce_mfa=False)
    principal = Principal(user.id, ws.id, ("admin",), user.email, ("pwd",), "mem")
    creds = aws.client("sts", region).assume_role(RoleArn="arn:aws:iam::111122223333:role/owner",
                                                  RoleSessionName="mem")["Credentials"]
    s3 = boto3.client("s3", region_name=region, endpoint_url=endpoint, aws_access_key_id=creds["AccessKeyId"],
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
    conn = connectors.create_connector(scope_of(principal), {"name": "Memory rows", "kind": "s3", "config": {
        "role_arn": "arn:aws:iam::111122223333:role/mem-reader", "bucket": "mem-source", "prefix": "rows/",
        "primary_key": ["id"]}}, None)
    run = sync.request_sync(scope_of(principal), conn["id"], mode="FULL_REFRESH")
    return {"workspace_id": ws.id, "user_id": user.id, "email": user.email, "run_id": run["id"],
            "dataset_id": conn["dataset"]["id"]}


def run_prepared(prepared: dict, base: float) -> dict:
    """The sync of a prepared run, with the memory it takes: RSS before, peak during (reset just before)."""
    from chalicelib.core.authz import Principal
    from chalicelib.core.tenancy import RequestScope
    from chalicelib.gateway import models, storage
    from chalicelib.gateway.ingest import sync, sync_worker

    region = "us-east-1"
    ws = prepared["workspace_id"]
    principal = Principal(prepared["user_id"], ws, ("admin",), prepared["email"], ("pwd",), "mem")
    before = rss_mb()
    reset_peak()
    t0 = time.perf_counter()
    out = sync_worker.run_sync(ws, prepared["run_id"])
    seconds = time.perf_counter() - t0
    peak = rss_mb("VmHWM")
    got = sync.get_sync_run(RequestScope(principal, region), prepared["run_id"])
    ds = models.datasets(region).get(ws, prepared["dataset_id"])
    manifest = storage.read_manifest(region, ds.data_prefix)
    return {"outcome": out.status, "status": got["status"], "rows_written": got["rows_written"],
            "row_count": int(ds.row_count), "parts": len(manifest.base), "seconds": seconds,
            "base_mb": round(base, 1), "before_mb": round(before, 1), "peak_mb": round(peak, 1)}


def main(rows: int, endpoint: str | None = None) -> dict:
    """In process (no ``endpoint``): moto, the setup and the sync in this process. With an ``endpoint``: the
    setup runs in another process (``--prepare``), so this one is a clean worker that only runs the sync."""
    _environment(endpoint)
    if endpoint:
        import subprocess

        setup = subprocess.run([sys.executable, "-m", "tests.functional.gateway.sync_memory_child", "--prepare",
                                str(rows), endpoint], capture_output=True, text=True, check=True)
        prepared = json.loads(setup.stdout.strip().splitlines()[-1])
    import duckdb  # noqa: F401

    from chalicelib.gateway.ingest import sync_worker  # noqa: F401

    base = rss_mb()  # what a Lambda holds once the worker's modules are imported
    from chalicelib.core import process_state
    from chalicelib.core.config import settings
    from chalicelib.knowledge import indexer

    logging.disable(logging.CRITICAL)
    indexer.on_sync = lambda *a, **k: None
    settings.cache_clear()
    process_state.reset_all(derived=True)
    if endpoint:
        return run_prepared(prepared, base)
    from moto import mock_aws

    with mock_aws(), tempfile.TemporaryDirectory() as tmp:
        return run_prepared(prepare(rows, None, tmp), base)


if __name__ == "__main__":
    if sys.argv[1] == "--prepare":
        _environment(sys.argv[3])
        logging.disable(logging.CRITICAL)
        with tempfile.TemporaryDirectory() as scratch:
            print(json.dumps(prepare(int(sys.argv[2]), sys.argv[3], scratch)), flush=True)
    else:
        print(json.dumps(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)), flush=True)
