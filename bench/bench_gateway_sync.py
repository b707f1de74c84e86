"""Sync throughput of an ``s3`` CSV connector (primary key ``id``) through the real worker against in-process moto
(each sync timed from its request through the service, its queued message handed to the worker's SQS handler as
Lambda would and acknowledged, to its run read back), at 100k and 1M rows (one CSV object of all rows but the last
11k, which sit in a second object of 10k and a third of 1k), beside same-run references with the workers' DuckDB settings (ONE thread, the
same 160 MB cap): DuckDB alone doing the same data work on the same rows (read the CSV with its type detection,
key, 64-bit row hash stored as an integer as ours is, sort by key, write ZSTD Parquet parts), and the same plus the
same S3 transfers as the sync (the source objects downloaded from moto, the parts uploaded to it, one streamed PUT
each), interleaved with ours (the order alternating), logging off. Then an incremental sync after the 10k rows of
the second object changed (1% of the rows at 1M, 10% at 100k), and the worker's time when only a third object of
1k rows changed (1% at 100k), against the full sync of the same dataset, with the
AWS calls of each timed sync and the time spent inside them (the in-process emulator's share of the time); an
incremental sync's floors (a sync requested when nothing changed since the last, and the changed object's data
work on a DuckDB connection opened before, as a sync's is) beside the targets' allowance; a growth
table 100k -> 1M, and the peak memory of a 1M-row sync measured in a fresh process
(``tests/functional/gateway/sync_memory_child.py``).

Ours does more than the references: DynamoDB run/lease/commit items, the schema observer and the validation
of DuckDB's sniffed types against the project's typing rules, the comparison with the previous snapshot,
progress reports. The knowledge index build that follows a sync (the knowledge package's, capped at its
``MAX_ROWS``) is switched off while timing.
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

from bench.common import AwsCalls, quiet, use_emulator

PER_OBJECT = 10_000
SMALL_CHANGE = 1_000  # a third object: 1% of 100k rows, changed alone for the worker-time comparison
# ``BENCH_SYNC_SIZES=1000000 BENCH_SYNC_REPEAT=1 BENCH_SYNC_MEMORY=0`` for a quicker run while iterating
SIZES = tuple(int(n) for n in os.environ.get("BENCH_SYNC_SIZES", "100000,1000000").split(","))
REPEAT = int(os.environ.get("BENCH_SYNC_REPEAT", "3"))
MEASURE_MEMORY = os.environ.get("BENCH_SYNC_MEMORY", "1") != "0"
TARGET_ROWS_S = 100_000
WORKERS_MB = 512  # infra/template.py: the workers function's lambda_memory_size


def _env() -> None:
    use_emulator()


def _csv(first: int, count: int, version: int = 0, header: bool = True) -> str:
    lines = ["id,email,amount,score,created_at,note"] if header else []
    for i in range(first, first + count):
        lines.append(f"{i},user{i}@example.com,{i % 997 + version},{(i % 100) / 7:.4f},"
                     f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}T{i % 24:02d}:00:00Z,note {i % 13}")
    return "\n".join(lines) + "\n"


def _reference(src: str, out: str, s3=None, bucket: str = "", keys: tuple[str, ...] = (), db=None) -> None:
    """DuckDB alone, one thread, the workers' memory cap: the same parse/type/key/hash/sort/write work on one
    local file. With ``s3``: first the source ``keys`` downloaded from ``bucket`` into ``src`` (streamed), and
    the Parquet parts uploaded after (one streamed PUT each), as the sync transfers them. With ``db``: on a
    cursor of that database, opened before (as a sync's stage is), instead of a new connection."""
    if s3 is not None:
        with open(src, "wb") as fh:
            for n, key in enumerate(keys):
                body = s3.get_object(Bucket=bucket, Key=key)["Body"]
                if n:
                    body.readline()  # the header of every object but the first
                shutil.copyfileobj(body, fh, 1 << 20)
    shutil.rmtree(out, ignore_errors=True)
    con = db.cursor() if db is not None else _connect(out + "-spill")
    con.execute(f"""COPY (SELECT '["' || CAST(id AS VARCHAR) || '"]' AS _key, 'rows' AS _source,
                        hash(id, email, amount, score, created_at, note) AS _hash, *
                        FROM read_csv('{src}', header = true) ORDER BY _key)
                    TO '{out}' (FORMAT PARQUET, COMPRESSION ZSTD, ROW_GROUP_SIZE 250000, ROW_GROUPS_PER_FILE 1)""")
    con.close()
    if s3 is not None:
        for name in sorted(os.listdir(out)):
            with open(os.path.join(out, name), "rb") as fh:
                s3.put_object(Bucket=bucket, Key=f"reference-out/{name}", Body=fh)


def _allowance(size: int) -> float | None:
    """The incremental sync's target at ``size`` rows, as a share of the full sync: 6% for the 1% change at 1M,
    20% for a change of 10% or more."""
    if size >= 1_000_000:
        return 0.06
    return 0.20 if PER_OBJECT / size >= 0.1 else None


def _connect(spill: str):
    import duckdb

    from chalicelib.gateway.ingest.typed_rows import MEMORY_LIMIT

    return duckdb.connect(config={"threads": 1, "memory_limit": MEMORY_LIMIT, "temp_directory": spill})


def _peak_memory() -> dict:
    """A clean worker's peak: the sync alone in a fresh process, the emulator (a moto server) and the setup in
    others (``sync_memory_child`` with an endpoint)."""
    from infra.emulator.process import moto_process

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    with moto_process(env) as endpoint:
        out = subprocess.run([sys.executable, "-m", "tests.functional.gateway.sync_memory_child", "1000000", endpoint],
                             capture_output=True, text=True, check=True, timeout=1200, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    _env()
    import boto3
    from moto import mock_aws

    from chalicelib.core import aws, process_state
    from chalicelib.core.authz import Principal
    from chalicelib.core.config import settings
    from chalicelib.core.tenancy import scope_of
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
        scope = scope_of(principal)
        creds = aws.client("sts", region).assume_role(RoleArn="arn:aws:iam::111122223333:role/owner",
                                                      RoleSessionName="bench")["Credentials"]
        s3 = boto3.client("s3", region_name=region, aws_access_key_id=creds["AccessKeyId"],
                          aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"])
        s3.create_bucket(Bucket="bench-source")

        sqs, queue_url = aws.client("sqs", region), aws.queue_url(sync.QUEUE, region)
        calls = AwsCalls()  # every AWS call of a timed sync (request, queue, worker, run read) and its time
        warm = _connect(os.path.join(tmp, "warm-spill"))

        worker_s: list[float] = []  # the worker handler's time of the last ``one_sync``

        def one_sync(conn_id: str, mode: str) -> dict:
            """Requested, its message received and handed to the worker's handler as Lambda would (no
            on_changed: the sync alone, without indexing), acknowledged, and its run read."""
            run = sync.request_sync(scope, conn_id, mode=mode)
            msg = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1, AttributeNames=["All"])["Messages"][0]
            record = {"messageId": msg["MessageId"], "receiptHandle": msg["ReceiptHandle"], "body": msg["Body"],
                      "attributes": msg["Attributes"], "eventSource": "aws:sqs", "awsRegion": region}
            t0 = time.perf_counter()
            assert sync_worker.handle({"Records": [record]}) == {"batchItemFailures": []}
            worker_s[:] = [time.perf_counter() - t0]
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])
            got = sync.get_sync_run(scope, run["id"])
            assert got["status"] == "SUCCEEDED", got
            return got

        for size in SIZES:
            big = size - PER_OBJECT - SMALL_CHANGE
            src = os.path.join(tmp, f"all-{size}.csv")
            with open(src, "w") as fh:
                fh.write(_csv(0, big))
                fh.write(_csv(big, PER_OBJECT, header=False))
                fh.write(_csv(big + PER_OBJECT, SMALL_CHANGE, header=False))
            s3.put_object(Bucket="bench-source", Key=f"r{size}/0-big.csv", Body=_csv(0, big).encode())
            s3.put_object(Bucket="bench-source", Key=f"r{size}/1-small.csv", Body=_csv(big, PER_OBJECT).encode())
            s3.put_object(Bucket="bench-source", Key=f"r{size}/2-tiny.csv",
                          Body=_csv(big + PER_OBJECT, SMALL_CHANGE).encode())
            conn = connectors.create_connector(scope, {"name": f"Bench {size}", "kind": "s3", "config": {
                "role_arn": "arn:aws:iam::111122223333:role/bench-reader", "bucket": "bench-source",
                "prefix": f"r{size}/", "primary_key": ["id"]}}, None)
            times: dict[str, list[float]] = {k: [] for k in (
                "full", "ref", "ref_s3", "ref_changed", "ref_warm", "incr", "full_aws", "incr_aws", "full_calls",
                "incr_calls", "still", "still_aws", "still_calls", "full_worker", "tiny_worker", "still_worker")}
            version = 0
            keys = (f"r{size}/0-big.csv", f"r{size}/1-small.csv")

            def references(src: str = src, times: dict = times, keys: tuple = keys) -> None:
                t0 = time.perf_counter()
                _reference(src, os.path.join(tmp, "ref-out"))
                times["ref"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                _reference(os.path.join(tmp, "ref-src.csv"), os.path.join(tmp, "ref-out"), s3, "bench-source", keys)
                times["ref_s3"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()  # the same work on the changed object alone: a floor for the incremental
                _reference(os.path.join(tmp, "ref-src.csv"), os.path.join(tmp, "ref-out"), s3, "bench-source",
                           keys[1:])
                times["ref_changed"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()  # the same on a connection opened before, as a sync's stage is
                _reference(os.path.join(tmp, "ref-src.csv"), os.path.join(tmp, "ref-out"), s3, "bench-source",
                           keys[1:], db=warm)
                times["ref_warm"].append(time.perf_counter() - t0)

            for r in range(REPEAT):  # interleaved, the order alternating: references, full sync, incremental
                if r % 2 == 0:
                    references()
                calls.reset()
                t0 = time.perf_counter()
                run = one_sync(conn["id"], "FULL_REFRESH")
                times["full"].append(time.perf_counter() - t0)
                times["full_aws"].append(calls.seconds)
                times["full_calls"].append(sum(calls.seen.values()))
                times["full_worker"].append(worker_s[0])
                assert run["rows_read"] == size, run
                if r % 2 == 1:
                    references()
                version += 1
                s3.put_object(Bucket="bench-source", Key=f"r{size}/1-small.csv",
                              Body=_csv(big, PER_OBJECT, version).encode())
                calls.reset()
                t0 = time.perf_counter()
                run = one_sync(conn["id"], "INCREMENTAL")
                times["incr"].append(time.perf_counter() - t0)
                times["incr_aws"].append(calls.seconds)
                times["incr_calls"].append(sum(calls.seen.values()))
                assert run["rows_read"] == PER_OBJECT and run["rows_written"] == PER_OBJECT, run
                calls.reset()  # nothing changed since: what any sync costs (request, queue, lease, listing, commit)
                t0 = time.perf_counter()
                run = one_sync(conn["id"], "INCREMENTAL")
                times["still"].append(time.perf_counter() - t0)
                times["still_aws"].append(calls.seconds)
                times["still_calls"].append(sum(calls.seen.values()))
                times["still_worker"].append(worker_s[0])
                assert run["rows_read"] == 0 and run["rows_written"] == 0, run
                s3.put_object(Bucket="bench-source", Key=f"r{size}/2-tiny.csv",  # 1% of the rows at 100k
                              Body=_csv(big + PER_OBJECT, SMALL_CHANGE, version).encode())
                run = one_sync(conn["id"], "INCREMENTAL")
                times["tiny_worker"].append(worker_s[0])
                assert run["rows_read"] == SMALL_CHANGE and run["rows_written"] == SMALL_CHANGE, run
            results[size] = times
        calls.close()
        warm.close()
    memory = _peak_memory() if MEASURE_MEMORY else None
    med = {size: {k: statistics.median(v) for k, v in t.items()} for size, t in results.items()}
    lines = ["### Gateway sync (s3 CSV connector, in-process moto, workers' DuckDB on 1 thread, 160 MB cap)", "",
             f"Median of {REPEAT} interleaved runs each (spread min-max in brackets). References with the same DuckDB "
             "settings: DuckDB alone on the same rows from one local CSV (read with type detection + key + hash + "
             "sort + ZSTD Parquet), and the same with the sync's S3 transfers (source objects downloaded from moto, "
             "parts uploaded to it, streamed). An incremental sync is also shown beside the latter's work on the "
             "changed object alone (downloaded, typed, keyed, hashed, sorted, written and uploaded, without the "
             "comparison with the old rows a sync needs): the floor of the data work it could cost. The floors table "
             "adds what any sync costs: one requested when nothing changed since the last (no object read, no "
             "part written), and the changed object's data work on a DuckDB connection opened before, as a "
             "sync's stage is a cursor of the process's database (the columns above open one per run, about "
             "0.01 s).", "",
             "| operation | rows | seconds | rows/s | DuckDB alone s | ratio | DuckDB + S3 s | ratio | target |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for size in SIZES:
        m, t = med[size], results[size]
        lines.append(f"| full sync (FULL_REFRESH), 2 objects | {size:,} | {m['full']:.2f} "
                     f"[{min(t['full']):.2f}-{max(t['full']):.2f}] | {size / m['full']:,.0f} | {m['ref']:.2f} "
                     f"[{min(t['ref']):.2f}-{max(t['ref']):.2f}] | {m['full'] / m['ref']:.2f}x | {m['ref_s3']:.2f} "
                     f"[{min(t['ref_s3']):.2f}-{max(t['ref_s3']):.2f}] | {m['full'] / m['ref_s3']:.2f}x | "
                     f"{'<= 1.5x DuckDB at 1M' if size >= 1_000_000 else '-'} |")
    lines += ["", "| incremental sync | rows changed | of the dataset | seconds | full sync s | incremental / full | target "
              "| AWS calls, incremental (full) | s inside them, incremental (full) | DuckDB + S3 on the changed "
              "object alone s | ratio |",
              "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for size in SIZES:
        m, t = med[size], results[size]
        share, allowed = PER_OBJECT / size, _allowance(size)
        target = f"<= {allowed:.0%} of full" if allowed else "-"
        lines.append(f"| the {PER_OBJECT:,}-row object changed | {PER_OBJECT:,} | {share:.0%} of {size:,} | "
                     f"{m['incr']:.2f} [{min(t['incr']):.2f}-{max(t['incr']):.2f}] | {m['full']:.2f} | "
                     f"{m['incr'] / m['full']:.1%} | {target} | {m['incr_calls']:.0f} ({m['full_calls']:.0f}) | "
                     f"{m['incr_aws']:.3f} ({m['full_aws']:.3f}) | {m['ref_changed']:.3f} "
                     f"[{min(t['ref_changed']):.3f}-{max(t['ref_changed']):.3f}] | {m['incr'] / m['ref_changed']:.1f}x |")
    lines += ["", f"| worker time (the queue handler alone) | rows | full sync s | {SMALL_CHANGE:,}-row object changed s "
              "| incremental / full | nothing changed s | target |", "|---|---:|---:|---:|---:|---:|---|"]
    for size in SIZES:
        m, t = med[size], results[size]

        def span(k: str, m: dict = m, t: dict = t) -> str:
            return f"{m[k]:.3f} [{min(t[k]):.3f}-{max(t[k]):.3f}]"

        lines.append(f"| {SMALL_CHANGE / size:.1%} of the rows changed | {size:,} | {span('full_worker')} | "
                     f"{span('tiny_worker')} | {m['tiny_worker'] / m['full_worker']:.1%} | {span('still_worker')} | "
                     f"{'<= 20% of full at 100k' if size == 100_000 else '-'} |")
    lines += ["", "| an incremental sync's floors | " + " | ".join(f"{n:,} rows" for n in SIZES) + " |",
              "|---|" + "---:|" * len(SIZES),
              "| a sync with nothing changed since the last (request, queue, lease, listing, commit, run read) s | "
              + " | ".join(f"{med[n]['still']:.3f} [{min(results[n]['still']):.3f}-{max(results[n]['still']):.3f}]"
                           for n in SIZES) + " |",
              "| its AWS calls (s inside them) | "
              + " | ".join(f"{med[n]['still_calls']:.0f} ({med[n]['still_aws']:.3f})" for n in SIZES) + " |",
              "| DuckDB + S3 on the changed object alone, on a connection opened before (as a sync's is) s | "
              + " | ".join(f"{med[n]['ref_warm']:.3f} [{min(results[n]['ref_warm']):.3f}-"
                           f"{max(results[n]['ref_warm']):.3f}]" for n in SIZES) + " |",
              "| the two together s | " + " | ".join(f"{med[n]['still'] + med[n]['ref_warm']:.3f}" for n in SIZES) + " |",
              "| the target's allowance (its share of the full sync) s | "
              + " | ".join(f"{a * med[n]['full']:.3f} ({a:.0%})" if (a := _allowance(n)) else "-" for n in SIZES)
              + " |"]
    if len(SIZES) > 1:
        lines += ["", "| growth | " + " | ".join(f"{n:,} rows" for n in SIZES) + f" | x per {SIZES[-1] // SIZES[0]}x rows |",
                  "|---|" + "---:|" * (len(SIZES) + 1)]
        for label, k in (("full sync s", "full"), ("DuckDB alone s", "ref"), ("DuckDB + S3 s", "ref_s3"),
                         ("incremental s (10k rows changed)", "incr")):
            lines.append(f"| {label} | " + " | ".join(f"{med[n][k]:.2f}" for n in SIZES)
                         + f" | x{med[SIZES[-1]][k] / med[SIZES[0]][k]:.1f} |")
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
