"""Each connector kind syncs for real: DynamoDB and documents against moto, http against a loopback
server of the test's own."""
from __future__ import annotations

import json
import os
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests

from chalicelib.core import aws, clock
from chalicelib.gateway import models
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, dataset, drain, rows_of, source_client
from tests.local_http import send_body, serve, stop, url_of


def _sync(c, tenant: Tenant, conn_id: str, mode: str = "INCREMENTAL") -> dict:
    st, run = call(c, "POST", f"/v1/connectors/{conn_id}/sync", tenant.token, {"mode": mode})
    assert st == 202, run
    drain(tenant.region)
    return call(c, "GET", f"/v1/connectors/{conn_id}/syncs/{run['id']}", tenant.token)[1]


def _table(region: str) -> str:
    name = f"src-{uuid.uuid4().hex[:12]}"
    ddb = source_client("dynamodb", region)
    ddb.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
    return name


def _put_item(region: str, table: str, pk: str, **attrs: Any) -> None:
    item = {"pk": {"S": pk}}
    for k, v in attrs.items():
        item[k] = {"N": str(v)} if isinstance(v, (int, float)) else {"S": v}
    source_client("dynamodb", region).put_item(TableName=table, Item=item)


def test_dynamodb_incremental_by_updated_at(tenant: Tenant) -> None:
    table = _table(tenant.region)
    for i in range(4):
        _put_item(tenant.region, table, f"u{i}", email=f"u{i}@example.com", score=i, updated_at=f"2024-01-0{i + 1}T00:00:00Z")
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "Users table", "kind": "dynamodb", "config": {"role_arn": READER_ROLE, "table": table, "updated_at_attribute": "updated_at"}})
        assert st == 201, conn
        assert conn["category"] == "DATABASE", conn
        assert conn["status"] == "HEALTHY", conn
        run = _sync(c, tenant, conn["id"])
        assert (run["status"], run["rows_read"]) == ("SUCCEEDED", 4), run
        _put_item(tenant.region, table, "u1", email="new@example.com", score=1.5, updated_at="2024-02-01T00:00:00Z")
        run = _sync(c, tenant, conn["id"])
        assert (run["status"], run["rows_read"], run["rows_written"]) == ("SUCCEEDED", 1, 1), run
        ds = dataset(tenant, conn["dataset"]["id"])
        types = {f["name"]: (f["type"], f["classification"]) for f in json.loads(ds.schema)}
        assert types["score"] == ("FLOAT", "INTERNAL")
        assert types["email"] == ("STRING", "PII")
        assert types["updated_at"][0] == "TIMESTAMP"
        cols, rows = rows_of(tenant, ds.id)
        by_pk = {r[cols.index("pk")]: dict(zip(cols, r, strict=True)) for r in rows}
        assert len(by_pk) == 4
        assert by_pk["u1"]["email"] == "new@example.com"
        assert by_pk["u1"]["score"] == 1.5


def test_dynamodb_full_scan_uses_change_hash_and_sees_deletes(tenant: Tenant) -> None:
    table = _table(tenant.region)
    for i in range(5):
        _put_item(tenant.region, table, f"k{i}", v=i)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token,
                        {"name": "Plain table", "kind": "dynamodb", "config": {"role_arn": READER_ROLE, "table": table}})
        assert st == 201
        assert _sync(c, tenant, conn["id"])["rows_written"] == 5
        _put_item(tenant.region, table, "k2", v=22)
        source_client("dynamodb", tenant.region).delete_item(TableName=table, Key={"pk": {"S": "k4"}})
        run = _sync(c, tenant, conn["id"])
        assert (run["rows_read"], run["rows_written"], run["rows_deleted"]) == (4, 1, 1), run
        cols, rows = rows_of(tenant, conn["dataset"]["id"])
        assert sorted(rows) == [("k0", 0), ("k1", 1), ("k2", 22), ("k3", 3)]


