"""The per-container cache of policy-projected tables: the next query after any change sees the new state,
a cached table never serves a caller who may see something else, and only the columns a query reads are
loaded (counted through ``query._columns_loaded``, not timed)."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.core import clock
from chalicelib.core.tenancy import memberships
from chalicelib.gateway import models
from chalicelib.gateway.catalog import fieldpolicy
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.query import cache as query_cache
from chalicelib.gateway.query import columns as query_columns
from chalicelib.gateway.query import service as query_mod
from tests.functional.conftest import Tenant
from tests.functional.gateway.data import (
    CUSTOMER_FIELDS,
    CUSTOMERS,
    World,
    build_world,
    field,
    post,
    put_dataset,
    query,
    token_for,
    write_parquet,
)


@pytest.fixture
def world(tenant: Tenant) -> Iterator[World]:
    query_cache.clear()
    yield from build_world(tenant)
    query_cache.clear()


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    seen: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(query_mod, "_columns_loaded", lambda ds, cols: seen.append((ds, sorted(cols))))
    return seen


def _rows(world: World, sql: str, token: str | None = None) -> list[list[object]]:
    status, body = query(world, sql, token)
    assert status == 200, body
    return body["rows"]


def _set_policy(world: World, dataset_id: str, name: str, policy: str) -> None:
    status, body = post(world, f"/v1/catalog/datasets/{dataset_id}/fields/{name}/policy", world.tenant.token,
                        {"policy": policy}, method="PUT")
    assert status == 200, body


def _update(world: World, dataset_id: str, **attrs: object) -> None:
    """Write dataset attributes the way the sync commit and the ACL editor do, then drop the catalog copy."""
    cls = models.datasets(world.tenant.region)
    item = cls.get(world.tenant.workspace_id, dataset_id)
    item.update(actions=[getattr(cls, k).set(v) for k, v in attrs.items()] + [cls.updated_at.set(clock.iso())])
    catalog.invalidate(world.tenant.workspace_id)


# --- only what the SQL reads is loaded ---------------------------------------------------------------

def test_only_the_columns_the_sql_reads_are_loaded_and_a_repeat_loads_nothing(
        world: World, loads: list[tuple[str, list[str]]]) -> None:
    sql = "SELECT country, count(*) AS n FROM customers GROUP BY 1 ORDER BY 1"
    assert _rows(world, sql) == [["DE", 1], ["US", 2]]
    assert loads == [(world.customers, ["country"])]  # name (HASH), email (MASK), phone, id: never read
    assert _rows(world, sql) == [["DE", 1], ["US", 2]]
    assert len(loads) == 1  # served by the cached table
    # a filter column counts as read; the new table holds the union, and the old query still hits it
    assert _rows(world, "SELECT email FROM customers WHERE id = 2") == [["*******p.io"]]
    assert loads[1] == (world.customers, ["country", "email", "id"])
    _rows(world, sql)
    assert len(loads) == 2


def test_a_join_loads_the_join_keys_and_the_read_columns_of_each_side(
        world: World, loads: list[tuple[str, list[str]]]) -> None:
    rows = _rows(world, "SELECT c.country, sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id "
                        "GROUP BY 1 ORDER BY 1")
    assert rows == [["DE", 20.0], ["US", 10.5]]
    assert sorted(loads) == sorted([(world.customers, ["country", "id"]), (world.orders, ["amount", "customer_id"])])


def test_star_count_and_unscanned_names(world: World, loads: list[tuple[str, list[str]]]) -> None:
    assert _rows(world, "SELECT count(*) FROM customers") == [[3]]
    assert len(loads) == 1
    assert len(loads[0][1]) == 1  # one column, for the row count
    cols = query(world, "SELECT * FROM customers ORDER BY id")[1]["columns"]
    assert [c["name"] for c in cols] == ["id", "email", "name", "phone", "country"]  # DENY ssn never exists
    assert loads[-1] == (world.customers, ["country", "email", "id", "name", "phone"])
    # "orders" named only as a string and a column alias: no dataset is loaded for it
    before = len(loads)
    assert _rows(world, "SELECT 'orders' AS orders") == [["orders"]]
    assert len(loads) == before


def test_a_statement_the_stand_ins_cannot_bind_still_runs_on_the_real_tables(world: World) -> None:
    assert _rows(world, "SELECT id FROM customers WHERE id = 1") == [[1]]
    status, body = query(world, "SELECT nosuch FROM customers")
    assert status == 400
    assert body["code"] == "sql_error"
    assert "nosuch" in body["detail"]


# --- a container's first query binds on the sandbox it creates -----------------------------------------

def test_a_first_query_binds_on_its_new_sandbox_and_needs_no_binder_database(
        world: World, loads: list[tuple[str, list[str]]], monkeypatch: pytest.MonkeyPatch) -> None:
    query_columns._close()  # a new container: no binder, nothing memoised, no sandbox
    made: list[tuple[Any, str]] = []
    real = query_mod._connect
    monkeypatch.setattr(query_mod, "_connect", lambda: made.append(real()) or made[-1])
    sql = "SELECT country, count(*) AS n FROM customers GROUP BY 1 ORDER BY 1"
    assert _rows(world, sql) == [["DE", 1], ["US", 2]]
    assert query_columns._con is None  # the columns were bound on the new sandbox
    assert loads == [(world.customers, ["country"])]  # and still pruned
    assert len(made) == 1
    con, work = made[0]
    assert not os.path.exists(os.path.join(work, "data"))  # its one readable directory is gone
    for stmt in (f"SELECT * FROM read_parquet('{work}/data/x.parquet')", "SELECT * FROM read_csv('/etc/passwd')",
                 "SET enable_external_access = true", "SET disabled_optimizers = ''"):
        with pytest.raises(Exception):  # noqa: B017, PT011 - DuckDB's error class varies by case
            con.execute(stmt)
    # with the sandbox cached, a new SQL text is bound by the process-wide binder as before
    assert _rows(world, "SELECT email FROM customers WHERE id = 2") == [["*******p.io"]]
    assert query_columns._con is not None
    assert len(made) == 2  # the rebuild with the union of columns


def test_binding_on_a_new_sandbox_reaches_no_file(world: World) -> None:
    con, work = query_mod._connect()
    try:
        tables = {"customers": [("id", "BIGINT")]}
        query_columns._close()
        for sql in ("SELECT * FROM customers, read_csv('/etc/passwd')",
                    f"SELECT * FROM customers, read_parquet('{work}/data/*.parquet')",
                    f"SELECT * FROM customers, read_csv('{work}/data/../../../etc/passwd')"):
            assert query_columns.columns_read(sql, tables, con) is None, sql  # refused: load every column
        assert query_columns.columns_read("SELECT id FROM customers", tables, con) == {"customers": frozenset({"id"})}
        assert con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0] == ""  # restored
        assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] == 0  # no stand-in is left
    finally:
        con.close()
        query_columns._close()


def test_an_unused_new_sandbox_is_closed(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "SELECT country FROM customers WHERE id = 1"
    first = _rows(world, sql)
    query_columns._close()
    # as if another query built and cached the sandbox between this one's look and its acquire
    monkeypatch.setattr(query_cache, "holds", lambda key: False)
    made: list[tuple[Any, str]] = []
    real = query_mod._connect
    monkeypatch.setattr(query_mod, "_connect", lambda: made.append(real()) or made[-1])
    assert _rows(world, sql) == first
    assert len(made) == 1  # bound on, then not needed: the cached sandbox covered the query
    spare_con, spare_work = made[0]
    assert not os.path.exists(spare_work)
    with pytest.raises(Exception):  # noqa: B017, PT011 - closed
        spare_con.execute("SELECT 1")


# --- the next query sees the new state ---------------------------------------------------------------

def test_after_a_sync_the_next_query_sees_the_new_snapshot(world: World) -> None:
    assert _rows(world, "SELECT id, country FROM customers ORDER BY id") == [[1, "US"], [2, "DE"], [3, "US"]]
    prefix = f"{world.tenant.workspace_id}/datasets/{world.customers}/sync2"
    write_parquet(world.tenant.region, f"{prefix}/part-0000.parquet", CUSTOMER_FIELDS,
                  [(1, "alice@example.com", None, "Alice", None, "FR"), (4, "dan@example.com", None, "Dan", None, "BR")])
    _update(world, world.customers, data_prefix=prefix)
    assert _rows(world, "SELECT id, country FROM customers ORDER BY id") == [[1, "FR"], [4, "BR"]]


def test_after_a_field_policy_change_no_stale_mask_and_no_stale_clear_value(world: World) -> None:
    sql = "SELECT email FROM customers WHERE id = 1"
    assert _rows(world, sql) == [["*************.com"]]
    _set_policy(world, world.customers, "email", "ALLOW")
    assert _rows(world, sql) == [["alice@example.com"]]  # no stale mask
    _set_policy(world, world.customers, "email", "HASH")
    key = fieldpolicy.workspace_hash_key(world.tenant.region, world.tenant.workspace_id)
    assert _rows(world, sql) == [[fieldpolicy.hash_text(key, "alice@example.com")]]  # no stale clear value
    _set_policy(world, world.customers, "email", "DENY")
    status, body = query(world, sql)
    assert status == 400
    assert "alice" not in json.dumps(body)
    assert "email" not in [c["name"] for c in query(world, "SELECT * FROM customers")[1]["columns"]]


def test_after_an_acl_change_the_cached_table_is_out_of_reach(world: World) -> None:
    sql = "SELECT count(*) FROM orders"
    assert _rows(world, sql) == [[3]]
    _update(world, world.orders, acl=json.dumps([{"type": "role", "id": "admin"}]))
    status, body = query(world, sql)
    assert status == 400
    assert body["code"] == "sql_error"
    assert "rows" not in body
    _update(world, world.orders, acl=json.dumps([{"type": "role", "id": "member"}]))
    assert _rows(world, sql) == [[3]]


def test_after_a_role_change_the_next_query_acts_with_the_new_role(world: World) -> None:
    ws, region = world.tenant.workspace_id, world.tenant.region
    members = memberships(region)
    row = members.get(ws, world.member.user_id)
    status, body = query(world, "SELECT employee FROM payroll")  # payroll: Admin-only ACL
    assert status == 400
    assert "alice" not in json.dumps(body)
    row.update(actions=[members.role.set("admin")])
    assert _rows(world, "SELECT employee FROM payroll") == [["alice"]]  # now cached for this key
    row.update(actions=[members.role.set("member")])
    status, body = query(world, "SELECT employee FROM payroll")
    assert status == 400
    assert "alice" not in json.dumps(body)
    row.update(actions=[members.role.set("viewer")])  # no knowledge.read at all
    assert query(world, "SELECT count(*) FROM customers")[0] == 403


# --- a cached table never serves another caller -------------------------------------------------------

def test_a_user_granted_table_never_reaches_a_caller_without_the_grant(world: World) -> None:
    ws, region = world.tenant.workspace_id, world.tenant.region
    granted = token_for(ws, "member")
    put_dataset(ws, region, "bonus", [field("who"), field("amount", "FLOAT")], [("bob", 5.0)],
                acl=[{"type": "user", "id": granted.user_id}])
    assert _rows(world, "SELECT who, amount FROM bonus", granted.token) == [["bob", 5.0]]
    status, body = query(world, "SELECT who, amount FROM bonus")  # another member, same SQL, same container
    assert status == 400
    assert "bob" not in json.dumps(body)
    # the other member's sandboxes hold only what that member named and may read
    listed = _rows(world, "SELECT table_name FROM information_schema.tables WHERE 'bonus' <> '' "
                          "UNION ALL SELECT 'n=' || count(*) FROM customers ORDER BY 1")
    assert listed == [["customers"], ["n=3"]]


def test_callers_whose_visible_fields_differ_never_share_a_table(
        world: World, loads: list[tuple[str, list[str]]]) -> None:
    ws, region = world.tenant.workspace_id, world.tenant.region
    extra = [f for f in CUSTOMER_FIELDS if f["name"] != "ssn"] + [field("ssn", "STRING", "PII", "ALLOW")]
    put_dataset(ws, region, "people", extra, [(r[0], r[1], r[3], r[4], r[5], r[2]) for r in CUSTOMERS])
    _set_policy(world, catalog.snapshot(region, ws).by_name["people"].id, "ssn", "DENY")
    sql = "SELECT * FROM people ORDER BY id"
    member_cols = [c["name"] for c in query(world, sql)[1]["columns"]]
    admin = query(world, sql, world.tenant.token)[1]
    assert "ssn" not in member_cols
    assert "ssn" not in [c["name"] for c in admin["columns"]]
    assert len(loads) == 2  # the admin sees the DENY field in the schema: another key, another table
    _set_policy(world, catalog.snapshot(region, ws).by_name["people"].id, "ssn", "ALLOW")
    admin = query(world, sql, world.tenant.token)[1]
    assert [r[-1] for r in admin["rows"]] == ["111-22-3333", "222-33-4444", None]


def test_after_a_real_sync_full_then_incremental_the_next_query_sees_the_merged_rows(tenant: Tenant) -> None:
    from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, drain, new_bucket, put

    query_cache.clear()
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "crm/a.csv", "id,email,amount\n1,ann@example.com,10\n2,bob@example.com,20\n")
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "crm people", "kind": "s3", "dataset_name": "people",
            "config": {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "crm/", "primary_key": ["id"]}})
        assert st == 201, conn

        def sync_and_query() -> list[list[object]]:
            st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
            assert st == 202, run
            drain(tenant.region)
            st, body = call(c, "POST", "/v1/query", tenant.token, {"sql": "SELECT id, amount FROM people ORDER BY id"})
            assert st == 200, body
            return body["rows"]

        assert sync_and_query() == [[1, 10], [2, 20]]
        put(tenant.region, bucket, "crm/b.csv", "id,email,amount\n2,bob@example.com,25\n3,cy@example.com,30\n")
        assert sync_and_query() == [[1, 10], [2, 25], [3, 30]]  # not the cached first snapshot
    query_cache.clear()
