"""Residency in operation: backup and restore time per 10k items and per 100 MB of objects (the services
in ``chalicelib/residency/``: ``backups.create`` and ``restore.apply``), each beside the raw read or
write of the same content in the same run, and the restore rates against the spec's 15-minute RTO; and
the cross-region DR replication lag under a steady write
load, beside the raw copy rate of the same items to the same secondary bucket (no sealing, no
fingerprints). Everything runs against moto in process on this machine, so the absolute figures are the
emulator's; the ratios are what carries over. Logging is off while measuring."""
from __future__ import annotations

import logging
import os
import statistics
import threading
import time
from typing import Any

from bench.common import use_emulator

ITEMS = 10_000
OBJECT_MB = 100
OBJECT_SIZE = 2 * 1024 * 1024  # 50 objects of 2 MiB
BASE_ITEMS = 1_000  # the DR workspace's content before the steady load
WRITE_RATE = 50  # items/s of the steady load
LOAD_SECONDS = 12
RTO_SECONDS = 15 * 60  # the spec: in-region-multi-az, RTO under 15 minutes


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _chat(ws: str, i: int) -> dict[str, Any]:
    return {"workspace_id": {"S": ws}, "id": {"S": f"chat_{i:08d}"}, "title": {"S": f"bench chat {i}"},
            "messages": {"S": ("m" * 300) + str(i)}, "message_count": {"N": "1"}}


def _batch_put(region: str, table: str, items: list[dict[str, Any]]) -> None:
    from chalicelib.core import aws

    ddb = aws.client("dynamodb", region)
    for i in range(0, len(items), 25):
        ddb.batch_write_item(RequestItems={aws.table_name(table): [{"PutRequest": {"Item": it}} for it in items[i:i + 25]]})


def _batch_delete(region: str, table: str, keys: list[dict[str, Any]]) -> None:
    from chalicelib.core import aws

    ddb = aws.client("dynamodb", region)
    for i in range(0, len(keys), 25):
        ddb.batch_write_item(RequestItems={aws.table_name(table): [{"DeleteRequest": {"Key": k}} for k in keys[i:i + 25]]})


def _rows(title: str, rows: list[tuple[str, float, str, float, str]]) -> str:
    lines = [f"### {title}", "", "| operation | seconds | per unit | reference (same run) | ref seconds | ratio |",
             "|---|---:|---:|---|---:|---:|"]
    for name, secs, unit, ref_secs, ref_name in rows:
        ratio = secs / ref_secs if ref_secs else float("nan")
        lines.append(f"| {name} | {secs:.2f} | {unit} | {ref_name} | {ref_secs:.2f} | {ratio:.1f}x |")
    out = "\n".join(lines) + "\n"
    print(out, flush=True)
    return out


def _items_phase(region: str, ws: str) -> float:
    from chalicelib.residency import backups, content, restore

    chats = next(t for t in content.backed_up_tables() if t.name == "chats")
    items = [_chat(ws, i) for i in range(ITEMS)]
    keys = [{"workspace_id": it["workspace_id"], "id": it["id"]} for it in items]
    _batch_put(region, "chats", items)
    t_backup, found = _timed(lambda: backups.create(region, ws))
    t_read, _ = _timed(lambda: [list(content.items(region, t, ws)) for t in content.backed_up_tables()])
    _batch_delete(region, "chats", keys)
    t_restore, report = _timed(lambda: restore.apply(region, found))
    assert report["tables"]["chats"]["added"] == ITEMS, report["tables"]["chats"]
    _batch_delete(region, "chats", keys)
    t_write, _ = _timed(lambda: [content.put_item(region, chats, it) for it in items])
    _rows(f"Backup and restore of {ITEMS:,} items", [
        ("backup (`backups.create`: read, seal, manifest)", t_backup, f"{t_backup / ITEMS * 1e6:.0f} µs/item",
         t_read, "raw read of the same items (`content.items`)"),
        ("restore (`restore.apply`: open, check, compare, write)", t_restore, f"{t_restore / ITEMS * 1e6:.0f} µs/item",
         t_write, "raw `PutItem` of the same items"),
    ])
    print(f"Per 10k items: backup {t_backup * 10_000 / ITEMS:.1f} s, restore {t_restore * 10_000 / ITEMS:.1f} s.\n")
    return t_restore * 10_000 / ITEMS


