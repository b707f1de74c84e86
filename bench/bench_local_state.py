"""`make run`'s local state (``infra/emulator/``): what a snapshot costs and how long a restart takes against
the state's size, each beside the raw write or read of the same bytes in the same run; and a short soak
of the emulator (transactions, conditional puts and queries at a steady rate, snapshots on) with p50, p99
and the process's RSS per minute beside the first minute. Each state size runs in a fresh interpreter
(moto's state is per process); everything runs on this machine against the emulator over HTTP."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from infra.emulator.process import free_port

ROOT = Path(__file__).resolve().parent.parent
SIZES = ((1_000, 1), (10_000, 25), (40_000, 100))  # (items, MB of objects)
OBJECT_BYTES = 1024 * 1024
SOAK_SECONDS = int(os.environ.get("BENCH_SOAK_SECONDS", "180"))
SOAK_RATE = 10  # requests per second
SOAK_TABLE_ITEMS = 5_000


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _env(port: int) -> None:
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"})


def _client(service: str) -> Any:
    import boto3

    return boto3.client(service, region_name="us-east-1")


def _table(ddb: Any, name: str) -> None:
    ddb.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                                {"AttributeName": "sk", "KeyType": "RANGE"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "sk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")


def _item(n: int) -> dict[str, Any]:
    return {"pk": {"S": f"ws_{n % 100:04d}"}, "sk": {"S": f"item_{n:08d}"}, "body": {"S": "x" * 300},
            "n": {"N": str(n)}}


def _populate(items: int, mb: int) -> None:
    ddb, s3 = _client("dynamodb"), _client("s3")
    _table(ddb, "bench-state")
    for start in range(0, items, 25):
        ddb.batch_write_item(RequestItems={"bench-state": [{"PutRequest": {"Item": _item(n)}}
                                                           for n in range(start, min(items, start + 25))]})
    s3.create_bucket(Bucket="bench-state-objects")
    s3.put_bucket_versioning(Bucket="bench-state-objects", VersioningConfiguration={"Status": "Enabled"})
    for n in range(mb):
        s3.put_object(Bucket="bench-state-objects", Key=f"objects/{n:05d}.bin", Body=os.urandom(OBJECT_BYTES))
    kms = _client("kms")
    for _ in range(5):
        kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")


# --- one state size, in a fresh interpreter -----------------------------------------------------------

def _one_size(items: int, mb: int) -> dict[str, Any]:
    from infra.emulator import serialise_writes, snapshot
    from infra.emulator.server import PersistentEmulator

    serialise_writes()
    port = free_port()
    _env(port)
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        emulator = PersistentEmulator("127.0.0.1", port, state, interval=3600, stop_budget=3.0)
        emulator.start()
        _populate(items, mb)
        began = time.perf_counter()
        assert emulator.save(timeout=600)
        saved_wall = time.perf_counter() - began
        facts = snapshot.recorded(state / "emulator")
        data = os.urandom(facts["bytes"])
        raw = state / "raw.bin"
        began = time.perf_counter()
        with open(raw, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        raw_write = time.perf_counter() - began
        _client("dynamodb").put_item(TableName="bench-state", Item=_item(items + 1))  # one unsaved change
        began = time.perf_counter()
        stopped = emulator.stop()
        stop_seconds = time.perf_counter() - began
        if stopped["background_pid"]:  # let the background writer finish before the restart is timed
            while snapshot.generations(state / "emulator")[0][0] < emulator._generation:
                time.sleep(0.05)
        rss_before = _rss_mb()
        restart = subprocess.run(
            [sys.executable, "-c", "import json, sys, time; from pathlib import Path; "
             "from infra.emulator import snapshot; import moto.dynamodb.models, moto.s3.models, moto.kms.models, "
             "moto.sqs.models, moto.sts.models; snapshot.dispatch_table(); t = time.perf_counter(); "
             "g, n = snapshot.load_newest(Path(sys.argv[1])); "
             "print(json.dumps({'generation': g, 'backends': n, 'seconds': time.perf_counter() - t}))",
             str(state / "emulator")], cwd=ROOT, capture_output=True, text=True, check=True, timeout=600)
        loaded = json.loads(restart.stdout)
        began = time.perf_counter()
        (state / "emulator" / f"state-{loaded['generation']:012d}.pickle").read_bytes()
        raw_read = time.perf_counter() - began
    return {"items": items, "mb": mb, "bytes": facts["bytes"], "pause": emulator.last_pause,
            "write": facts["seconds"], "save_wall": saved_wall, "raw_write": raw_write, "stop": stop_seconds,
            "stop_saved": stopped["saved"], "restore": loaded["seconds"], "raw_read": raw_read, "rss": rss_before}


def _sizes_section() -> str:
    rows = []
    for items, mb in SIZES:
        done = subprocess.run([sys.executable, "-m", "bench.bench_local_state", "--size", str(items), str(mb)],
                              cwd=ROOT, capture_output=True, text=True, timeout=1800)
        if done.returncode:
            raise RuntimeError(done.stderr[-3000:])
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    lines = ["### Snapshot and restart against the state's size", "",
             "Each state: DynamoDB items of ~400 bytes, 1 MiB S3 objects (versioned), 5 RSA KMS keys. *Pause* is "
             "how long the fork held the emulator's writes; the child then writes the snapshot while the emulator "
             "serves. *Stop* is `PersistentEmulator.stop()` with one unsaved change (budget 3 s: a larger state "
             "would finish writing in the background). *Restore* loads the newest snapshot in a fresh interpreter "
             "(moto's imports not counted).", "",
             "| items | MB objects | snapshot MB | pause (ms) | write (s) | **ref** raw write+fsync (s) | stop (s) | "
             "saved within stop | restore (s) | **ref** raw read (s) |",
             "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['items']:,} | {r['mb']} | {r['bytes'] / 2**20:.1f} | {r['pause'] * 1000:.1f} | "
                     f"{r['write']:.2f} | {r['raw_write']:.2f} | {r['stop']:.2f} | {'yes' if r['stop_saved'] else 'no'} | "
                     f"{r['restore']:.2f} | {r['raw_read']:.3f} |")
    largest = rows[-1]
    lines += ["", f"A `kill -9` loses at most one interval (`LOCAL_SNAPSHOT_SECONDS`, 1 s) plus one snapshot's write: "
              f"{1 + largest['write']:.1f} s at the largest state here.", ""]
    return "\n".join(lines) + "\n"


# --- the soak ---------------------------------------------------------------------------------------

def _soak_section() -> str:
    from infra.emulator import serialise_writes
    from infra.emulator.server import PersistentEmulator

    serialise_writes()
    port = free_port()
    _env(port)
    with tempfile.TemporaryDirectory() as tmp:
        emulator = PersistentEmulator("127.0.0.1", port, Path(tmp), interval=1.0)
        emulator.start()
        ddb = _client("dynamodb")
        _table(ddb, "bench-soak")
        for start in range(0, SOAK_TABLE_ITEMS, 25):
            ddb.batch_write_item(RequestItems={"bench-soak": [{"PutRequest": {"Item": _item(n)}}
                                                              for n in range(start, start + 25)]})
        samples: list[tuple[float, float]] = []  # (seconds since start, latency)
        rss: dict[int, float] = {}
        began = time.monotonic()
        n = 0
        stop = threading.Event()

        def sample_rss() -> None:
            while not stop.wait(5):
                rss[int((time.monotonic() - began) // 60)] = _rss_mb()

        sampler = threading.Thread(target=sample_rss, daemon=True)
        sampler.start()
        while time.monotonic() - began < SOAK_SECONDS:
            due = began + n / SOAK_RATE
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            t = time.perf_counter()
            kind = n % 10
            if kind < 4:  # a one-item transaction with a condition check, as agent steps and invitations do
                m = 1 + n % (SOAK_TABLE_ITEMS - 1)  # never item 0, the one the condition checks
                ddb.transact_write_items(TransactItems=[
                    {"Update": {"TableName": "bench-soak", "Key": {"pk": {"S": f"ws_{m % 100:04d}"},
                                                                   "sk": {"S": f"item_{m:08d}"}},
                                "UpdateExpression": "SET hits = if_not_exists(hits, :z) + :one",
                                "ExpressionAttributeValues": {":z": {"N": "0"}, ":one": {"N": "1"}}}},
                    {"ConditionCheck": {"TableName": "bench-soak", "Key": {"pk": {"S": "ws_0000"}, "sk": {"S": "item_00000000"}},
                                        "ConditionExpression": "attribute_exists(pk)"}}])
            elif kind < 7:
                ddb.put_item(TableName="bench-soak", Item=_item(SOAK_TABLE_ITEMS + n),
                             ConditionExpression="attribute_not_exists(pk)")
            else:
                ddb.query(TableName="bench-soak", KeyConditionExpression="pk = :p", Limit=20,
                          ExpressionAttributeValues={":p": {"S": f"ws_{n % 100:04d}"}})
            samples.append((time.monotonic() - began, time.perf_counter() - t))
            n += 1
        stop.set()
        rss[int((time.monotonic() - began) // 60)] = _rss_mb()
        status = emulator.status()
        emulator.stop()
    minutes = sorted({int(s // 60) for s, _ in samples})
    lines = ["### Soak: the emulator under a steady mix, snapshots on", "",
             f"{SOAK_RATE} requests/s asked ({len(samples) / SOAK_SECONDS:.1f}/s achieved by one synchronous client) "
             f"for {SOAK_SECONDS} s on a {SOAK_TABLE_ITEMS:,}-item table: 40% two-item "
             "transactions (an update and a condition check), 30% conditional puts of new items, 30% queries; the "
             "state is snapshotted every second while it changes. Per minute, beside the first minute "
             "(the reference):", "",
             "| minute | requests | p50 (ms) | p99 (ms) | p50 vs minute 1 | p99 vs minute 1 | RSS (MB) | RSS vs minute 1 |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    first: dict[str, float] = {}
    for m in minutes:
        lat = sorted(latency for s, latency in samples if int(s // 60) == m)
        if len(lat) < SOAK_RATE * 10:  # the last request or two past the end: not a minute
            continue
        p50, p99 = statistics.median(lat), lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        memory = rss.get(m, float("nan"))
        first = first or {"p50": p50, "p99": p99, "rss": memory}
        partial = " (partial)" if (m + 1) * 60 > SOAK_SECONDS else ""
        lines.append(f"| {m + 1}{partial} | {len(lat)} | {p50 * 1000:.1f} | {p99 * 1000:.1f} | {p50 / first['p50']:.2f}x | "
                     f"{p99 / first['p99']:.2f}x | {memory:.0f} | {memory - first['rss']:+.0f} MB |")
    last = status["last_snapshot"]
    lines += ["", f"Snapshots during the soak: the last held {last.get('bytes', 0) / 2**20:.1f} MB and took "
              f"{last.get('seconds', 0):.2f} s to write; the emulator's writes paused {emulator.last_pause * 1000:.1f} ms "
              "for its fork.", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    import logging

    logging.disable(logging.CRITICAL)
    try:
        out = _sizes_section()
        print(out, flush=True)
        out = _soak_section()
        print(out, flush=True)
    finally:
        logging.disable(logging.NOTSET)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--size"]:
        import logging

        logging.disable(logging.CRITICAL)
        print(json.dumps(_one_size(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        main()
