"""A search only reads: a stale index is served masked by the caller's current view, and its rebuild is
queued once (a conditional ``rebuild#`` marker, then one ``knowledge-index`` message) and built by the worker."""
from __future__ import annotations

from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import aws
from chalicelib.core.tenancy import scope_of
from chalicelib.gateway.catalog import service as catalog
from chalicelib.groups import create_app
from chalicelib.knowledge import indexer, service, store
from chalicelib.knowledge.models import KIND_REBUILD, knowledge
from tests.functional.aws_calls import counting
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import field, token_for
from tests.functional.knowledge.helpers import put_keyed, run_index_rebuilds
from tests.functional.knowledge.test_search import DOC_FIELDS, _index_bytes, service_principal


@pytest.fixture
def people(tenant: Tenant) -> str:
    ws, region = tenant.workspace_id, tenant.region
    ds = put_keyed(ws, region, "people", [field("name"), field("city")], [("Zelda Quark", "Lisbon")])
    indexer.index_dataset(region, ws, ds)
    return ds


def _queued(region: str) -> int:
    attrs = aws.client("sqs", region).get_queue_attributes(
        QueueUrl=aws.queue_url("knowledge-index", region), AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def _no_rebuild(*_: Any, **__: Any) -> Any:
    raise AssertionError("a search must not build an index")


def test_a_stale_search_writes_no_index_and_queues_one_rebuild(tenant: Tenant, people: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ws, region = tenant.workspace_id, tenant.region
    admin = service_principal(tenant)
    scope = scope_of(admin)
    catalog.set_field_policy(scope, people, "city", "MASK")
    service.search(scope, "Zelda", 5)  # warm: catalog, manifests, index files loaded; the rebuild asked for
    assert _queued(region) == 1
    monkeypatch.setattr(indexer, "index_dataset", _no_rebuild)
    monkeypatch.setattr(indexer, "chunks_of", _no_rebuild)
    monkeypatch.setattr(indexer.dense, "embed", _no_rebuild)
    store.invalidate(ws)  # manifests are read again
    indexer._forget_seen()  # another container: it writes the marker again, which is refused
    with counting() as seen:
        hits = service.search(scope, "Zelda Lisbon", 5)
    assert [h.chunk.text for h in hits] == []  # city is no longer ALLOW: the only chunk holds it
    writes = {call: n for call, n in seen.items()
              if call.split()[1] in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "PutObject",
                                     "DeleteObjects", "SendMessage")}
    assert writes == {"dynamodb PutItem knowledge": 1}, dict(seen)  # the refused conditional marker write
    assert seen == {"dynamodb Query knowledge": 1, "dynamodb PutItem knowledge": 1}, dict(seen)
    with counting() as again:
        service.search(scope, "Zelda Lisbon", 5)
    assert not any("PutItem" in c or "SendMessage" in c for c in again), dict(again)  # seen here: no write
    assert _queued(region) == 1  # at most one queued rebuild per dataset and target


def test_a_deny_hides_the_chunk_at_once_and_the_worker_rebuilds(tenant: Tenant, people: str) -> None:
    ws, region = tenant.workspace_id, tenant.region
    member = token_for(ws, "member")
    old = store.manifests(region, ws).indexes[people].prefix
    with Client(create_app("gateway")) as c:
        def search() -> list[dict[str, Any]]:
            r = c.http.get("/v1/knowledge/search?q=Zelda+Lisbon", headers=bearer(member.token))
            assert r.status_code == 200, r.body
            return r.json_body["items"]

        assert search()[0]["text"] == "name: Zelda Quark; city: Lisbon"
        catalog.set_field_policy(scope_of(service_principal(tenant)), people, "city", "DENY")
        assert search() == []  # before any rebuild
        assert b"Lisbon" in _index_bytes(region)  # the index is still the old one
        assert knowledge(region).get(ws, KIND_REBUILD + people).version is not None
        assert run_index_rebuilds(region) == [{"batchItemFailures": []}]
        store.invalidate(ws)
        fresh = store.manifests(region, ws).indexes[people]
        assert fresh.prefix != old
        assert b"Lisbon" not in _index_bytes(region)
        assert knowledge(region).count(ws, knowledge(region).key == KIND_REBUILD + people) == 0  # request done
        assert [i["text"] for i in search()] == ["name: Zelda Quark"]
    assert _queued(region) == 0  # a fresh index asks for nothing


def test_a_stale_index_still_hides_an_acl_restricted_document_under_its_old_name(tenant: Tenant) -> None:
    """``document_id`` was MASK at build (chunks name documents ``docref_...``) and is ALLOW now: the
    per-document ACL must still match the old name until the rebuild."""
    ws, region = tenant.workspace_id, tenant.region
    fields = [dict(f, policy="MASK") if f["name"] == "document_id" else f for f in DOC_FIELDS]
    secret, other = "doc_01HZZZZZZZZZZZZZZZZZZZZZZ1", "doc_01HZZZZZZZZZZZZZZZZZZZZZZ2"
    docs = put_keyed(ws, region, "stale_docs", fields, [
        (secret, "travel.md", 1, "Travel is booked through the travel desk.", 0, 41),
        (other, "desk.md", 1, "The travel desk also books hotels.", 0, 34)])
    indexer.index_dataset(region, ws, docs)
    admin = service_principal(tenant)
    member = token_for(ws, "member")
    h = {**bearer(tenant.token), "Content-Type": "application/json"}
    with Client(create_app("gateway")) as c:
        r = c.http.put(f"/v1/knowledge/datasets/{docs}/documents/{secret}/acl", headers=h,
                       body='{"acl": [{"type": "role", "id": "admin"}]}')
        assert r.status_code == 200, r.body
        catalog.set_field_policy(scope_of(admin), docs, "document_id", "ALLOW")
        items = c.http.get("/v1/knowledge/search?q=travel+desk+booked", headers=bearer(member.token)).json_body["items"]
        assert items
        assert all("booked through" not in i["text"] for i in items)
        assert all(i["citation"]["source"]["id"] != secret for i in items)
        run_index_rebuilds(region)
        store.invalidate(ws)
        after = c.http.get("/v1/knowledge/search?q=travel+desk+booked", headers=bearer(member.token)).json_body
        assert [i["citation"]["source"]["id"] for i in after["items"]] == [other]