def _objects_phase(region: str, ws: str) -> float:
    from chalicelib.residency import backups, content, restore

    n = OBJECT_MB * 1024 * 1024 // OBJECT_SIZE
    bodies = {f"uploads/{ws}/conn_b/doc_{i:04d}/file.bin": os.urandom(OBJECT_SIZE) for i in range(n)}
    for key, body in bodies.items():
        content.put_object(region, "documents", key, body, "application/octet-stream")
    t_backup, found = _timed(lambda: backups.create(region, ws))
    t_read, _ = _timed(lambda: [content.get_object(region, "documents", k) for k in bodies])
    for key in bodies:
        content.delete_object(region, "documents", key)
    t_restore, report = _timed(lambda: restore.apply(region, found))
    assert report["buckets"]["documents"]["added"] == n, report["buckets"]
    for key in bodies:
        content.delete_object(region, "documents", key)
    t_write, _ = _timed(lambda: [content.put_object(region, "documents", k, b, "application/octet-stream")
                                 for k, b in bodies.items()])
    mb = n * OBJECT_SIZE / 1024 / 1024
    _rows(f"Backup and restore of {mb:.0f} MB of objects ({n} × {OBJECT_SIZE // 1024 // 1024} MiB)", [
        ("backup (`backups.create`)", t_backup, f"{mb / t_backup:.1f} MB/s", t_read, "raw `GetObject` of the same objects"),
        ("restore (`restore.apply`)", t_restore, f"{mb / t_restore:.1f} MB/s", t_write, "raw `PutObject` of the same objects"),
    ])
    print(f"Per 100 MB: backup {t_backup * 100 / mb:.1f} s, restore {t_restore * 100 / mb:.1f} s.\n")
    return t_restore * 100 / mb


def _rto_table(per_10k_items: float, per_100_mb: float) -> None:
    """The measured restore rates against the spec's RTO (15 minutes) and the workers function's timeout."""
    timeout = 300  # infra/template.py GROUP_SETTINGS["workers"]["lambda_timeout"]: one restore is one invocation
    lines = ["### Restore against the RTO", "",
             f"The spec's RTO for `in-region-multi-az` is {RTO_SECONDS // 60} minutes; a restore runs in one invocation of "
             f"the workers function ({timeout} s timeout). From the rates above (this machine, the emulator):", "",
             "| workspace | restore time | of the RTO | fits the worker timeout |", "|---|---:|---:|---|"]
    for items, mb in ((10_000, 100), (100_000, 1_000), (250_000, 2_000), (1_000_000, 5_000)):
        secs = items / 10_000 * per_10k_items + mb / 100 * per_100_mb
        lines.append(f"| {items:,} items + {mb:,} MB | {secs:,.0f} s | {secs / RTO_SECONDS:.0%} | "
                     f"{'yes' if secs <= timeout else 'no'} |")
    max_items = RTO_SECONDS / per_10k_items * 10_000
    max_mb = RTO_SECONDS / per_100_mb * 100
    lines += ["", f"Within the RTO at these rates: about {max_items:,.0f} items alone, or {max_mb:,.0f} MB of objects "
              f"alone (restore time adds up: items/10k × {per_10k_items:.1f} s + MB/100 × {per_100_mb:.1f} s). "
              "The drill that measures a real workspace: docs/operations.md, \"Restore drill\".", ""]
    print("\n".join(lines), flush=True)


