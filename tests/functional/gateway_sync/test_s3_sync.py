from __future__ import annotations

import json

from chalicelib.gateway import models
from tests.functional.conftest import Tenant
from tests.functional.gateway_sync.helpers import (call, client, dataset, drain, put, put_source_bucket, rows_of)

CSV1 = "id,email,phone,amount,joined\n1,ann@example.com,+1 555 0100,10,2024-01-02\n2,bob@example.com,+1 555 0101,20,2024-02-03\n"


def test_s3_csv_full_then_incremental(tenant: Tenant) -> None:
    put_source_bucket(tenant.region, "src-bucket")
    put(tenant.region, "src-bucket", "crm/a.csv", CSV1)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "CRM customers", "kind": "s3", "config": {"bucket": "src-bucket", "prefix": "crm/",
                                                               "primary_key": ["id"]}})
        assert st == 201, conn
        assert conn["category"] == "STORAGE" and conn["status"] == "HEALTHY", conn
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
        assert st == 202, run
        assert run["status"] == "QUEUED"
        drain(tenant.region)
        st, run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)
        assert run["status"] == "SUCCEEDED", run
        assert run["rows_read"] == 2 and run["rows_written"] == 2
        ds = dataset(tenant, conn["dataset"]["id"])
        schema = {f["name"]: f for f in json.loads(ds.schema)}
        assert schema["id"]["type"] == "INTEGER" and schema["amount"]["type"] == "INTEGER"
        assert schema["joined"]["type"] == "DATE"
        assert schema["email"]["classification"] == "PII" and schema["email"]["policy"] == "MASK"
        assert schema["phone"]["classification"] == "PII"
        assert ds.classification == "PII" and ds.row_count == 2
        cols, rows = rows_of(tenant, ds.id)
        assert cols == ["id", "email", "phone", "amount", "joined"]
        assert len(rows) == 2
        edge = models.lineage_edges(tenant.region).get(tenant.workspace_id, f"{conn['id']}>{ds.id}")
        assert edge.source_type == "connector" and edge.target_type == "dataset"

        # second object + one changed row: the incremental sync reads only the new object
        put(tenant.region, "src-bucket", "crm/b.csv", "id,email,phone,amount,joined\n3,cy@example.com,+1 555 0102,30,2024-03-04\n")
        st, run2 = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        assert st == 202 and run2["mode"] == "INCREMENTAL"
        drain(tenant.region)
        st, run2 = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run2['id']}", tenant.token)
        assert run2["status"] == "SUCCEEDED", run2
        assert run2["rows_read"] == 1 and run2["rows_written"] == 1
        cols, rows = rows_of(tenant, ds.id)
        assert sorted(r[0] for r in rows) == [1, 2, 3]
