"""Permission-aware retrieval: dataset ACL and field policies apply before ranking, and masked values
never reach an index file, a hit or a citation."""
from __future__ import annotations

import gzip
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import aws
from chalicelib.core.tenancy import scope_of
from chalicelib.gateway.catalog import service as catalog
from chalicelib.groups import create_app
from chalicelib.knowledge import indexer, service, store
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import field, token_for
from tests.functional.knowledge.helpers import put_keyed as put_dataset
from tests.functional.knowledge.helpers import run_index_rebuilds


def _index_bytes(region: str) -> bytes:
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name("knowledge", region)
    out = b""
    for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        out += gzip.decompress(body) if obj["Key"].endswith(".gz") else body
    return out


DOC_FIELDS = [field("document_id"), field("file_name"), field("passage_no", "INTEGER"), field("text"),
              field("char_start", "INTEGER"), field("char_end", "INTEGER")]


@pytest.fixture
def world(tenant: Tenant) -> dict[str, Any]:
    ws, region = tenant.workspace_id, tenant.region
    public = put_dataset(ws, region, "handbook", [field("topic"), field("body")],
                         [("vacation", "Employees get thirty vacation days per year."),
                          ("travel", "Travel is booked through the travel desk.")])
    secret = put_dataset(ws, region, "board_minutes", [field("topic"), field("body")],
                         [("vacation", "The board cut vacation days to ten days per year for everyone.")],
                         acl=[{"type": "role", "id": "admin"}])
    people = put_dataset(ws, region, "people", [field("name"), field("email", "STRING", "PII", "MASK"),
                                                field("city")],
                         [("Zelda Quark", "zelda.quark@example.com", "Lisbon")])
    for ds in (public, secret, people):
        indexer.index_dataset(region, ws, ds)
    return {"public": public, "secret": secret, "people": people, "member": token_for(ws, "member")}


def test_unreadable_dataset_never_scored_even_when_best_match(tenant: Tenant, world: dict[str, Any]) -> None:
    member = world["member"]
    with Client(create_app("gateway")) as c:
        r = c.http.get("/v1/knowledge/search?q=board+cut+vacation+days+ten", headers=bearer(member.token))
        assert r.status_code == 200, r.body
        items = r.json_body["items"]
        assert items
        assert all(i["citation"]["source"]["dataset_id"] != world["secret"] for i in items)
        assert "board cut vacation days to ten" not in r.body.decode()
        admin = c.http.get("/v1/knowledge/search?q=board+cut+vacation+days+ten", headers=bearer(tenant.token))
        assert world["secret"] in {i["citation"]["source"]["dataset_id"] for i in admin.json_body["items"]}


def test_masked_field_never_in_index_or_hits(tenant: Tenant, world: dict[str, Any]) -> None:
    assert b"zelda.quark@example.com" not in _index_bytes(tenant.region)
    assert b"Lisbon" in _index_bytes(tenant.region)  # the index was written (ALLOW fields are there)
    with Client(create_app("gateway")) as c:
        r = c.http.get("/v1/knowledge/search?q=zelda+quark+example", headers=bearer(tenant.token))
    assert r.status_code == 200
    assert "zelda.quark@example.com" not in r.body.decode()
    assert r.json_body["items"][0]["text"] == "name: Zelda Quark; city: Lisbon"


def test_policy_change_masks_at_once_and_the_queued_rebuild_drops_the_value(tenant: Tenant,
                                                                           world: dict[str, Any]) -> None:
    ws, region = tenant.workspace_id, tenant.region
    catalog.set_field_policy(scope_of(service_principal(tenant)), world["people"], "city", "REDACT")
    hits = service.search(scope_of(service_principal(tenant)), "Lisbon", 5)
    assert all("Lisbon" not in h.chunk.text for h in hits)
    assert b"Lisbon" in _index_bytes(region)  # the search wrote nothing: the rebuild is queued
    assert run_index_rebuilds(region) == [{"batchItemFailures": []}]
    assert b"Lisbon" not in _index_bytes(region)
    store.invalidate(ws)
    m = store.manifests(region, ws).indexes[world["people"]]
    assert m.chunk_count == 1
    assert m.policy_fingerprint == indexer.policy_fingerprint(catalog.snapshot(region, ws).datasets[world["people"]])