def _replication_phase(region: str, ws_id: str) -> None:
    from chalicelib.core import aws, clock
    from chalicelib.core.tenancy import WorkspaceAttrs, workspaces
    from chalicelib.platform.workspaces import disaster_recovery
    from chalicelib.platform.workspaces.disaster_recovery import RPO_SECONDS
    from chalicelib.residency import content, replication
    from chalicelib.residency.models import REPLICATION_INTERVAL_SECONDS

    secondary = disaster_recovery.default_secondary("us-east")
    _batch_put(region, "chats", [_chat(ws_id, i) for i in range(BASE_ITEMS)])
    workspaces().get(ws_id).update(actions=[WorkspaceAttrs.replication.set(replication.DR)])
    disaster_recovery.enable(region, ws_id, secondary)
    t_first, first = _timed(lambda: replication.replicate(region, ws_id, "us-east"))
    written: list[float] = []
    passes: list[tuple[float, float, int]] = []  # (start, end, items copied)
    stop = threading.Event()

    def writer() -> None:
        i = BASE_ITEMS
        start = time.time()
        while time.time() - start < LOAD_SECONDS:
            due = start + (i - BASE_ITEMS) / WRITE_RATE
            if due > time.time():
                time.sleep(due - time.time())
            content.put_item(region, next(t for t in content.backed_up_tables() if t.name == "chats"), _chat(ws_id, i))
            written.append(time.time())
            i += 1
        stop.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while True:
        done = stop.is_set()
        start = clock.now()
        out = replication.replicate(region, ws_id, "us-east")
        passes.append((start, clock.now(), out["copied"]["items"]))
        if done:
            break
    thread.join()
    lags = []
    for w in written:  # an item is in the copy by the end of the first pass that started after its write
        end = next(e for s, e, _ in passes if s >= w)
        lags.append(end - w)
    lags.sort()
    durations = [e - s for s, e, _ in passes]
    copied = sum(c for _, _, c in passes)
    pass_rate = copied / sum(durations) if durations else 0.0
    # reference: the same items copied raw (query, PutObject per item, no sealing, fingerprints or listing)
    s3 = aws.client("s3", secondary)
    bucket = aws.bucket_name("dr", secondary)
    chats = next(t for t in content.backed_up_tables() if t.name == "chats")

    def raw_copy() -> int:
        n = 0
        for item in content.items(region, chats, ws_id):
            s3.put_object(Bucket=bucket, Key=f"bench-raw/{ws_id}/{n}", Body=content.canonical(item).encode())
            n += 1
        return n

    t_raw, raw_n = _timed(raw_copy)
    total = BASE_ITEMS + len(written)
    lines = ["### Cross-region DR replication under a steady write load", "",
             f"A workspace of {BASE_ITEMS:,} chat items gets {WRITE_RATE} new items/s for {LOAD_SECONDS} s while "
             "passes run back to back (the deployment runs one every 5 minutes; the lag bound is the interval "
             "plus one pass).", "",
             "| measure | value |", "|---|---:|",
             f"| first full pass ({first['copied']['items']:,} items) | {t_first:.2f} s ({first['copied']['items'] / t_first:,.0f} items/s) |",
             f"| items written under load | {len(written):,} ({len(written) / LOAD_SECONDS:.1f} items/s achieved) |",
             f"| passes | {len(passes)} (median {statistics.median(durations):.2f} s, max {max(durations):.2f} s) |",
             f"| lag per written item: median / p95 / max | {lags[len(lags) // 2]:.2f} / {lags[int(len(lags) * 0.95)]:.2f} / {lags[-1]:.2f} s |",
             f"| DR pass throughput (items copied ÷ pass time) | {pass_rate:,.0f} items/s |",
             f"| full pass over {total:,} items (enumerate + fingerprint) | {total / statistics.median(durations):,.0f} items/s |",
             f"| **reference**: raw copy of the same {raw_n:,} items (query + PutObject) | {raw_n / t_raw:,.0f} items/s |",
             f"| full pass time ÷ raw copy time (same items) | {statistics.median(durations) / (t_raw * total / raw_n):.2f}x |",
             f"| lag bound as deployed: {REPLICATION_INTERVAL_SECONDS} s schedule + slowest pass | "
             f"{REPLICATION_INTERVAL_SECONDS + max(durations):.0f} s (RPO {RPO_SECONDS} s) |", ""]
    out = "\n".join(lines) + "\n"
    print(out, flush=True)


def main() -> None:
    use_emulator()
    from moto import mock_aws

    from chalicelib.identity import users
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_all

    logging.disable(logging.CRITICAL)  # no logging while measuring
    try:
        with mock_aws():
            bootstrap_all()
            user = users.create_user("bench-residency@example.com", email_verified=True)

            def ws(name: str) -> Any:
                return create_workspace(owner_id=user.id, owner_email=user.email, name=name, residency="us-east",
                                        enforce_mfa=False)

            items_ws, objects_ws, dr_ws = ws("Bench items"), ws("Bench objects"), ws("Bench DR")
            per_10k_items = _items_phase(items_ws.region, items_ws.id)
            per_100_mb = _objects_phase(objects_ws.region, objects_ws.id)
            _rto_table(per_10k_items, per_100_mb)
            _replication_phase(dr_ws.region, dr_ws.id)
    finally:
        logging.disable(logging.NOTSET)


if __name__ == "__main__":
    main()