def test_dynamodb_records_are_spooled_in_bounded_batches(tenant: Tenant, monkeypatch) -> None:
    """The reader holds at most ``SPOOL_BATCH`` records in memory; the spool file is gone after the sync."""
    from chalicelib.gateway.ingest import sources

    monkeypatch.setattr(sources, "SPOOL_BATCH", 2)
    held: list[int] = []
    paths: list[str] = []
    real_append, real_init = sources.RecordSpool.append, sources.RecordSpool.__init__

    def init(self) -> None:
        real_init(self)
        paths.append(self.path)

    def append(self, record) -> None:
        real_append(self, record)
        held.append(len(self._buffer))

    monkeypatch.setattr(sources.RecordSpool, "__init__", init)
    monkeypatch.setattr(sources.RecordSpool, "append", append)
    table = _table(tenant.region)
    for i in range(7):
        _put_item(tenant.region, table, f"s{i}", v=i, note="x" if i % 2 else 3)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token,
                        {"name": "Spooled table", "kind": "dynamodb", "config": {"role_arn": READER_ROLE, "table": table}})
        assert st == 201, conn
        run = _sync(c, tenant, conn["id"])
        assert (run["status"], run["rows_read"], run["rows_written"]) == ("SUCCEEDED", 7, 7), run
    assert len(held) == 7
    assert max(held) < 2
    assert paths
    assert not any(os.path.exists(p) for p in paths)
    ds = dataset(tenant, conn["dataset"]["id"])
    assert {f["name"]: f["type"] for f in json.loads(ds.schema)}["note"] == "STRING"  # 3 and "x" widened
    cols, rows = rows_of(tenant, ds.id)
    assert sorted(r[cols.index("pk")] for r in rows) == [f"s{i}" for i in range(7)]
    assert {r[cols.index("pk")]: r[cols.index("note")] for r in rows}["s0"] == "3"


class _Api:
    """A paginated JSON API with an updated-since cursor and an API key, on 127.0.0.1:0."""

    def __init__(self) -> None:
        self.records = {i: {"id": i, "name": f"Person {i}", "email": f"p{i}@example.com",
                            "updated_at": f"2024-01-01T00:00:{i:02d}Z"} for i in range(1, 8)}
        self.requests: list[dict[str, list[str]]] = []
        self.key = "k-" + uuid.uuid4().hex
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                q = parse_qs(urlsplit(self.path).query)
                api.requests.append(q)
                if self.headers.get("X-API-Key") != api.key:
                    self.send_response(401)
                    self.end_headers()
                    return
                since = q.get("updated_since", [""])[0]
                limit = int(q.get("limit", ["100"])[0])
                start = int(q.get("cursor", ["0"])[0])
                matching = [r for _, r in sorted(api.records.items()) if r["updated_at"] > since]
                page = matching[start:start + limit]
                nxt = str(start + limit) if start + limit < len(matching) else None
                send_body(self, {"items": page, "next": nxt})

        self.server = serve(Handler)
        self.url = url_of(self.server, "/people")

    def close(self) -> None:
        stop(self.server)


