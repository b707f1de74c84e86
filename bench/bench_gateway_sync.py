"""Sync throughput of an ``s3`` CSV connector (primary key ``id``) through the real worker against in-process
moto, at 100k and 1M rows (one CSV object of all rows but the last 10k, which sit in a second object), beside a same-run reference: DuckDB on ONE thread doing the
same data work on the same rows from one local CSV file (parse with type detection, key, 64-bit row hash,
sort by key, write ZSTD Parquet parts), interleaved with ours, logging off. Then an incremental sync after the
10k rows of the second object changed (1% at 1M) against the full sync of the same dataset, and the peak memory of
a 1M-row sync measured in a fresh process (``tests/functional/gateway/sync_memory_child.py``).

Ours does more than the reference: S3 reads and writes through moto, DynamoDB run/lease/commit items, the
schema observer, Python's exact type rules, progress reports. The knowledge index build that follows a sync
(the knowledge package's, capped at its ``MAX_ROWS``) is switched off while timing.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import quiet

PER_OBJECT = 10_000
# ``BENCH_SYNC_SIZES=1000000 BENCH_SYNC_REPEAT=1 BENCH_SYNC_MEMORY=0`` for a quicker run while iterating
SIZES = tuple(int(n) for n in os.environ.get("BENCH_SYNC_SIZES", "100000,1000000").split(","))
REPEAT = int(os.environ.get("BENCH_SYNC_REPEAT", "3"))
MEASURE_MEMORY = os.environ.get("BENCH_SYNC_MEMORY", "1") != "0"
TARGET_ROWS_S = 100_000
WORKERS_MB = 512  # infra/template.py: the workers function's lambda_memory_size


def _env() -> None:
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                       "RESOURCE_PREFIX": "aiplat-bench"})


def _csv(first: int, count: int, version: int = 0, header: bool = True) -> str:
    lines = ["id,email,amount,score,created_at,note"] if header else []
    for i in range(first, first + count):
        lines.append(f"{i},user{i}@example.com,{i % 997 + version},{(i % 100) / 7:.4f},"
                     f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}T{i % 24:02d}:00:00Z,note {i % 13}")
    return "\n".join(lines) + "\n"


def _reference(src: str, out: str) -> None:
    """DuckDB alone, one thread: the same parse/type/key/hash/sort/write work on one local file."""
    import duckdb

    shutil.rmtree(out, ignore_errors=True)
    con = duckdb.connect(config={"threads": 1, "memory_limit": "160MB", "temp_directory": out + "-spill"})
    con.execute(f"""COPY (SELECT '["' || CAST(id AS VARCHAR) || '"]' AS _key, 'rows' AS _source,
                        CAST(hash(id, email, amount, score, created_at, note) AS VARCHAR) AS _hash, *
                        FROM read_csv('{src}', header = true) ORDER BY _key)
                    TO '{out}' (FORMAT PARQUET, COMPRESSION ZSTD, ROW_GROUP_SIZE 125000, ROW_GROUPS_PER_FILE 2)""")
    con.close()


def _peak_memory() -> dict:
    """A clean worker's peak: the sync alone in a fresh process, the emulator (a moto server) and the setup in
    others (``sync_memory_child`` with an endpoint)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        out = subprocess.run([sys.executable, "-m", "tests.functional.gateway.sync_memory_child", "1000000",
                              f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=True, timeout=1200,
                             env=env)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    _env()
    import boto3
    from moto import mock_aws

    from chalicelib.core import aws, process_state
    from chalicelib.core.authz import Principal
    from chalicelib.core.config import settings
    from chalicelib.gateway.ingest import connectors, sync, sync_worker
    from chalicelib.identity import users
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_global, bootstrap_region

    settings.cache_clear()
    process_state.reset_all(derived=True)
    results: dict[int, dict[str, list[float]]] = {}
    with mock_aws(), tempfile.TemporaryDirectory() as tmp, quiet():
        region = "us-east-1"
        bootstrap_global()
        bootstrap_region(region)
        user = users.create_user("bench@example.com", email_verified=True)
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench", residency="us-east",
                              enforce_mfa=False)
        principal = Principal(user.id, ws.id, ("admin",), user.email, ("pwd",), "bench")
        creds = aws.client("sts", region).assume_role(RoleArn="arn:aws:iam::111122223333:role/owner",
                                                      RoleSessionName="bench")["Credentials"]
        s3 = boto3.client("s3", region_name=region, aws_access_key_id=creds["AccessKeyId"],
                          aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"])
        s3.create_bucket(Bucket="bench-source")

        def one_sync(conn_id: str, mode: str) -> dict:
            run = sync.request_sync(principal, conn_id, mode=mode)
            out = sync_worker.run_sync(ws.id, run["id"])  # no on_changed: the sync alone, without indexing
            assert out.status == "done", out
            got = sync.get_sync_run(principal, run["id"])
            assert got["status"] == "SUCCEEDED", got
            return got

        for size in SIZES:
            big = size - PER_OBJECT
            src = os.path.join(tmp, f"all-{size}.csv")
            with open(src, "w") as fh:
                fh.write(_csv(0, big))
                fh.write(_csv(big, PER_OBJECT, header=False))
            s3.put_object(Bucket="bench-source", Key=f"r{size}/0-big.csv", Body=_csv(0, big).encode())
            s3.put_object(Bucket="bench-source", Key=f"r{size}/1-small.csv", Body=_csv(big, PER_OBJECT).encode())
            conn = connectors.create_connector(principal, {"name": f"Bench {size}", "kind": "s3", "config": {
                "role_arn": "arn:aws:iam::111122223333:role/bench-reader", "bucket": "bench-source",
                "prefix": f"r{size}/", "primary_key": ["id"]}}, None)
            times: dict[str, list[float]] = {"full": [], "ref": [], "incr": []}
            version = 0
            for _ in range(REPEAT):  # interleaved: reference, full sync, incremental sync of 1%
                t0 = time.perf_counter()
                _reference(src, os.path.join(tmp, "ref-out"))
                times["ref"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                run = one_sync(conn["id"], "FULL_REFRESH")
                times["full"].append(time.perf_counter() - t0)
                assert run["rows_read"] == size, run
                version += 1
                s3.put_object(Bucket="bench-source", Key=f"r{size}/1-small.csv",
                              Body=_csv(big, PER_OBJECT, version).encode())
                t0 = time.perf_counter()
                run = one_sync(conn["id"], "INCREMENTAL")
                times["incr"].append(time.perf_counter() - t0)
                assert run["rows_read"] == PER_OBJECT and run["rows_written"] == PER_OBJECT, run
            results[size] = times
    memory = _peak_memory() if MEASURE_MEMORY else None
    med = {size: {k: statistics.median(v) for k, v in t.items()} for size, t in results.items()}
    lines = ["### Gateway sync (s3 CSV connector, in-process moto, workers' DuckDB on 1 thread)", "",
             f"Median of {REPEAT} interleaved runs each (spread min-max in brackets). Reference: DuckDB alone on one "
             "thread, same rows from one local CSV, parse + type + key + hash + sort + ZSTD Parquet.", "",
             "| operation | rows | seconds | rows/s | reference s | ratio | target |", "|---|---:|---:|---:|---:|---:|---|"]
    for size in SIZES:
        m, t = med[size], results[size]
        lines.append(f"| full sync (FULL_REFRESH), 2 objects | {size:,} | {m['full']:.2f} "
                     f"[{min(t['full']):.2f}-{max(t['full']):.2f}] | {size / m['full']:,.0f} | {m['ref']:.2f} "
                     f"[{min(t['ref']):.2f}-{max(t['ref']):.2f}] | {m['full'] / m['ref']:.2f}x | "
                     f">= {TARGET_ROWS_S:,} rows/s |")
    for size in SIZES:
        m, t = med[size], results[size]
        lines.append(f"| incremental, the {PER_OBJECT:,}-row object changed ({PER_OBJECT / size:.0%} of rows) | {PER_OBJECT:,} | "
                     f"{m['incr']:.2f} [{min(t['incr']):.2f}-{max(t['incr']):.2f}] | {PER_OBJECT / m['incr']:,.0f} | "
                     f"full sync {m['full']:.2f} | {m['incr'] / m['full']:.1%} of full | <= 10% of full at 1M |")
    if len(SIZES) > 1:
        growth = med[SIZES[-1]]["full"] / med[SIZES[0]]["full"]
        ref_growth = med[SIZES[-1]]["ref"] / med[SIZES[0]]["ref"]
        lines += ["", f"Growth {SIZES[0]:,} -> {SIZES[-1]:,} rows: full sync x{growth:.1f} time "
                  f"(reference x{ref_growth:.1f})."]
    if memory is None:
        print("\n".join(lines) + "\n", flush=True)
        return
    lines += ["", "| peak memory, 1M-row sync by a clean worker (its own process; emulator and setup in others) | MB |",
              "|---|---:|",
              f"| RSS with the worker's modules imported (a Lambda's baseline) | {memory['base_mb']:.0f} |",
              f"| RSS just before the sync | {memory['before_mb']:.0f} |",
              f"| peak RSS of the worker during the sync, against the workers function's {WORKERS_MB} MB and the "
              f"400 MB target | {memory['peak_mb']:.0f} |",
              f"| growth during the sync | {memory['peak_mb'] - memory['before_mb']:.0f} |",
              f"| (that run took {memory['seconds']:.1f} s, {1_000_000 / memory['seconds']:,.0f} rows/s, one object) | |"]
    print("\n".join(lines) + "\n", flush=True)


if __name__ == "__main__":
    main()
