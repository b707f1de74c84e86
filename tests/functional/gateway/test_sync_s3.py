from __future__ import annotations

import json

from chalicelib.gateway import models
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import (
    READER_ROLE,
    call,
    client,
    dataset,
    drain,
    new_bucket,
    put,
    rows_of,
    source_client,
)

CSV1 = "id,email,phone,amount,joined\n1,ann@example.com,+1 555 0100,10,2024-01-02\n2,bob@example.com,+1 555 0101,20,2024-02-03\n"


def test_s3_csv_full_then_incremental(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "crm/a.csv", CSV1)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "CRM customers", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "crm/",
                                                               "primary_key": ["id"]}})
        assert st == 201, conn
        assert conn["category"] == "STORAGE", conn
        assert conn["status"] == "HEALTHY", conn
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
        assert st == 202, run
        assert run["status"] == "QUEUED"
        drain(tenant.region)
        st, run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)
        assert run["status"] == "SUCCEEDED", run
        assert run["rows_read"] == 2
        assert run["rows_written"] == 2
        ds = dataset(tenant, conn["dataset"]["id"])
        schema = {f["name"]: f for f in json.loads(ds.schema)}
        assert schema["id"]["type"] == "INTEGER"
        assert schema["amount"]["type"] == "INTEGER"
        assert schema["joined"]["type"] == "DATE"
        assert schema["email"]["classification"] == "PII"
        assert schema["email"]["policy"] == "MASK"
        assert schema["phone"]["classification"] == "PII"
        assert ds.classification == "PII"
        assert ds.row_count == 2
        cols, rows = rows_of(tenant, ds.id)
        assert cols == ["id", "email", "phone", "amount", "joined"]
        assert len(rows) == 2
        edge = models.lineage_edges(tenant.region).get(tenant.workspace_id, f"{conn['id']}>{ds.id}")
        assert edge.source_type == "connector"
        assert edge.target_type == "dataset"

        # second object + one changed row: the incremental sync reads only the new object
        put(tenant.region, bucket, "crm/b.csv", "id,email,phone,amount,joined\n3,cy@example.com,+1 555 0102,30,2024-03-04\n")
        st, run2 = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        assert st == 202
        assert run2["mode"] == "INCREMENTAL"
        drain(tenant.region)
        st, run2 = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run2['id']}", tenant.token)
        assert run2["status"] == "SUCCEEDED", run2
        assert run2["rows_read"] == 1
        assert run2["rows_written"] == 1
        cols, rows = rows_of(tenant, ds.id)
        assert sorted(r[0] for r in rows) == [1, 2, 3]


def _connector(c, tenant: Tenant, config: dict, name: str = "Orders") -> dict:
    st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": name, "kind": "s3", "config": {"role_arn": READER_ROLE, **config}})
    assert st == 201, conn
    return conn


def _sync(c, tenant: Tenant, conn: dict, mode: str = "INCREMENTAL") -> dict:
    st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": mode})
    assert st == 202, run
    drain(tenant.region)
    st, run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)
    assert st == 200
    return run


