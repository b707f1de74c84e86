"""JSON Lines and Parquet objects take the native path (``gateway/ingest/native_objects.py``) and give the dataset, rows,
types, keys, hashes and classification that the equivalent CSV gives, and what the row-by-row reader gives
for the same object."""
from __future__ import annotations

import json
import os
import tempfile

import duckdb
import pytest

from chalicelib.gateway import storage
from chalicelib.gateway.ingest import native_objects
from chalicelib.gateway.ingest.sources import s3_objects
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, dataset, drain, new_bucket, put

ROWS = [
    {"Employee ID": 7, "Full Name": "Ann Lee", "Email": "ann@example.com", "Score": 1.5, "Active": True,
     "Joined": "2024-01-01", "Seen At": "2024-01-01T10:00:00", "Note": None},
    {"Employee ID": 8, "Full Name": "Bo Chan", "Email": "bo@example.com", "Score": 2.25, "Active": False,
     "Joined": "2024-02-29", "Seen At": "2024-03-01 11:30:00", "Note": "say \"hi\""},
    {"Employee ID": 9, "Full Name": "Cy Díaz", "Email": "cy@example.com", "Score": -3.0, "Active": True,
     "Joined": "2023-12-31", "Seen At": "2023-12-31T23:59:59", "Note": "é, ü"},
]


def _csv() -> str:
    def cell(v) -> str:
        if v is None:
            return ""
        text = str(v).lower() if isinstance(v, bool) else str(v)
        return '"' + text.replace('"', '""') + '"' if any(ch in text for ch in ',"\n') else text
    return "\n".join([",".join(ROWS[0])] + [",".join(cell(v) for v in r.values()) for r in ROWS]) + "\n"


def _jsonl() -> str:
    return "".join(json.dumps(r) + "\n" for r in ROWS)


def _parquet() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "rows.jsonl"), os.path.join(tmp, "rows.parquet")
        with open(src, "w") as fh:
            fh.write(_jsonl())
        con = duckdb.connect()
        con.execute(f"""COPY (SELECT "Employee ID"::BIGINT AS "Employee ID", "Full Name", "Email",
                            "Score"::DOUBLE AS "Score", "Active"::BOOLEAN AS "Active", "Joined"::DATE AS "Joined",
                            "Seen At"::TIMESTAMP AS "Seen At", "Note"::VARCHAR AS "Note"
                        FROM read_json('{src}', format = 'newline_delimited')) TO '{out}' (FORMAT PARQUET)""")
        con.close()
        with open(out, "rb") as fh:
            return fh.read()


def _sync_into(c, tenant: Tenant, bucket: str, prefix: str, name: str, **config) -> dict:
    st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": name, "kind": "s3", "config": {
        "role_arn": READER_ROLE, "bucket": bucket, "prefix": prefix, **config}})
    assert st == 201, conn
    st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
    assert st == 202, run
    drain(tenant.region)
    run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
    assert run["status"] == "SUCCEEDED", run
    return conn


def _state(tenant: Tenant, conn: dict) -> tuple[list, list, list]:
    ds = dataset(tenant, conn["dataset"]["id"])
    schema = [(f["name"], f["type"], f["classification"], f.get("source_name")) for f in json.loads(ds.schema)]
    names, rows = storage.read_rows(tenant.region, ds.data_prefix, internal=True)
    keep = [n for n in names if n != "_source"]  # the object's key differs by design
    return schema, keep, sorted(tuple(r[names.index(n)] for n in keep) for r in rows)


@pytest.fixture
def row_by_row(monkeypatch) -> list[str]:
    """The objects the row-by-row reader parsed (the native path's fallback)."""
    parsed: list[str] = []
    real = s3_objects.parse

    def parse(data, fmt, key, delimiter):
        parsed.append(key)
        return real(data, fmt, key, delimiter)

    monkeypatch.setattr(s3_objects, "parse", parse)
    return parsed


def test_jsonl_and_parquet_give_the_csv_dataset(tenant: Tenant, row_by_row: list[str]) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "csv/people.csv", _csv())
    put(tenant.region, bucket, "jsonl/people.jsonl", _jsonl())
    put(tenant.region, bucket, "parquet/people.parquet", _parquet())
    with client() as c:
        states = {fmt: _state(tenant, _sync_into(c, tenant, bucket, f"{fmt}/", f"People {fmt}",
                                                 primary_key=["employee_id"]))
                  for fmt in ("csv", "jsonl", "parquet")}
    assert row_by_row == []  # all three took the native path
    schema, names, rows = states["csv"]
    assert [(n, t) for n, t, _, _ in schema] == [
        ("employee_id", "INTEGER"), ("full_name", "STRING"), ("email", "STRING"), ("score", "FLOAT"),
        ("active", "BOOLEAN"), ("joined", "DATE"), ("seen_at", "TIMESTAMP"), ("note", "STRING")]
    assert dict((n, cls) for n, _, cls, _ in schema)["email"] != "PUBLIC"
    assert [r[names.index("_key")] for r in rows] == ['["7"]', '["8"]', '["9"]']
    assert states["jsonl"] == states["csv"]
    assert states["parquet"] == states["csv"]


EDGES = [  # each line: what the native rules must type and render as the row-by-row reader does
    {"id": "a", "mixed": 1, "text_number": "5", "big": 12345678901234567890, "f": 2.0, "when": "2024-01-01"},
    {"id": "b", "mixed": "x", "text_number": "6", "big": 1, "f": 1e20, "when": "2024-01-01T10:00:00+02:00"},
    {"id": "c", "mixed": 2.5, "text_number": None, "f": 3, "extra": True},
    {"id": "", "mixed": False},
]


@pytest.mark.parametrize("lines", [EDGES[:3], EDGES[:3] + [{"id": "d", "nested": {"k": [1, 2]}}]],
                         ids=["native", "nested-falls-back"])
def test_jsonl_edges_match_the_row_by_row_reader(tenant: Tenant, row_by_row: list[str], monkeypatch,
                                                 lines: list[dict]) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "e/rows.jsonl", "".join(json.dumps(r) + "\n" for r in lines))
    with client() as c:
        native = _state(tenant, _sync_into(c, tenant, bucket, "e/", "Edges native"))
        took_native = not row_by_row
        monkeypatch.setattr(native_objects, "_load_json", lambda *a: None)  # force the row-by-row reader
        python = _state(tenant, _sync_into(c, tenant, bucket, "e/", "Edges python"))
    assert took_native == (len(lines) == 3)
    assert native == python
    schema = {n: t for n, t, _, _ in native[0]}
    assert schema["mixed"] == "STRING"
    assert schema["text_number"] == "STRING"
    assert schema["big"] == "STRING"
    assert schema["f"] == "FLOAT"
    assert schema["when"] == "TIMESTAMP"


def test_a_jsonl_row_with_an_empty_key_fails_as_the_row_by_row_reader_does(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "k/rows.jsonl", "".join(json.dumps(r) + "\n" for r in EDGES))
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Keyed", "kind": "s3", "config": {
            "role_arn": READER_ROLE, "bucket": bucket, "prefix": "k/", "primary_key": ["id"]}})
        assert st == 201, conn
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
        drain(tenant.region)
        run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
    assert run["status"] == "FAILED", run
    assert "k/rows.jsonl row 4 has no value for primary key id" in run["error"], run