def test_http_api_paginates_and_syncs_only_updates(tenant: Tenant) -> None:
    api = _Api()
    try:
        with client() as c:
            st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
                "name": "People API", "kind": "http",
                "config": {"url": api.url, "api_key": api.key, "page_size": 3}})
            assert st == 201, conn
            assert conn["category"] == "API", conn
            assert conn["status"] == "HEALTHY", conn
            assert api.key not in json.dumps(conn)
            assert conn["config"]["secrets_set"] == ["api_key"]
            stored = models.connectors(tenant.region).get(tenant.workspace_id, conn["id"]).config
            assert api.key not in stored  # only ciphertext at rest
            run = _sync(c, tenant, conn["id"])
            assert (run["status"], run["rows_read"]) == ("SUCCEEDED", 7), run
            assert len([r for r in api.requests if "cursor" in r]) == 2  # three pages
            api.records[2] = {**api.records[2], "email": "changed@example.com", "updated_at": "2024-03-01T00:00:00Z"}
            api.records[9] = {"id": 9, "name": "Person 9", "email": "p9@example.com", "updated_at": "2024-03-02T00:00:00Z"}
            api.requests.clear()
            run = _sync(c, tenant, conn["id"])
            assert (run["status"], run["rows_read"], run["rows_written"]) == ("SUCCEEDED", 2, 2), run
            assert api.requests[0]["updated_since"] == ["2024-01-01T00:00:07Z"]
            cols, rows = rows_of(tenant, conn["dataset"]["id"])
            assert len(rows) == 8
            assert dict(zip(cols, [r for r in rows if r[0] == 2][0], strict=True))["email"] == "changed@example.com"
            schema = {f["name"]: f for f in json.loads(dataset(tenant, conn["dataset"]["id"]).schema)}
            assert schema["name"]["classification"] == "PII"
            assert schema["email"]["policy"] == "MASK"

            # a wrong key: the sync fails on its last attempt and the connector reports it
            st, conn2 = call(c, "PATCH", f"/v1/connectors/{conn['id']}", tenant.token, {"config": {"api_key": "wrong"}})
            assert st == 200, conn2
            assert conn2["status"] == "FAILING", conn2
            assert "401" in conn2["health"]["last_error"], conn2
            st, conn2 = call(c, "PATCH", f"/v1/connectors/{conn['id']}", tenant.token, {"config": {"page_size": 5}})
            assert conn2["status"] == "FAILING"  # the wrong key was kept (not resent)
    finally:
        api.close()


def test_documents_presigned_upload_and_passages(tenant: Tenant) -> None:
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "Handbook", "kind": "documents", "config": {"max_passage_chars": 200, "overlap_chars": 20}})
        assert st == 201, conn
        assert conn["category"] == "DOCUMENTS", conn
        st, up = call(c, "POST", f"/v1/connectors/{conn['id']}/uploads", tenant.token,
                      {"file_name": "handbook.md", "content_type": "text/markdown"})
        assert st == 201, up
        assert aws.bucket_name("documents", tenant.region) in up["upload_url"]
        text = "# Handbook\n\n" + "\n\n".join(f"Paragraph {i}. " + "word " * 30 for i in range(6))
        r = requests.put(up["upload_url"], data=text.encode(), headers=up["headers"], timeout=10)
        assert r.status_code == 200, r.text
        st, up2 = call(c, "POST", f"/v1/connectors/{conn['id']}/uploads", tenant.token, {"file_name": "blob.bin"})
        requests.put(up2["upload_url"], data=b"\xff\xfe\x00\x01binary", headers=up2["headers"], timeout=10)
        run = _sync(c, tenant, conn["id"])
        assert run["status"] == "SUCCEEDED", run
        cols, rows = rows_of(tenant, conn["dataset"]["id"])
        assert cols == ["document_id", "file_name", "passage_no", "page", "text", "char_start", "char_end",
                        "uploaded_at"]
        passages = [dict(zip(cols, r, strict=True)) for r in rows]
        assert {p["document_id"] for p in passages} == {up["document_id"]}
        assert len(passages) >= 6
        assert all(len(p["text"]) <= 200 for p in passages)
        assert all(text[p["char_start"]:p["char_end"]].strip() == p["text"] for p in passages)
        assert "Paragraph 5." in " ".join(p["text"] for p in passages)
        run_row = models.sync_runs(tenant.region).get(tenant.workspace_id, run["id"])
        assert json.loads(run_row.details)["skipped"] == [
            "blob.bin: .bin files are not supported. Upload PDF, Word (.docx), HTML, Markdown or plain text (.txt)."]
        # an upload URL only for documents connectors, and only plain file names
        assert call(c, "POST", f"/v1/connectors/{conn['id']}/uploads", tenant.token,
                    {"file_name": "../../etc/passwd"})[0] == 400
    _ = clock
