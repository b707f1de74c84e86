"""The first calls a new user makes against the demo data (seeded and synced by the ingestion side):
search, schema, a federated query with masked/hashed PII, lineage from the connector to the answer."""
from __future__ import annotations

import json

from chalice.test import Client

from chalicelib.gateway import demo
from chalicelib.groups import create_app
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import token_for
from tests.functional.gateway.sync_helpers import drain


def test_demo_first_calls(tenant: Tenant) -> None:
    out = demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    customers = out["datasets"][0]["id"]
    member = token_for(tenant.workspace_id, "member").token
    with Client(create_app("gateway")) as c:
        r = c.http.get("/v1/catalog/datasets?q=customers", headers=bearer(member))
        assert r.status_code == 200
        assert [d["name"] for d in json.loads(r.body)["items"]] == ["customers"]
        r = c.http.get(f"/v1/catalog/datasets/{customers}/schema", headers=bearer(member))
        fields = {f["name"]: f["policy"] for f in json.loads(r.body)["fields"]}
        assert fields["email"] == "MASK", fields
        assert fields["phone"] == "HASH", fields
        r = c.http.post("/v1/query", headers={**bearer(member), "Content-Type": "application/json"},
                        body=json.dumps({"sql": "SELECT c.email, c.phone, count(o.order_id) AS orders FROM customers c "
                                                "LEFT JOIN orders o USING (customer_id) GROUP BY ALL ORDER BY 1 LIMIT 3"}))
        assert r.status_code == 200, r.body
        body = json.loads(r.body)
        assert [c["name"] for c in body["columns"]] == ["email", "phone", "orders"]
        for email, phone, _ in body["rows"]:
            assert set(email[:-4]) == {"*"}
            assert len(phone) == 64
        assert {d["name"] for d in body["datasets"]} == {"customers", "orders"}
        drain(tenant.region)  # the query's lineage, written by the worker from its message
        r = c.http.get(f"/v1/lineage/{customers}", headers=bearer(member))
        graph = json.loads(r.body)
        kinds = {n["type"] for n in graph["nodes"]}
        assert {"CONNECTOR", "DATASET", "QUERY"} <= kinds
