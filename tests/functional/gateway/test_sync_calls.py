"""The fixed cost of a sync in AWS calls: an incremental sync of one changed object reads the run, the
connector and the dataset its message names in one ``BatchGetItem``, takes the lease and marks the run
RUNNING in one transaction, commits dataset, connector, run, audit event and the catalog version's bump in
one more (a process that knows no version bumps it after, in two calls), reads the old manifest only in a
process that did not commit it and the old files it needs only in one that neither wrote nor read them
(``local_parts``), and lists the snapshot store never: its prune deletes the snapshot it
retires by name. A progress report depends on time, not on the sync (one per ``PROGRESS_EVERY_S``, which
these tests hold above their syncs' run time on a loaded machine), so none is written here."""
from __future__ import annotations

from collections import Counter
from typing import Any

import botocore.client

from chalicelib.core import aws, process_state
from chalicelib.gateway import models, storage
from chalicelib.gateway.catalog import versions
from chalicelib.gateway.ingest import sync_worker
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, dataset, drain, new_bucket, put


def _synced(c: Any, tenant: Tenant, name: str, objects: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """A new source bucket holding ``objects`` (all under one prefix), its connector, and a first FULL_REFRESH
    sync done: (bucket, connector)."""
    bucket = new_bucket(tenant.region)
    for key, body in objects.items():
        put(tenant.region, bucket, key, body)
    st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": name, "kind": "s3", "config": {
        "role_arn": READER_ROLE, "bucket": bucket, "prefix": next(iter(objects)).split("/")[0] + "/",
        "primary_key": ["id"]}})
    assert st == 201, conn
    call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
    drain(tenant.region)
    return bucket, conn


def test_an_incremental_sync_costs_two_transactions_one_dataset_read_and_one_listing(tenant: Tenant,
                                                                                     monkeypatch) -> None:
    from chalicelib.knowledge import indexer

    monkeypatch.setattr(indexer, "on_sync", lambda *a, **k: None)
    monkeypatch.setattr(sync_worker, "PROGRESS_EVERY_S", 3600.0)
    objects = {f"c/{o}.csv": "id,v\n" + "".join(f"{i},{i}\n" for i in range(o * 100, o * 100 + 100)) for o in range(3)}
    with client() as c:
        bucket, conn = _synced(c, tenant, "Counted", objects)
        data_bucket = aws.bucket_name(storage.BUCKET, tenant.region)
        versions_table = aws.table_name("catalog_versions")
        real = botocore.client.BaseClient._make_api_call

        def counted_sync(version: int) -> Counter:
            put(tenant.region, bucket, "c/1.csv",
                "id,v\n" + "".join(f"{i},{i + version}\n" for i in range(100, 200)))
            st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "INCREMENTAL"})
            assert st == 202, run
            calls: Counter = Counter()

            def counting(self, operation, params):
                service = self.meta.service_model.service_name
                where = ("data" if params.get("Bucket") == data_bucket else
                         "versions" if params.get("TableName") == versions_table else "")
                calls[(service, operation, where)] += 1
                return real(self, operation, params)

            monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counting)
            drain(tenant.region)
            monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", real)
            got = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
            assert (got["status"], got["rows_read"], got["rows_written"]) == ("SUCCEEDED", 100, 100), got
            return calls

        before = versions.current(tenant.region, tenant.workspace_id).version
        calls = counted_sync(1)
        assert calls[("dynamodb", "TransactWriteItems", "")] == 2, calls
        assert calls[("dynamodb", "PutItem", "")] == 0, calls  # no separate lineage or audit write
        assert calls[("dynamodb", "UpdateItem", "versions")] == 0, calls  # the catalog version is in the commit
        assert calls[("dynamodb", "UpdateItem", "")] == 0, calls  # no progress report
        changes = versions.current(tenant.region, tenant.workspace_id)
        assert changes.version == before + 1
        assert changes.since(before) == ({conn["dataset"]["id"]}, {conn["id"]})
        assert calls[("dynamodb", "GetItem", "")] == 0, calls
        assert calls[("dynamodb", "BatchGetItem", "")] == 1, calls  # the run, connector and dataset together
        assert calls[("s3", "ListObjectsV2", "data")] == 0, calls  # the prune deletes the retired snapshot unlisted
        # the one part the change touches was written here: its local copy is read
        assert calls[("s3", "GetObject", "data")] == 0, calls

        process_state.reset_all()  # a container that did not commit the current snapshot
        calls = counted_sync(2)
        # the old manifest, the touched part and the layer the first incremental sync wrote
        assert calls[("s3", "GetObject", "data")] == 3, calls
        assert calls[("dynamodb", "BatchGetItem", "")] == 1, calls
        assert calls[("dynamodb", "UpdateItem", "versions")] == 2, calls  # no version known: bumped after
        assert calls[("dynamodb", "UpdateItem", "")] == 0, calls
        assert versions.current(tenant.region, tenant.workspace_id).since(before + 1) == (
            {conn["dataset"]["id"]}, {conn["id"]})
        calls = counted_sync(3)  # the same container again: every file it needs it wrote or read already
        assert calls[("s3", "GetObject", "data")] == 0, calls
    ds = dataset(tenant, conn["dataset"]["id"])
    assert ds.row_count == 300
    names, rows = storage.read_rows(tenant.region, ds.data_prefix)
    assert sorted(rows) == sorted((i, i + 3 if 100 <= i < 200 else i) for i in range(300))


