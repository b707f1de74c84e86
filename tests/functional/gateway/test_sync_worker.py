"""Idempotency, one sync at a time per connector, poison messages, residency."""
from __future__ import annotations

import json

import requests

from chalicelib.core import audit, aws
from chalicelib.gateway import models
from chalicelib.gateway.ingest import sync_worker
from chalicelib.gateway.ingest.sources import s3_objects
from infra.resources import TABLES
from tests.functional.conftest import Tenant, is_scope_version_item, make_tenant
from tests.functional.gateway.sync_helpers import (
    QUEUE,
    READER_ROLE,
    call,
    client,
    dataset,
    drain,
    lambda_record,
    new_bucket,
    put,
    receive,
    rows_of,
)


def _s3_connector(c, tenant: Tenant, bucket: str, name: str = "Src") -> dict:
    st, conn = call(c, "POST", "/v1/connectors", tenant.token,
                    {"name": name, "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "x/"}})
    assert st == 201, conn
    return conn


def _queue_depth(region: str, queue: str) -> int:
    attrs = aws.client("sqs", region).get_queue_attributes(
        QueueUrl=aws.queue_url(queue, region), AttributeNames=["ApproximateNumberOfMessages",
                                                               "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def test_idempotency_key_replays_the_first_run_and_refuses_another_body(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "a\n1\n")
    with client() as c:
        conn = _s3_connector(c, tenant, bucket)
        path = f"/v1/connectors/{conn['id']}/sync"
        st1, run1 = call(c, "POST", path, tenant.token, {"mode": "FULL_REFRESH"}, {"Idempotency-Key": "k-1"})
        st2, run2 = call(c, "POST", path, tenant.token, {"mode": "FULL_REFRESH"}, {"Idempotency-Key": "k-1"})
        assert (st1, st2) == (202, 202)
        assert run1 == run2
        st3, err = call(c, "POST", path, tenant.token, {"mode": "INCREMENTAL"}, {"Idempotency-Key": "k-1"})
        assert st3 == 409
        assert err["code"] == "idempotency_key_reused"
        assert len(list(models.sync_runs(tenant.region).query(tenant.workspace_id))) == 1
        assert _queue_depth(tenant.region, QUEUE) == 1
        # the same key on another connector is another request
        conn2 = _s3_connector(c, tenant, bucket, "Other")
        st4, err = call(c, "POST", f"/v1/connectors/{conn2['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"},
                        {"Idempotency-Key": "k-1"})
        assert st4 == 409


def test_two_syncs_of_one_connector_never_run_at_once(tenant: Tenant, monkeypatch) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "a\n1\n2\n")
    with client() as c:
        conn = _s3_connector(c, tenant, bucket)
        _, run_a = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        _, run_b = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        msgs = {json.loads(m["Body"])["sync_id"]: m for m in receive(tenant.region)}
        assert set(msgs) == {run_a["id"], run_b["id"]}
        real_read = s3_objects.read
        seen: dict[str, object] = {}

        def read_while_b_arrives(src, cursor, mode):
            # while A holds the lease, B is delivered: it must wait, not run
            seen["b"] = sync_worker.handle({"Records": [lambda_record(msgs[run_b["id"]], tenant.region)]})
            seen["b_status"] = models.sync_runs(tenant.region).get(tenant.workspace_id, run_b["id"]).status
            seen["conn_status"] = models.connectors(tenant.region).get(tenant.workspace_id, conn["id"]).status
            return real_read(src, cursor, mode)

        monkeypatch.setattr(s3_objects, "read", read_while_b_arrives)
        out_a = sync_worker.handle({"Records": [lambda_record(msgs[run_a["id"]], tenant.region)]})
        monkeypatch.setattr(s3_objects, "read", real_read)
        assert out_a == {"batchItemFailures": []}
        assert seen["b"] == {"batchItemFailures": [{"itemIdentifier": msgs[run_b["id"]]["MessageId"]}]}
        assert seen["b_status"] == "QUEUED"
        assert seen["conn_status"] == "SYNCING"
        aws.client("sqs", tenant.region).delete_message(QueueUrl=aws.queue_url(QUEUE, tenant.region),
                                                        ReceiptHandle=msgs[run_a["id"]]["ReceiptHandle"])
        # B's message comes back (its visibility was shortened) and now runs
        aws.client("sqs", tenant.region).change_message_visibility(
            QueueUrl=aws.queue_url(QUEUE, tenant.region), ReceiptHandle=msgs[run_b["id"]]["ReceiptHandle"],
            VisibilityTimeout=0)
        drain(tenant.region)
        b = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run_b['id']}", tenant.token)[1]
        assert b["status"] == "SUCCEEDED"
        assert b["rows_read"] == 0  # A already took the rows
        assert dataset(tenant, conn["dataset"]["id"]).row_count == 2


def test_waiting_on_the_last_receive_resends_instead_of_dead_lettering(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    with client() as c:
        conn = _s3_connector(c, tenant, bucket)
        _, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
    item = models.connectors(tenant.region).get(tenant.workspace_id, conn["id"])
    item.update(actions=[models.ConnectorAttrs.lock_owner.set("sync_other"),
                         models.ConnectorAttrs.lock_expires_at.set(2**40)])
    msg = receive(tenant.region)[0]
    record = lambda_record(msg, tenant.region)
    record["attributes"]["ApproximateReceiveCount"] = "5"
    assert sync_worker.handle({"Records": [record]}) == {"batchItemFailures": []}
    aws.client("sqs", tenant.region).delete_message(QueueUrl=aws.queue_url(QUEUE, tenant.region),
                                                    ReceiptHandle=msg["ReceiptHandle"])
    again = receive(tenant.region)
    assert [json.loads(m["Body"])["sync_id"] for m in again] == [run["id"]]
    assert json.loads(again[0]["Body"])["waits"] == 1


def test_unparseable_message_ends_in_the_dead_letter_queue(tenant: Tenant) -> None:
    sqs = aws.client("sqs", tenant.region)
    sqs.send_message(QueueUrl=aws.queue_url(QUEUE, tenant.region), MessageBody="{not json")
    results = drain(tenant.region)
    assert len(results) == 5
    assert all(r["batchItemFailures"] for r in results)
    dead = receive(tenant.region, QUEUE + "-dlq")
    assert [m["Body"] for m in dead] == ["{not json"]
    assert _queue_depth(tenant.region, QUEUE) == 0


def test_a_sync_failing_every_attempt_is_marked_failed_and_dead_lettered(tenant: Tenant, monkeypatch) -> None:
    bucket = new_bucket(tenant.region)
    with client() as c:
        conn = _s3_connector(c, tenant, bucket)
        # a transient error (S3 throttling) on every attempt; permanent ones fail at once (tests/functional/gateway)
        throttled = s3_objects.aws_source_error(f"cannot list s3://{bucket}", "SlowDown")
        monkeypatch.setattr(s3_objects, "read", lambda *a, **k: (_ for _ in ()).throw(throttled))
        _, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        results = drain(tenant.region)
        assert len(results) == 5
        assert all(r["batchItemFailures"] for r in results)
        run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
        assert run["status"] == "FAILED", run
        assert run["attempts"] == 5, run
        assert "SlowDown" in run["error"], run
        assert run["finished_at"]
        got = call(c, "GET", f"/v1/connectors/{conn['id']}", tenant.token)[1]
        assert got["status"] == "FAILING"
        assert got["last_sync"]["status"] == "FAILED"
        assert "SlowDown" in got["health"]["last_error"]
    dead = receive(tenant.region, QUEUE + "-dlq")
    assert [json.loads(m["Body"])["sync_id"] for m in dead] == [run["id"]]
    actions = [e.action for e in audit.model(tenant.region).query(tenant.workspace_id)]
    assert "connector.sync_failed" in actions
    assert "connector.sync_requested" in actions
    lock = models.connectors(tenant.region).get(tenant.workspace_id, conn["id"]).lock_owner
    assert lock is None


def test_eu_workspace_ingestion_stays_in_eu_central_1(stack: None) -> None:
    eu = make_tenant(email="eu-admin@example.com", residency="eu-central", name="EU GmbH")
    assert eu.region == "eu-central-1"
    bucket = new_bucket(eu.region)
    put(eu.region, bucket, "x/a.csv", "email,n\na@example.eu,1\n")
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", eu.token,
                        {"name": "EU src", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "x/"}})
        assert st == 201
        st, docs = call(c, "POST", "/v1/connectors", eu.token, {"name": "EU docs", "kind": "documents", "config": {}})
        st, up = call(c, "POST", f"/v1/connectors/{docs['id']}/uploads", eu.token, {"file_name": "a.txt"})
        assert "eu-central-1" in up["upload_url"] or aws.bucket_name("documents", eu.region) in up["upload_url"]
        assert requests.put(up["upload_url"], data=b"Hello EU.", headers=up["headers"], timeout=10).status_code == 200
        run_ids = []
        for cid in (conn["id"], docs["id"]):
            st, run = call(c, "POST", f"/v1/connectors/{cid}/sync", eu.token, headers={"Idempotency-Key": cid})
            run_ids.append(run["id"])
        drain(eu.region)
        for cid, rid in zip((conn["id"], docs["id"]), run_ids, strict=True):
            assert call(c, "GET", f"/v1/connectors/{cid}/syncs/{rid}", eu.token)[1]["status"] == "SUCCEEDED"
    assert rows_of(eu, conn["dataset"]["id"])[1] == [("a@example.eu", 1)]
    assert len(rows_of(eu, docs["dataset"]["id"])[1]) == 1
    # nothing of it in us-east-1: tables, buckets, queues
    needles = [eu.workspace_id, conn["id"], docs["id"], *run_ids]
    ddb = aws.client("dynamodb", "us-east-1")
    for table in TABLES:
        for page in ddb.get_paginator("scan").paginate(TableName=aws.table_name(table.name)):
            for item in page["Items"]:
                text = json.dumps(item)
                hits = [n for n in needles if n in text]
                if table.name == "workspaces":  # the directory entry is global by design
                    hits = [n for n in hits if n != eu.workspace_id]
                    assert "connector" not in text
                if table.name == "revoked_tokens" and is_scope_version_item(item, eu.workspace_id):
                    continue
                assert not hits, (table.name, hits)
    s3 = aws.client("s3", "us-east-1")
    for b in ("data", "documents"):
        assert s3.list_objects_v2(Bucket=aws.bucket_name(b, "us-east-1")).get("KeyCount", 0) == 0
    for q in (QUEUE, QUEUE + "-dlq"):
        assert _queue_depth("us-east-1", q) == 0
    eu_keys = [o["Key"] for o in aws.client("s3", eu.region).list_objects_v2(
        Bucket=aws.bucket_name("data", eu.region)).get("Contents", [])]
    assert any(eu.workspace_id in k for k in eu_keys)
    assert models.lineage_edges(eu.region).count(eu.workspace_id) == 2


