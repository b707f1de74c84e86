"""Sync runs as an admin sees them: FAILED with the reason (permanent errors at once, no retries),
RETRYING between attempts, progress counts while RUNNING, and the paged list of a connector's runs."""
from __future__ import annotations

from chalicelib.core import aws, clock
from chalicelib.gateway import storage
from chalicelib.gateway.ingest.sources import s3_objects
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.sync_helpers import (
    QUEUE,
    READER_ROLE,
    call,
    client,
    drain,
    new_bucket,
    put,
    receive,
    source_client,
    token_for,
)


def _connector(c, tenant: Tenant, bucket: str, name: str = "Src", **config) -> dict:
    st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
        "name": name, "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "x/", **config}})
    assert st == 201, conn
    return conn


def _sync(c, tenant: Tenant, conn: dict) -> dict:
    st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
    assert st == 202, run
    return run


def _depth(region: str, queue: str) -> int:
    attrs = aws.client("sqs", region).get_queue_attributes(
        QueueUrl=aws.queue_url(queue, region),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return sum(int(v) for v in attrs.values())


def test_missing_bucket_fails_at_once_with_its_reason_and_no_retry(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    with client() as c:
        conn = _connector(c, tenant, bucket)
        source_client("s3", tenant.region).delete_bucket(Bucket=bucket)
        run = _sync(c, tenant, conn)
        results = drain(tenant.region)
        assert len(results) == 1
        assert not results[0]["batchItemFailures"]  # acknowledged: retrying cannot help
        got = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
        assert got["status"] == "FAILED", got
        assert got["attempts"] == 1, got
        assert "NoSuchBucket" in got["error"], got
        assert got["finished_at"]
    assert _depth(tenant.region, QUEUE) == 0
    assert receive(tenant.region, QUEUE + "-dlq") == []


def test_unreadable_file_fails_at_once_naming_the_line(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.jsonl", '{"id": 1}\n{"id": \n')
    with client() as c:
        bad_file = _connector(c, tenant, bucket, "Bad file")
        run = _sync(c, tenant, bad_file)
        assert len(drain(tenant.region)) == 1
        got = call(c, "GET", f"/v1/connectors/{bad_file['id']}/syncs/{run['id']}", tenant.token)[1]
        assert got["status"] == "FAILED"
        assert "x/a.jsonl line 2" in got["error"]
        assert got["attempts"] == 1


def test_transient_failure_shows_retrying_with_its_error_then_succeeds(tenant: Tenant, monkeypatch) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "id,name\n1,Ann\n")
    real_read = s3_objects.read
    calls = []

    def flaky(src, cursor, mode):
        calls.append(1)
        if len(calls) == 1:
            raise s3_objects.aws_source_error(f"cannot list s3://{bucket}", "SlowDown")
        return real_read(src, cursor, mode)

    monkeypatch.setattr(s3_objects, "read", flaky)
    with client() as c:
        conn = _connector(c, tenant, bucket)
        run = _sync(c, tenant, conn)
        drain(tenant.region, max_rounds=1)  # the first attempt only
        got = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
        assert got["status"] == "RETRYING", got
        assert "SlowDown" in got["error"], got
        assert got["attempts"] == 1, got
        drain(tenant.region)
        got = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
        assert got["status"] == "SUCCEEDED", got
        assert got["error"] is None, got
        assert got["attempts"] == 2, got


def test_running_sync_shows_objects_and_rows_so_far(tenant: Tenant, monkeypatch) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "id,name\n1,Ann\n2,Bo\n")
    put(tenant.region, bucket, "x/b.csv", "id,name\n3,Cy\n")
    seen: dict = {}
    real_write = storage.write_snapshot
    real_report = s3_objects.Src.report

    def report(self, objects, rows):  # the clock moves between objects, so every report is written
        clock.advance(5)
        real_report(self, objects, rows)

    def write_snapshot(*args, **kwargs):  # while the run is RUNNING: what an admin polling it sees
        with client() as c2:
            seen["run"] = call(c2, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
        return real_write(*args, **kwargs)

    monkeypatch.setattr(s3_objects.Src, "report", report)
    monkeypatch.setattr(storage, "write_snapshot", write_snapshot)
    with client() as c:
        conn = _connector(c, tenant, bucket)
        run = _sync(c, tenant, conn)
        drain(tenant.region)
        final = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
    assert seen["run"]["status"] == "RUNNING"
    assert seen["run"]["objects_read"] == 2, seen["run"]
    assert seen["run"]["rows_read"] == 3, seen["run"]
    assert final["status"] == "SUCCEEDED"
    assert final["objects_read"] == 2
    assert final["rows_read"] == 3


def test_list_sync_runs_newest_first_paged_and_scoped(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "x/a.csv", "id\n1\n")
    with client() as c:
        conn = _connector(c, tenant, bucket)
        other = _connector(c, tenant, bucket, "Other")
        ids = []
        for _ in range(3):
            ids.append(_sync(c, tenant, conn)["id"])
            drain(tenant.region)
        _sync(c, tenant, other)
        viewer = token_for(tenant, "viewer")
        st, page1 = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs?limit=2", viewer)
        assert st == 200, page1
        assert [r["id"] for r in page1["syncs"]] == ids[::-1][:2]
        assert page1["has_more"] is True
        st, page2 = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs?limit=2&after={page1['next_cursor']}", viewer)
        assert [r["id"] for r in page2["syncs"]] == [ids[0]]
        assert page2["has_more"] is False
        assert page2["next_cursor"] is None
        st, empty = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs?limit=2&after=", viewer)  # an unset cursor
        assert st == 200 and empty["syncs"] == page1["syncs"]
        st, only = call(c, "GET", f"/v1/connectors/{other['id']}/syncs?status=QUEUED", viewer)
        assert st == 200
        assert len(only["syncs"]) == 1
        assert only["syncs"][0]["connector_id"] == other["id"]
        # bad input: 400, nothing listed
        for q in ("limit=0", "limit=x", "after=nope", "status=DONE", "colour=red", "after=%2B"):
            st, body = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs?{q}", viewer)
            assert st == 400, (q, body)
            assert body["code"], (q, body)
        # another list's cursor is refused
        st, conns = call(c, "GET", "/v1/connectors?limit=1", viewer)
        st, body = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs?after={conns['next_cursor']}", viewer)
        assert st == 400
    # another workspace's connector: 404, never its runs
    intruder = make_tenant("intruder@example.org", "us-east", "Intruder")
    with client() as c:
        st, body = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs", intruder.token)
        assert st == 404
        assert "syncs" not in body
        st, body = call(c, "GET", "/v1/connectors/conn_nope/syncs", intruder.token)
        assert st == 404


def test_connectors_and_policies_page_like_every_list(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    with client() as c:
        names = ["Bravo", "alpha", "Charlie"]
        for n in names:
            _connector(c, tenant, bucket, n)
        st, p1 = call(c, "GET", "/v1/connectors?limit=2", tenant.token)
        assert st == 200
        assert [x["name"] for x in p1["connectors"]] == ["alpha", "Bravo"]
        assert p1["has_more"]
        st, p2 = call(c, "GET", f"/v1/connectors?limit=2&after={p1['next_cursor']}", tenant.token)
        assert [x["name"] for x in p2["connectors"]] == ["Charlie"]
        assert (p2 == {**p2, "has_more": False,
                                                                              "next_cursor": None})
        st, allp = call(c, "GET", "/v1/policies", tenant.token)
        assert st == 200
        assert allp["has_more"] is False
        assert allp["policies"]
        ids = [p["id"] for p in allp["policies"]]
        st, first = call(c, "GET", "/v1/policies?limit=1", tenant.token)
        assert [p["id"] for p in first["policies"]] == ids[:1]
        assert first["has_more"] == (len(ids) > 1)
        if len(ids) > 1:
            st, rest = call(c, "GET", f"/v1/policies?limit=200&after={first['next_cursor']}", tenant.token)
            assert [p["id"] for p in rest["policies"]] == ids[1:]
        for path in ("/v1/connectors?limit=0", "/v1/connectors?after=zzz", "/v1/policies?limit=999",
                     "/v1/policies?after=zzz", f"/v1/policies?after={p1['next_cursor']}", "/v1/connectors?x=1"):
            st, body = call(c, "GET", path, tenant.token)
            assert st == 400, (path, body)
            assert body["code"], (path, body)