def test_a_sync_whose_catalog_version_went_stale_commits_once_and_bumps_after(tenant: Tenant, monkeypatch,
                                                                              caplog) -> None:
    """Another container moved the catalog version since this one saw it: the commit holding the stale bump
    is refused for it alone, and the sync commits again without it, then bumps in two calls. One event, one
    run, and a log entry naming the dataset and connector."""
    from chalicelib.knowledge import indexer

    monkeypatch.setattr(indexer, "on_sync", lambda *a, **k: None)
    with client() as c:
        bucket, conn = _synced(c, tenant, "Stale", {"s/0.csv": "id,v\n1,a\n2,b\n"})
        seen = versions.current(tenant.region, tenant.workspace_id).version
        versions.record_change(tenant.region, tenant.workspace_id, datasets=["ds_elsewhere"])  # another container
        versions._last_seen[(tenant.region, tenant.workspace_id)] = seen
        put(tenant.region, bucket, "s/0.csv", "id,v\n1,a\n2,c\n")
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "INCREMENTAL"})
        assert st == 202, run
        drain(tenant.region)
        got = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
    assert (got["status"], got["rows_written"]) == ("SUCCEEDED", 1), got
    assert [r.refused for r in caplog.records if r.getMessage() == "sync commit conflict"] == [["catalog"]]
    changes = versions.current(tenant.region, tenant.workspace_id)
    assert changes.version == seen + 2
    assert changes.since(seen) == ({"ds_elsewhere", conn["dataset"]["id"]}, {conn["id"]})
    events = aws.client("dynamodb", tenant.region).query(
        TableName=aws.table_name("audit_events"), KeyConditionExpression="workspace_id = :w",
        ExpressionAttributeValues={":w": {"S": tenant.workspace_id}})["Items"]
    assert sum(1 for e in events if run["id"] in str(e) and "connector.sync_succeeded" in str(e)) == 1
    assert dataset(tenant, conn["dataset"]["id"]).row_count == 2


def test_local_copies_go_with_the_objects_a_prune_or_a_deletion_removes(tenant: Tenant, monkeypatch) -> None:
    """This container's copies of snapshot files (``local_parts``) are only of files the dataset's current or
    previous snapshot holds: a sync's prune drops those of the snapshot it retires, and deleting the
    connector drops them all, with the objects."""
    from chalicelib.gateway import local_parts
    from chalicelib.knowledge import indexer

    monkeypatch.setattr(indexer, "on_sync", lambda *a, **k: None)
    with client() as c:
        bucket, conn = _synced(c, tenant, "Copies", {"p/0.csv": "id,v\n1,a\n2,b\n", "p/1.csv": "id,v\n3,c\n"})
        ds_id = conn["dataset"]["id"]
        root = storage.dataset_root(tenant.workspace_id, ds_id)

        def copies() -> set[str]:
            return {k for (_, k) in local_parts.held() if k.startswith(root)}

        first = dataset(tenant, ds_id).data_prefix
        assert copies() and all(k.startswith(first + "/") for k in copies())
        for n in range(2):  # full refreshes: each writes a new base and retires the one before the previous
            put(tenant.region, bucket, "p/1.csv", f"id,v\n3,c{n}\n")
            call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
            drain(tenant.region)
        current, previous = dataset(tenant, ds_id).data_prefix, storage.read_manifest(
            tenant.region, dataset(tenant, ds_id).data_prefix).replaced["prefix"]
        assert copies() and all(k.split("/")[3] in (current.split("/")[-1], previous.split("/")[-1])
                                for k in copies())
        assert not any(k.startswith(first + "/") for k in copies())
        st, _ = call(c, "DELETE", f"/v1/connectors/{conn['id']}", tenant.token)
        assert st == 200
        assert copies() == set()


