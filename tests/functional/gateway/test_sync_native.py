"""CSV objects read natively give what the row-by-row reader gave: keys, types, quoting, BOM, short and
long rows (the latter through the Python fallback), and the same errors."""
from __future__ import annotations

import json

from chalicelib.gateway import storage
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, dataset, drain, new_bucket, put


def _connector(c, tenant: Tenant, bucket: str, **config) -> dict:
    st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Native rows", "kind": "s3", "config": {
        "role_arn": READER_ROLE, "bucket": bucket, "prefix": "n/", **config}})
    assert st == 201, conn
    return conn


def _sync(c, tenant: Tenant, conn: dict) -> dict:
    st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
    assert st == 202, run
    drain(tenant.region)
    return call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]


def test_native_and_fallback_objects_keep_the_row_by_row_semantics(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "n/a.csv", '\ufeffName,Score,When\n"Ann, A.",1.5,2024-01-01T10:00:00+02:00\n'
                                          'Bo,2,2024-01-02\n\n"multi\nline",,\nshort\n')
    put(tenant.region, bucket, "n/b.csv", "Name,Score,When\nCy,3,2024-01-03,surplus\n")  # a long row: fallback
    with client() as c:
        conn = _connector(c, tenant, bucket)
        run = _sync(c, tenant, conn)
        assert run["status"] == "SUCCEEDED", run
        assert run["rows_read"] == 5, run
        assert run["rows_written"] == 5, run
        ds = dataset(tenant, conn["dataset"]["id"])
        schema = {f["name"]: f["type"] for f in json.loads(ds.schema)}
        assert schema == {"name": "STRING", "score": "FLOAT", "when": "TIMESTAMP", "extra_4": "STRING"}, schema
        names, rows = storage.read_rows(tenant.region, ds.data_prefix, internal=True)
        got = {r[names.index("_key")]: tuple(r[names.index(n)] for n in ("name", "score", "when", "extra_4"))
               for r in rows}
        assert set(got) == {"n/a.csv#1", "n/a.csv#2", "n/a.csv#3", "n/a.csv#4", "n/b.csv#1"}
        assert got["n/a.csv#1"][:2] == ("Ann, A.", 1.5)
        assert str(got["n/a.csv#1"][2]) == "2024-01-01 08:00:00"
        assert str(got["n/a.csv#2"][2]) == "2024-01-02 00:00:00"
        assert got["n/a.csv#3"] == ("multi\nline", None, None, None)
        assert got["n/a.csv#4"] == ("short", None, None, None)
        assert got["n/b.csv#1"][:2] == ("Cy", 3.0)
        assert got["n/b.csv#1"][3] == "surplus"
        assert str(got["n/b.csv#1"][2]) == "2024-01-03 00:00:00"


def test_primary_keys_and_errors_match_the_row_by_row_reader(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "n/a.csv", 'Employee ID,Note\n7,"say ""hi"""\n8,é\n7,again\n')
    with client() as c:
        conn = _connector(c, tenant, bucket, primary_key=["employee_id"])
        run = _sync(c, tenant, conn)
        assert run["status"] == "SUCCEEDED", run
        assert run["rows_read"] == 3, run
        assert run["rows_written"] == 2, run
        names, rows = storage.read_rows(tenant.region, dataset(tenant, conn["dataset"]["id"]).data_prefix, internal=True)
        assert {r[names.index("_key")]: r[names.index("note")] for r in rows} == {'["7"]': "again", '["8"]': "é"}

        put(tenant.region, bucket, "n/b.csv", "Employee ID,Note\n9,x\n,missing\n")
        run = _sync(c, tenant, conn)
        assert run["status"] == "FAILED"
        assert "n/b.csv row 2 has no value for primary key employee_id" in run["error"]

        put(tenant.region, bucket, "n/b.csv", b"Employee ID,Note\n9,\xff\n")
        run = _sync(c, tenant, conn)
        assert run["status"] == "FAILED", run
        assert "n/b.csv is not UTF-8 text" in run["error"], run


def test_a_type_sniffed_from_the_first_rows_still_widens_on_a_later_value(tenant: Tenant) -> None:
    from chalicelib.gateway.ingest import native_objects

    n = native_objects.SNIFF_ROWS + 50
    lines = ["id,a,b,c,d"] + [f"{i},{i},{i},2024-01-{i % 28 + 1:02d},{i}" for i in range(n - 1)]
    lines.append(f"{n - 1},1.5,x,2024-01-01T10:00:00Z,")  # the last row only: FLOAT, STRING, TIMESTAMP, null
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "n/big.csv", "\n".join(lines) + "\n")
    with client() as c:
        conn = _connector(c, tenant, bucket)
        run = _sync(c, tenant, conn)
        assert run["status"] == "SUCCEEDED", run
        assert run["rows_written"] == n, run
        fields = {f["name"]: f for f in json.loads(dataset(tenant, conn["dataset"]["id"]).schema)}
        assert {k: f["type"] for k, f in fields.items()} == {
            "id": "INTEGER", "a": "FLOAT", "b": "STRING", "c": "TIMESTAMP", "d": "INTEGER"}
        assert fields["d"]["nullable"] is True
        assert fields["a"]["nullable"] is False