def test_incremental_reads_only_changed_objects_and_drops_deleted_ones(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    for i in range(5):
        put(tenant.region, bucket, f"o/{i}.csv", "sku,qty\n" + "".join(f"s{i}-{j},{j}\n" for j in range(10)))
    with client() as c:
        conn = _connector(c, tenant, {"bucket": bucket, "prefix": "o/"})
        run = _sync(c, tenant, conn)
        assert (run["status"], run["rows_read"], run["rows_written"]) == ("SUCCEEDED", 50, 50)
        # nothing changed: nothing read
        run = _sync(c, tenant, conn)
        assert (run["status"], run["rows_read"], run["rows_written"]) == ("SUCCEEDED", 0, 0)
        # one object rewritten with one changed row and one row fewer; another deleted
        put(tenant.region, bucket, "o/1.csv", "sku,qty\n" + "".join(f"s1-{j},{j if j else 99}\n" for j in range(9)))

        source_client("s3", tenant.region).delete_object(Bucket=bucket, Key="o/4.csv")
        run = _sync(c, tenant, conn)
        assert run["rows_read"] == 9, run
        assert run["rows_written"] == 1, run
        assert run["rows_deleted"] == 11, run
        cols, rows = rows_of(tenant, conn["dataset"]["id"])
        assert len(rows) == 39
        assert len({r[0] for r in rows}) == 39
        assert ("s1-0", 99) in rows
        assert not any(r[0].startswith("s4-") for r in rows)
        assert dataset(tenant, conn["dataset"]["id"]).row_count == 39
        # a full refresh reads everything again and ends with the same rows
        run = _sync(c, tenant, conn, "FULL_REFRESH")
        assert run["rows_read"] == 39
        assert run["rows_written"] == 0
        assert sorted(rows_of(tenant, conn["dataset"]["id"])[1]) == sorted(rows)


def test_schema_drift_widens_types_and_keeps_every_value(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "d/1.csv", "id,amount\n1,10\n2,20\n")
    with client() as c:
        conn = _connector(c, tenant, {"bucket": bucket, "prefix": "d/", "primary_key": ["id"]})
        run = _sync(c, tenant, conn)
        assert run["status"] == "SUCCEEDED"
        ds = dataset(tenant, conn["dataset"]["id"])
        assert {f["name"]: f["type"] for f in json.loads(ds.schema)} == {"id": "INTEGER", "amount": "INTEGER"}
        assert ds.schema_version == 1
        # an admin's field policy (read side) must survive later syncs, even when the type widens
        edited = json.loads(ds.schema)
        edited[1].update(policy="REDACT", description="set by an admin")
        ds.update(actions=[models.DatasetAttrs.schema.set(json.dumps(edited))])
        # JSON Lines object: a new column, a nested value and a non-numeric amount
        put(tenant.region, bucket, "d/2.jsonl",
            '{"id": 3, "amount": "n/a", "tags": ["x", "y"], "Seen At": "2024-05-01T10:00:00Z"}\n'
            '{"id": 4, "amount": 12.5, "tags": null, "Seen At": null}\n')
        run = _sync(c, tenant, conn)
        assert run["status"] == "SUCCEEDED", run
        assert run["rows_read"] == 2
        drift = run["schema_drift"]
        assert drift["version"] == 2
        assert {a["name"] for a in drift["added"]} == {"tags", "seen_at"}
        assert drift["changed"] == [{"name": "amount", "from": "INTEGER", "to": "STRING"}]
        ds = dataset(tenant, conn["dataset"]["id"])
        types = {f["name"]: f["type"] for f in json.loads(ds.schema)}
        assert types == {"id": "INTEGER", "amount": "STRING", "tags": "JSON", "seen_at": "TIMESTAMP"}
        assert ds.schema_version == 2
        assert json.loads(ds.schema_drift)[0]["changed"][0]["to"] == "STRING"
        amount = [f for f in json.loads(ds.schema) if f["name"] == "amount"][0]
        assert (amount["policy"], amount["description"], amount["type"]) == ("REDACT", "set by an admin", "STRING")
        cols, rows = rows_of(tenant, ds.id)
        by_id = {r[0]: dict(zip(cols, r, strict=True)) for r in rows}
        assert by_id[1]["amount"] == "10"
        assert by_id[2]["amount"] == "20"  # old values kept, as text
        assert by_id[3]["amount"] == "n/a"
        assert by_id[4]["amount"] == "12.5"
        assert json.loads(by_id[3]["tags"]) == ["x", "y"]
        assert by_id[1]["tags"] is None
        assert str(by_id[3]["seen_at"]) == "2024-05-01 10:00:00"


def test_parquet_objects_sync(tenant: Tenant, tmp_path) -> None:
    import duckdb

    path = tmp_path / "p.parquet"
    duckdb.sql(f"COPY (SELECT i AS id, 'n' || i AS label, i * 1.5 AS score, DATE '2024-01-01' + CAST(i AS INTEGER) AS day "
               f"FROM range(1, 6) t(i)) TO '{path}' (FORMAT PARQUET)")
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "pq/p.parquet", path.read_bytes())
    with client() as c:
        conn = _connector(c, tenant, {"bucket": bucket, "prefix": "pq/", "format": "parquet",
                                      "primary_key": ["id"]})
        run = _sync(c, tenant, conn)
        assert run["status"] == "SUCCEEDED", run
        assert run["rows_read"] == 5, run
        ds = dataset(tenant, conn["dataset"]["id"])
        assert {f["name"]: f["type"] for f in json.loads(ds.schema)} == {
            "id": "INTEGER", "label": "STRING", "score": "FLOAT", "day": "DATE"}
        assert len(rows_of(tenant, ds.id)[1]) == 5