def test_a_no_op_incremental_sync_makes_at_most_7_aws_calls_and_no_lease_or_data_work(tenant: Tenant,
                                                                                      monkeypatch) -> None:
    """An incremental sync of a source that did not change, from its request to its commit: the request reads
    its scope (one batch read, as every request does: ``tenancy.begin_request``), reads the connector and
    commits the run (2 calls) and sends its message; the worker reads the run, connector
    and dataset together, lists the source and commits cursor, freshness and the run, with no lease
    taken and nothing staged or written. (Not counted: the request limiter's write, and the receive and
    delete of the message, which Lambda's event source makes.)"""
    from chalicelib.gateway.ingest import typed_rows
    from chalicelib.knowledge import indexer
    from tests.functional.aws_calls import counting, route_calls

    monkeypatch.setattr(indexer, "on_sync", lambda *a, **k: None)
    with client() as c:
        bucket, conn = _synced(c, tenant, "Unchanged", {"u/0.csv": "id,v\n1,a\n2,b\n"})
        before = dataset(tenant, conn["dataset"]["id"])

        def never(*args: object, **kwargs: object) -> None:
            raise AssertionError("an unchanged source needs no lease and no data work")

        for owner, name in ((sync_worker, "_acquire"), (typed_rows, "open_stage"), (storage, "write_snapshot"),
                            (storage, "prune")):
            monkeypatch.setattr(owner, name, never)
        with counting() as calls:
            st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "INCREMENTAL"})
            assert st == 202, run
            drain(tenant.region)
        got = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
    ours = route_calls(calls)
    for harness in ("sqs ReceiveMessage ", "sqs DeleteMessage "):
        del ours[harness]
    assert (got["status"], got["rows_read"], got["rows_written"], got["attempts"]) == ("SUCCEEDED", 0, 0, 1), got
    assert sum(ours.values()) <= 7, dict(ours)
    assert ours["dynamodb TransactWriteItems "] == 2, dict(ours)  # the request's and the commit: no lease
    after = dataset(tenant, conn["dataset"]["id"])
    assert after.data_prefix == before.data_prefix
    assert after.last_synced_at > before.last_synced_at
    item = models.connectors(tenant.region).get(tenant.workspace_id, conn["id"], consistent_read=True)
    assert (item.lock_owner, item.status) == (None, "HEALTHY")


def test_an_unchanged_source_waits_while_another_sync_holds_the_lease(tenant: Tenant, monkeypatch) -> None:
    """The lease-free commit of an unchanged source is conditional on no other sync holding the lease: a
    sync that finds it held is busy (retried later) and commits nothing."""
    from chalicelib.knowledge import indexer

    monkeypatch.setattr(indexer, "on_sync", lambda *a, **k: None)
    with client() as c:
        bucket, conn = _synced(c, tenant, "Held", {"h/0.csv": "id,v\n1,a\n"})
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "INCREMENTAL"})
        assert st == 202, run
        C = models.ConnectorAttrs
        real_look = sync_worker._look_first

        def held_meanwhile(*args: object, **kwargs: object) -> object:
            looked = real_look(*args, **kwargs)  # the lease was free when read; taken before the commit
            models.connectors(tenant.region)(tenant.workspace_id, conn["id"]).update(
                actions=[C.lock_owner.set("sync_other"), C.lock_expires_at.set(2**40)])
            return looked

        monkeypatch.setattr(sync_worker, "_look_first", held_meanwhile)
        out = sync_worker.run_sync(tenant.workspace_id, run["id"], connector_id=conn["id"],
                                   dataset_id=conn["dataset"]["id"])
        assert out.status == "busy"
        got = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
    assert got["status"] == "QUEUED", got
    item = models.connectors(tenant.region).get(tenant.workspace_id, conn["id"], consistent_read=True)
    assert item.lock_owner == "sync_other"