def test_an_expired_lease_is_taken_over_and_the_lost_run_marked_failed(tenant: Tenant) -> None:
    from chalicelib.core import clock

    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "a\n1\n")
    with client() as c:
        conn = _s3_connector(c, tenant, bucket)
        _, lost = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        lost_msg = receive(tenant.region)[0]  # taken by a worker that then dies without a trace
        models.sync_runs(tenant.region).get(tenant.workspace_id, lost["id"]).update(
            actions=[models.SyncRunAttrs.status.set("RUNNING")])
        models.connectors(tenant.region).get(tenant.workspace_id, conn["id"]).update(actions=[
            models.ConnectorAttrs.lock_owner.set(lost["id"]),
            models.ConnectorAttrs.lock_expires_at.set(int(clock.now()) + sync_worker.LEASE_S)])
        _, fresh = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        msg = [m for m in receive(tenant.region) if m["MessageId"] != lost_msg["MessageId"]][0]
        assert sync_worker.handle({"Records": [lambda_record(msg, tenant.region)]})["batchItemFailures"]
        models.connectors(tenant.region).get(tenant.workspace_id, conn["id"]).update(actions=[
            models.ConnectorAttrs.lock_expires_at.set(int(clock.now()) - 1)])  # the lost worker's lease runs out
        assert sync_worker.handle({"Records": [lambda_record(msg, tenant.region)]}) == {"batchItemFailures": []}
        got = {r["id"]: r for r in (call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{rid}", tenant.token)[1]
                                    for rid in (lost["id"], fresh["id"]))}
        assert got[fresh["id"]]["status"] == "SUCCEEDED"
        assert got[lost["id"]]["status"] == "FAILED"
        assert "lease" in got[lost["id"]]["error"]