def test_document_acl_masks_before_scoring(tenant: Tenant, world: dict[str, Any]) -> None:
    ws, region = tenant.workspace_id, tenant.region
    docs = put_dataset(ws, region, "policies_docs", DOC_FIELDS, [
        ("doc_01HZZZZZZZZZZZZZZZZZZZZZZ1", "travel.md", 1, "Travel is booked through the travel desk.", 0, 41),
        ("doc_01HZZZZZZZZZZZZZZZZZZZZZZ2", "desk.md", 1, "The travel desk also books hotels.", 0, 34)])
    indexer.index_dataset(region, ws, docs)
    member = world["member"]
    secret_doc = "doc_01HZZZZZZZZZZZZZZZZZZZZZZ1"
    with Client(create_app("gateway")) as c:
        before = c.http.get("/v1/knowledge/search?q=travel+desk+booked&kind=document",
                            headers=bearer(member.token)).json_body["items"]
        assert before[0]["citation"]["source"]["id"] == secret_doc
        put = c.http.put(f"/v1/knowledge/datasets/{docs}/documents/{secret_doc}/acl",
                         headers={**bearer(tenant.token), "Content-Type": "application/json"},
                         body='{"acl": [{"type": "role", "id": "admin"}]}')
        assert put.status_code == 200, put.body
        after = c.http.get("/v1/knowledge/search?q=travel+desk+booked&kind=document",
                           headers=bearer(member.token)).json_body["items"]
        assert [i["citation"]["source"]["id"] for i in after] == ["doc_01HZZZZZZZZZZZZZZZZZZZZZZ2"]
        admin = c.http.get("/v1/knowledge/search?q=travel+desk+booked&kind=document",
                           headers=bearer(tenant.token)).json_body["items"]
        assert admin[0]["citation"]["source"]["id"] == secret_doc
        assert admin[0]["citation"]["span"] == {"start": 0, "end": 41}
        assert admin[0]["citation"]["title"] == "travel.md"


def test_bad_search_input(tenant: Tenant, world: dict[str, Any]) -> None:
    with Client(create_app("gateway")) as c:
        for qs in ("", "?q=", "?q=x&k=0", "?q=x&k=500", "?q=x&kind=video", "?q=x&bogus=1"):
            r = c.http.get("/v1/knowledge/search" + qs, headers=bearer(tenant.token))
            assert r.status_code == 400, qs
            assert {k.lower(): v for k, v in r.headers.items()}["content-type"] == "application/problem+json"
            assert r.json_body["code"] == "validation_failed"


def service_principal(tenant: Tenant) -> Any:
    from chalicelib.core.authz import Principal

    return Principal(user_id=tenant.user_id, workspace_id=tenant.workspace_id, roles=("admin",),
                     email=tenant.email, amr=("pwd",), token_id="t")


def test_document_acl_bad_input(tenant: Tenant, world: dict[str, Any]) -> None:
    h = {**bearer(tenant.token), "Content-Type": "application/json"}
    with Client(create_app("gateway")) as c:
        base = f"/v1/knowledge/datasets/{world['public']}/documents"
        assert c.http.put(f"{base}/not-a-doc/acl", headers=h, body='{"acl": []}').status_code == 404
        assert c.http.put("/v1/knowledge/datasets/ds_unknown/documents/doc_01HZZZZZZZZZZZZZZZZZZZZZZ1/acl",
                          headers=h, body='{"acl": []}').status_code == 404
        for body in ('{"acl": [{"type": "group", "id": "x"}]}', '{"acl": "admin"}', '{}', '{"acl": [], "x": 1}'):
            r = c.http.put(f"{base}/doc_01HZZZZZZZZZZZZZZZZZZZZZZ1/acl", headers=h, body=body)
            assert r.status_code == 400, body
        member = world["member"]
        r = c.http.put(f"{base}/doc_01HZZZZZZZZZZZZZZZZZZZZZZ1/acl",
                       headers={**bearer(member.token), "Content-Type": "application/json"}, body='{"acl": []}')
        assert r.status_code == 403
