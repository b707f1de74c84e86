from __future__ import annotations

import json

from chalicelib.gateway import demo, models
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import rows_of


def test_demo_seed_creates_synced_datasets_with_pii_policies_and_is_idempotent(tenant: Tenant) -> None:
    out = demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    assert [d["name"] for d in out["datasets"]] == ["customers", "orders"]
    assert all(r["status"] == "SUCCEEDED" for r in out["sync_runs"])
    customers = models.datasets(tenant.region).get(tenant.workspace_id, out["datasets"][0]["id"])
    fields = {f["name"]: f for f in json.loads(customers.schema)}
    assert (fields["email"]["classification"], fields["email"]["policy"]) == ("PII", "MASK")
    assert (fields["phone"]["classification"], fields["phone"]["policy"]) == ("PII", "HASH")
    assert fields["city"]["policy"] == "ALLOW"
    assert fields["lifetime_value"]["type"] == "FLOAT"
    assert customers.classification == "PII"
    assert customers.owner == tenant.email
    assert json.loads(customers.acl) == [{"type": "role", "id": "admin"}, {"type": "role", "id": "member"}]
    assert len(rows_of(tenant, customers.id)[1]) == demo.N_CUSTOMERS
    assert models.lineage_edges(tenant.region).count(tenant.workspace_id) == 2
    again = demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    assert again["connectors"] == out["connectors"]
    assert again["sync_runs"] == []
    assert models.connectors(tenant.region).count(tenant.workspace_id) == 2
    assert models.sync_runs(tenant.region).count(tenant.workspace_id) == 2