def test_a_sync_queued_before_a_pause_does_not_run_or_unpause(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "a\n1\n")
    with client() as c:
        conn = _s3_connector(c, tenant, bucket)
        _, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        assert call(c, "PATCH", f"/v1/connectors/{conn['id']}", tenant.token, {"paused": True})[0] == 200
        assert drain(tenant.region) == [{"batchItemFailures": []}]
        run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
        assert run["status"] == "FAILED"
        assert "paused" in run["error"]
        assert call(c, "GET", f"/v1/connectors/{conn['id']}", tenant.token)[1]["status"] == "PAUSED"
    assert models.datasets(tenant.region).count(tenant.workspace_id) == 0


def test_a_run_whose_enqueue_failed_is_sent_by_the_sync_reaper_and_completes(tenant: Tenant, monkeypatch) -> None:
    """The run and its audit event commit before the send; a send that fails leaves the run QUEUED, and
    the sync reaper sends it again (it never stays QUEUED forever)."""
    from chalicelib.core import clock
    from chalicelib.core.store import queues
    from chalicelib.core.store import work_timing as timing
    from chalicelib.gateway.ingest import sync_reaper

    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "a\n1\n")
    with client() as c:
        conn = _s3_connector(c, tenant, bucket)

        def down(*_a, **_k):
            raise ConnectionError("queue unreachable")

        monkeypatch.setattr(queues, "enqueue", down)
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
        monkeypatch.undo()
        assert st == 202
        assert _queue_depth(tenant.region, QUEUE) == 0
        requested = [e for e in audit.iter_chain(tenant.region, tenant.workspace_id)
                     if e["action"] == "connector.sync_requested" and e["details"]["sync_id"] == run["id"]]
        assert len(requested) == 1  # the effect has its event although the send failed
        assert sync_reaper.reap()["resent"] == []  # not yet stale
        clock.advance(timing.SYNC_STALE_S + 1)
        assert sync_reaper.reap()["resent"] == [run["id"]]
        assert sync_reaper.reap()["resent"] == []  # once per staleness window
        drain(tenant.region)
        done = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
    assert done["status"] == "SUCCEEDED"


