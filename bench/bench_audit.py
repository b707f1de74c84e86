"""Audit append and its digest bookkeeping, each next to a bare conditional put measured in the same run
(moto in process, with the emulator's atomic-write lock ``infra/emulator.py`` as in tests and ``make run``).

- ``audit.append``: read the chain head (consistent Query, limit 1), hash, conditional PutItem.
- the digest job's bookkeeping, per event: one digest run over a workspace that gained ``BATCH`` events
  (list + read the newest digest, check the old head, read and re-hash the new events, KMS Sign, a
  locked PutObject), divided by ``BATCH``; and the cost of one run over an unchanged workspace.
- reference: a bare ``PutItem`` with ``attribute_not_exists`` on a fresh key of the same table, of an item
  with the same attributes and sizes as the event ``audit.append`` writes (a copy of one it wrote).
"""
from __future__ import annotations

import itertools
import os

from bench.common import use_emulator

BATCH = int(os.environ.get("BENCH_DIGEST_BATCH", "100"))


def _env() -> None:
    use_emulator()
    os.environ.pop("MAIL_OUTBOX_DIR", None)


def main() -> None:
    _env()
    from moto import mock_aws

    from bench.common import Measure, measure, measure_pair, table
    from chalicelib.core import audit, aws
    from chalicelib.identity import users
    from chalicelib.platform.audit import digests as audit_digests
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_all
    from infra.emulator import serialise_writes
    from tests.functional.aws_calls import counting

    serialise_writes()
    actor = audit.Actor("user", "usr_bench", "bench@example.com")
    with mock_aws():
        bootstrap_all()
        user = users.create_user("bench-audit@example.com", email_verified=True)
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench audit", residency="us-east",
                              enforce_mfa=False)
        region = "us-east-1"
        ddb = aws.client("dynamodb", region)
        table_name = aws.table_name("audit_events")
        fresh = itertools.count(1)

        def append() -> None:
            audit.append(region, ws.id, "bench.event", actor=actor, details={"k": 1})

        append()
        with counting() as append_calls:
            append()
        shape = ddb.query(TableName=table_name, KeyConditionExpression="workspace_id = :w",
                          ExpressionAttributeValues={":w": {"S": ws.id}}, ScanIndexForward=False,
                          Limit=1)["Items"][0]

        def bare_put() -> None:
            ddb.put_item(TableName=table_name, Item={**shape, "workspace_id": {"S": "ws_bare"},
                                                     "seq": {"N": str(next(fresh))}},
                         ConditionExpression="attribute_not_exists(seq)")

        ours, ref = measure_pair("audit.append (head read + hash + conditional put)", append,
                                 "bare conditional PutItem", bare_put, n=100, repeat=5)

        def digest_after_batch() -> None:
            for _ in range(BATCH):
                append()
            audit_digests.digest_workspace(region, ws.id)

        def appends_only() -> None:
            for _ in range(BATCH):
                append()

        with_digest, appends = measure_pair(f"{BATCH} appends + one digest run", digest_after_batch,
                                            f"{BATCH} appends alone", appends_only, n=3, repeat=5, warmup=1)
        per_event = Measure(f"digest bookkeeping per event ({BATCH}-event batch)",
                            (with_digest.per_op_us - appends.per_op_us) / BATCH, with_digest.p99_us / BATCH,
                            BATCH * 1e6 / max(with_digest.per_op_us - appends.per_op_us, 1e-9))
        unchanged = measure("digest run, unchanged workspace (list + read + compare)",
                            lambda: audit_digests.digest_workspace(region, ws.id), n=20, repeat=3, warmup=2)
        # a reference for the two digest rows, taken right after them
        _, ref2 = measure_pair("unused", bare_put, "bare conditional PutItem", bare_put, n=100, repeat=3)
        table("Audit append and digest bookkeeping (moto in process, same run)", [
            (ours, ref, f"append: {sum(append_calls.values())} AWS calls ({', '.join(sorted(append_calls))}); "
                        "the reference puts an item of the same shape"),
            (with_digest, appends, "a digest run adds little to the appends it covers"),
            (per_event, ref2, "amortised per event"),
            (unchanged, ref2, "what every 15-minute run costs an idle workspace"),
        ])


if __name__ == "__main__":
    main()