def test_crashed_worker_is_redelivered_without_loss_or_duplicates(tenant: Tenant, monkeypatch) -> None:
    from chalicelib.core import aws
    from chalicelib.gateway.snapshots import base, transfer

    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "c/1.csv", "id,v\n" + "".join(f"{i},{i}\n" for i in range(1, 7)))
    with client() as c:
        conn = _connector(c, tenant, {"bucket": bucket, "prefix": "c/", "primary_key": ["id"]})
        assert _sync(c, tenant, conn)["status"] == "SUCCEEDED"
        before = dataset(tenant, conn["dataset"]["id"])
        put(tenant.region, bucket, "c/2.csv", "id,v\n3,333\n" + "".join(f"{i},{i}\n" for i in range(7, 11)))
        monkeypatch.setattr(base, "PART_ROWS", 3)
        calls: list[str] = []

        def crash_once(key: str) -> None:
            calls.append(key)
            if len(calls) == 2:  # after two of the attempt's files (layer, manifest) are uploaded
                raise RuntimeError("worker killed")

        monkeypatch.setattr(transfer, "part_written", crash_once)
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        results = drain(tenant.region)
        assert results[0]["batchItemFailures"]
        assert not results[1]["batchItemFailures"]
        st, run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)
        assert run["status"] == "SUCCEEDED", run
        assert run["attempts"] == 2, run
        assert run["rows_read"] == 5
        assert run["rows_written"] == 5
        ds = dataset(tenant, conn["dataset"]["id"])
        assert ds.data_prefix.endswith("-a2")
        assert ds.data_prefix != before.data_prefix
        cols, rows = rows_of(tenant, ds.id)
        assert sorted(rows) == sorted([(i, 333 if i == 3 else i) for i in range(1, 11)])
        assert ds.row_count == 10
        # the crashed attempt's parts were never visible and are gone; the previous snapshot is kept
        keys = [o["Key"] for o in aws.client("s3", tenant.region).list_objects_v2(
            Bucket=aws.bucket_name("data", tenant.region), Prefix=f"datasets/{tenant.workspace_id}/").get("Contents", [])]
        assert not any("-a1/" in k and run["id"] in k for k in keys)
        assert any(k.startswith(before.data_prefix + "/") for k in keys)


def test_a_field_policy_set_during_the_commit_is_merged_not_lost(tenant: Tenant, monkeypatch) -> None:
    from chalicelib.gateway.ingest import sync_worker

    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "p/1.csv", "id,email\n1,a@example.com\n")
    with client() as c:
        conn = _connector(c, tenant, {"bucket": bucket, "prefix": "p/", "primary_key": ["id"]})
        assert _sync(c, tenant, conn)["status"] == "SUCCEEDED"
        put(tenant.region, bucket, "p/2.csv", "id,email\n2,b@example.com\n")
        real_merge = sync_worker._merge_schema
        calls = []

        def merge_while_admin_edits(current, planned):
            calls.append(1)
            if len(calls) == 1:  # the admin's setFieldPolicy lands between our read and our commit
                ds = dataset(tenant, conn["dataset"]["id"])
                edited = [dict(f, policy="HASH") if f["name"] == "email" else f for f in json.loads(ds.schema)]
                ds.update(actions=[models.DatasetAttrs.schema.set(json.dumps(edited))])
            return real_merge(current, planned)

        monkeypatch.setattr(sync_worker, "_merge_schema", merge_while_admin_edits)
        run = _sync(c, tenant, conn)
        assert run["status"] == "SUCCEEDED", (run, calls)
        assert len(calls) == 2, (run, calls)
        ds = dataset(tenant, conn["dataset"]["id"])
        assert {f["name"]: f["policy"] for f in json.loads(ds.schema)}["email"] == "HASH"
        assert ds.row_count == 2


def test_an_unparseable_object_fails_the_sync_by_name_and_keeps_the_snapshot(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "j/1.jsonl", '{"id": 1}\n')
    with client() as c:
        conn = _connector(c, tenant, {"bucket": bucket, "prefix": "j/"})
        assert _sync(c, tenant, conn)["status"] == "SUCCEEDED"
        before = dataset(tenant, conn["dataset"]["id"]).data_prefix
        put(tenant.region, bucket, "j/2.jsonl", '{"id": 2}\n{"id": \n')
        run = _sync(c, tenant, conn)
        assert run["status"] == "FAILED", run
        assert "j/2.jsonl line 2" in run["error"], run
        ds = dataset(tenant, conn["dataset"]["id"])
        assert ds.data_prefix == before
        assert ds.row_count == 1
        assert call(c, "GET", f"/v1/connectors/{conn['id']}", tenant.token)[1]["status"] == "FAILING"