def test_a_run_never_finished_ends_failed_with_its_event(tenant: Tenant, monkeypatch) -> None:
    from chalicelib.core import clock
    from chalicelib.core.store import queues
    from chalicelib.core.store import work_timing as timing
    from chalicelib.gateway.ingest import sync_reaper

    bucket = new_bucket(tenant.region)
    with client() as c:
        conn = _s3_connector(c, tenant, bucket)
        monkeypatch.setattr(queues, "enqueue", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("down")))
        run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)[1]
        clock.advance(timing.SYNC_MAX_AGE_S + 1)
        assert sync_reaper.reap()["failed"] == [run["id"]]
        assert sync_reaper.reap()["failed"] == []
    assert models.sync_runs(tenant.region).get(tenant.workspace_id, run["id"]).status == "FAILED"
    failed = [e for e in audit.iter_chain(tenant.region, tenant.workspace_id) if e["action"] == "connector.sync_failed"]
    assert [e["details"]["sync_id"] for e in failed] == [run["id"]]
    assert audit.verify_live(tenant.region, tenant.workspace_id).ok


def test_a_message_naming_another_connector_or_dataset_syncs_only_what_its_run_names(tenant: Tenant) -> None:
    """The ids a sync message carries besides its run only let the worker read them together with the run:
    a message naming another connector's ids (or an ill-formed dataset id) still syncs the run's own
    connector into its own dataset, and leaves the other untouched."""
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "a\n1\n2\n")
    with client() as c:
        mine = _s3_connector(c, tenant, bucket, "Mine")
        other = _s3_connector(c, tenant, bucket, "Other")
        runs = []
        for hints in ({"connector_id": other["id"], "dataset_id": other["dataset"]["id"]},
                      {"dataset_id": "ds_../../x"}):
            _, run = call(c, "POST", f"/v1/connectors/{mine['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
            msg = receive(tenant.region)[0]
            body = json.loads(msg["Body"])
            assert (body["connector_id"], body["dataset_id"]) == (mine["id"], mine["dataset"]["id"])
            msg["Body"] = json.dumps({**body, **hints})
            assert sync_worker.handle({"Records": [lambda_record(msg, tenant.region)]}) == {"batchItemFailures": []}
            aws.client("sqs", tenant.region).delete_message(QueueUrl=aws.queue_url(QUEUE, tenant.region),
                                                            ReceiptHandle=msg["ReceiptHandle"])
            runs.append(call(c, "GET", f"/v1/connectors/{mine['id']}/syncs/{run['id']}", tenant.token)[1])
    assert [(r["status"], r["rows_written"]) for r in runs] == [("SUCCEEDED", 2), ("SUCCEEDED", 0)], runs
    assert dataset(tenant, mine["dataset"]["id"]).row_count == 2
    other_item = models.connectors(tenant.region).get(tenant.workspace_id, other["id"])
    assert other_item.cursor is None and other_item.lock_owner is None
    assert not models.datasets(tenant.region).count(tenant.workspace_id, models.DatasetAttrs.id == other["dataset"]["id"])
