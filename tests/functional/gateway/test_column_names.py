"""Column references in connector configuration accept the normalised snake_case names the catalog shows
(``employee_id`` for the header "Employee ID") as well as the raw source header."""
from __future__ import annotations

import pytest

from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, drain, new_bucket, put, rows_of

CSV = "Employee ID,Full Name,Dept\n7,Ann,Ops\n8,Bo,Eng\n"
CSV2 = "Employee ID,Full Name,Dept\n8,Bo,Sales\n9,Cy,Eng\n"


def _sync(c, tenant: Tenant, conn: dict) -> dict:
    st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
    assert st == 202, run
    drain(tenant.region)
    return call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]


@pytest.mark.parametrize("pk", [["employee_id"], ["Employee ID"], ["EmployeeID"]])
def test_primary_key_by_normalised_or_raw_name_merges_rows(tenant: Tenant, pk: list[str]) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "hr/a.csv", CSV)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "HR", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "hr/",
                                                    "primary_key": pk}})
        assert st == 201, conn
        assert _sync(c, tenant, conn)["status"] == "SUCCEEDED"
        put(tenant.region, bucket, "hr/b.csv", CSV2)  # employee 8 again, with a new department
        run = _sync(c, tenant, conn)
        assert run["status"] == "SUCCEEDED", run
        cols, rows = rows_of(tenant, conn["dataset"]["id"])
    assert "employee_id" in cols
    by_id = {r[cols.index("employee_id")]: r[cols.index("dept")] for r in rows}
    assert by_id == {7: "Ops", 8: "Sales", 9: "Eng"}  # one row per key: the key was understood


def test_unknown_primary_key_fails_at_once_naming_it(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "hr/a.csv", CSV)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "HR", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "hr/",
                                                    "primary_key": ["employee_number"]}})
        assert st == 201, conn
        run = _sync(c, tenant, conn)
    assert run["status"] == "FAILED"
    assert run["attempts"] == 1
    assert "no value for primary key employee_number" in run["error"]
