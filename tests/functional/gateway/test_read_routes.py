"""Gateway read side over REST: catalog, schema, field policies, lineage, federated query, policies,
roles and residency. The caller's ACL and the field policies are tried from every angle."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import audit, aws, clock
from chalicelib.core.tenancy import scope_of
from chalicelib.gateway.catalog import fieldpolicy, lineage
from chalicelib.groups import create_app
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.functional.gateway.data import World, build_world, field, get, post, put_dataset, query
from tests.functional.gateway.sync_helpers import drain

# --- catalog ---------------------------------------------------------------------------------------

def test_search_lists_and_counts_only_readable_datasets(world: World) -> None:
    status, body = get(world, "/v1/catalog/datasets", world.member.token)
    assert status == 200, body
    assert [d["name"] for d in body["items"]] == ["customers", "orders"]
    assert body["total_count"] == 2
    assert body["has_more"] is False
    for term in ("payroll", "salary", "secret"):
        assert get(world, f"/v1/catalog/datasets?q={term}", world.member.token)[1]["total_count"] == 0
    status, admin = get(world, "/v1/catalog/datasets", world.tenant.token)
    assert admin["total_count"] == 3
    cust = body["items"][0]
    assert cust["source"]["id"] == world.connector
    assert cust["source"]["category"] == "STORAGE"
    assert cust["classification"] == "PII"
    assert cust["freshness"].startswith("PT1M")
    assert "ssn" not in [f["name"] for f in cust["schema"]]


@pytest.fixture
def world(tenant: Tenant) -> Iterator[World]:
    yield from build_world(tenant)


def test_search_filters_and_cursor_paging(world: World) -> None:
    tok = world.member.token
    assert [d["name"] for d in get(world, "/v1/catalog/datasets?q=e-mail", tok)[1]["items"]] == []  # descriptions of fields are not indexed
    assert [d["name"] for d in get(world, "/v1/catalog/datasets?q=crm%20customers", tok)[1]["items"]] == ["customers"]
    assert [d["name"] for d in get(world, "/v1/catalog/datasets?q=amount", tok)[1]["items"]] == ["orders"]
    assert get(world, "/v1/catalog/datasets?q=ssn", tok)[1]["total_count"] == 0  # a DENY field is not searchable
    assert [d["name"] for d in get(world, "/v1/catalog/datasets?owner=CRM-team@example.com", tok)[1]["items"]] == ["customers"]
    assert [d["name"] for d in get(world, "/v1/catalog/datasets?classification=CONFIDENTIAL", tok)[1]["items"]] == ["orders"]
    assert [d["name"] for d in get(world, "/v1/catalog/datasets?field_classification=PUBLIC", tok)[1]["items"]] == ["customers"]
    assert [d["name"] for d in get(world, "/v1/catalog/datasets?fresher_than=PT1H", tok)[1]["items"]] == ["customers"]
    assert get(world, f"/v1/catalog/datasets?connector={world.connector}", tok)[1]["total_count"] == 2
    status, page1 = get(world, "/v1/catalog/datasets?limit=1", tok)
    assert page1["has_more"] is True
    assert page1["total_count"] == 2
    assert len(page1["items"]) == 1
    status, page2 = get(world, f"/v1/catalog/datasets?limit=1&after={page1['next_cursor']}", tok)
    assert [d["name"] for d in page2["items"]] == ["orders"]
    assert page2["has_more"] is False
    assert page2["next_cursor"] is None
    for bad in ("limit=0", "limit=101", "after=garbage!", "fresher_than=1h", "classification=SECRET", "nope=1"):
        status, problem = get(world, f"/v1/catalog/datasets?{bad}", tok)
        assert status == 400, bad
        assert problem["code"] == "validation_failed", bad


def test_schema_hides_deny_fields_from_non_admins_and_unreadable_datasets(world: World) -> None:
    status, body = get(world, f"/v1/catalog/datasets/{world.customers}/schema", world.member.token)
    assert status == 200
    by_name = {f["name"]: f for f in body["fields"]}
    assert set(by_name) == {"id", "email", "name", "phone", "country"}
    assert by_name["email"] == {"name": "email", "type": "STRING", "nullable": True, "classification": "PII",
                                "policy": "MASK", "description": "contact e-mail"}
    status, admin = get(world, f"/v1/catalog/datasets/{world.customers}/schema", world.tenant.token)
    assert {f["name"]: f["policy"] for f in admin["fields"]}["ssn"] == "DENY"
    assert get(world, f"/v1/catalog/datasets/{world.payroll}/schema", world.member.token)[0] == 404
    other = make_tenant("other@example.com", name="Other")
    foreign = put_dataset(other.workspace_id, other.region, "foreign", [field("x")], [("y",)])
    for tok in (world.member.token, world.tenant.token):
        assert get(world, f"/v1/catalog/datasets/{foreign}/schema", tok)[0] == 404
        assert get(world, f"/v1/lineage/{foreign}", tok)[0] == 404


def test_roles_viewer_cannot_search_or_query_member_cannot_set_policies(world: World) -> None:
    assert get(world, "/v1/catalog/datasets", world.viewer.token)[0] == 403
    assert query(world, "SELECT 1", world.viewer.token)[0] == 403
    assert get(world, "/v1/policies", world.viewer.token)[0] == 403
    status, problem = post(world, f"/v1/catalog/datasets/{world.customers}/fields/email/policy", world.member.token,
                           {"policy": "ALLOW"}, "PUT")
    assert status == 403
    assert problem["code"] == "forbidden"
    assert query(world, "SELECT email FROM customers WHERE id = 1")[1]["rows"] == [["*************.com"]]
    assert get(world, "/v1/catalog/datasets", "not-a-token")[0] == 401


# --- field policies --------------------------------------------------------------------------------

def test_query_applies_every_policy_before_the_callers_sql(world: World) -> None:
    status, body = query(world, "SELECT * FROM customers ORDER BY id")
    assert status == 200, body
    assert [c["name"] for c in body["columns"]] == ["id", "email", "name", "phone", "country"]  # no ssn, no _synced_at
    key = fieldpolicy.workspace_hash_key(world.tenant.region, world.tenant.workspace_id)
    assert body["rows"][0] == [1, "*************.com", fieldpolicy.hash_text(key, "Alice"), None, "US"]
    assert body["rows"][2] == [3, "***x.co", None, None, "US"]
    assert [(d["id"], d["name"], d["freshness"][:4]) for d in body["datasets"]] == [(world.customers, "customers", "PT1M")]
    assert body["datasets"][0]["last_synced_at"].endswith("Z")
    assert body["row_count"] == 3
    assert body["truncated"] is False
    assert body["query_id"].startswith("q_")
    # functions and WHERE clauses only ever see the masked value
    for sql in ("SELECT id FROM customers WHERE email LIKE 'a%'",
                "SELECT id FROM customers WHERE email = 'alice@example.com'",
                "SELECT id FROM customers WHERE contains(email, 'alice')",
                "SELECT id FROM customers WHERE name = 'Alice' OR phone IS NOT NULL",
                "SELECT id FROM customers WHERE substr(email, 1, 1) <> '*'"):
        assert query(world, sql)[1]["rows"] == [], sql
    assert query(world, "SELECT upper(email), left(email, 3) FROM customers WHERE id = 2")[1]["rows"] == [
        ["*******P.IO", "***"]]
    # a DENY column does not exist
    for sql in ("SELECT ssn FROM customers", "SELECT count(ssn) FROM customers",
                "SELECT * FROM customers WHERE ssn IS NOT NULL", "SELECT _synced_at FROM customers"):
        status, problem = query(world, sql)
        assert status == 400, sql
        assert problem["code"] == "sql_error", sql
    # hashing is stable per workspace: equal values join
    joined = query(world, "SELECT count(*) FROM customers a JOIN customers b ON a.name = b.name")[1]
    assert joined["rows"] == [[2]]


def test_admin_sets_field_policy_audited_and_applied_to_next_query(world: World) -> None:
    path = f"/v1/catalog/datasets/{world.customers}/fields/email/policy"
    status, body = post(world, path, world.tenant.token, {"policy": "ALLOW"}, "PUT")
    assert status == 200
    assert body["policy"] == "ALLOW"
    assert body["name"] == "email"
    assert query(world, "SELECT email FROM customers WHERE id = 1")[1]["rows"] == [["alice@example.com"]]
    events = [e for e in audit.iter_chain(world.tenant.region, world.tenant.workspace_id)
              if e["action"] == "dataset.field_policy_set"]
    assert events[-1]["target"] == {"type": "dataset", "id": world.customers, "field": "email"}
    assert events[-1]["details"] == {"from": "MASK", "to": "ALLOW"}
    assert events[-1]["actor"]["id"] == world.tenant.user_id
    post(world, path, world.tenant.token, {"policy": "DENY"}, "PUT")
    assert query(world, "SELECT email FROM customers")[0] == 400
    for bad in ({"policy": "SHOW"}, {"policy": "MASK", "x": 1}, {}):
        assert post(world, path, world.tenant.token, bad, "PUT")[0] == 400
    assert post(world, f"/v1/catalog/datasets/{world.customers}/fields/nope/policy", world.tenant.token,
                {"policy": "MASK"}, "PUT")[0] == 404


# --- federated query: ACL, lock-down, bad SQL ------------------------------------------------------

def test_unreadable_datasets_and_files_are_out_of_reach_of_queries(world: World) -> None:
    assert query(world, "SELECT count(*) FROM payroll", world.tenant.token)[1]["rows"] == [[1]]  # the admin may
    leaks = [
        "SELECT * FROM payroll",
        "SELECT * FROM customers JOIN payroll ON true",
        "SELECT * FROM customers WHERE id IN (SELECT salary FROM payroll)",
        "WITH p AS (SELECT * FROM main.payroll) SELECT * FROM p",
        "SELECT * FROM read_parquet('/tmp/*.parquet')",
        "SELECT * FROM read_parquet('/tmp/**/*.parquet')",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM glob('/tmp/*')",
    ]
    for sql in leaks:
        status, body = query(world, sql)
        assert status == 400, (sql, body)
        assert "100.0" not in json.dumps(body)
        assert "root:" not in json.dumps(body)
    for sql in ("SELECT table_name FROM information_schema.tables",
                "SELECT table_name FROM customers, information_schema.tables",
                "SELECT table_name FROM duckdb_tables()",
                "SELECT * FROM duckdb_tables() CROSS JOIN orders"):
        status, body = query(world, sql)
        assert status == 200, (sql, body)
        assert "payroll" not in json.dumps(body["rows"]), sql
    status, body = query(world, "SELECT table_name FROM information_schema.tables, orders")
    assert {r[0] for r in body["rows"]} == {"orders"}
    # nothing can loosen the lock: configuration statements are refused, settings cannot be changed
    for sql in ("SELECT set_config('enable_external_access', 'true')",):
        assert query(world, sql)[0] == 400


@pytest.mark.parametrize("sql,code", [
    ("CREATE TABLE x AS SELECT 1", "sql_not_allowed"),
    ("DROP TABLE customers", "sql_not_allowed"),
    ("INSERT INTO customers VALUES (1)", "sql_not_allowed"),
    ("COPY customers TO '/tmp/out.csv'", "sql_not_allowed"),
    ("ATTACH '/tmp/x.db' AS x", "sql_not_allowed"),
    ("INSTALL httpfs", "sql_not_allowed"),
    ("LOAD httpfs", "sql_not_allowed"),
    ("PRAGMA version", "sql_not_allowed"),
    ("SET enable_external_access = true", "sql_not_allowed"),
    ("EXPLAIN SELECT 1", "sql_not_allowed"),
    ("SELECT 1; SELECT 2", "sql_not_allowed"),
    ("SELECT 1; DROP TABLE customers", "sql_not_allowed"),
    ("SELEC 1", "sql_syntax_error"),
    ("", "validation_failed"),
])
def test_bad_sql_is_refused_with_a_clear_error(world: World, sql: str, code: str) -> None:
    status, body = query(world, sql)
    assert status == 400, body
    assert body["code"] == code, body
    assert body["detail"]


def test_query_row_limit_time_limit_and_body_validation(world: World) -> None:
    status, body = query(world, "SELECT * FROM range(5000)")
    assert status == 200
    assert body["row_count"] == 1000
    assert body["truncated"] is True
    status, body = query(world, "SELECT * FROM range(5000)", limit=10)
    assert body["row_count"] == 10
    assert body["truncated"] is True
    assert query(world, "SELECT 1", limit=10_001)[0] == 400
    assert query(world, "SELECT 1", extra_field=1)[0] == 400
    from chalicelib.gateway.query import service as q

    with pytest.raises(Exception) as err:
        q.run(scope_of(q_principal(world)), "SELECT count(*) FROM range(100000000000) a", time_limit=0.2)
    assert getattr(err.value, "code", "") == "query_timeout"


def q_principal(world: World) -> Any:
    from chalicelib.core.tokens import verifier

    return verifier().principal(world.member.token)


# --- lineage ---------------------------------------------------------------------------------------

@pytest.fixture
def one_day() -> Iterator[None]:
    """The clock stopped for the test: its queries and its reading of "today" (query nodes are per day) fall
    on the same day, even when the test runs across midnight UTC."""
    with clock.frozen():
        yield


def test_lineage_up_to_the_answer_without_unreadable_nodes(world: World, one_day: None) -> None:
    ws = world.tenant.workspace_id
    lineage.record_edges(world.tenant.region, ws, [("dataset", world.customers, "dataset", world.payroll, {"target_name": "payroll"})])
    status, q = query(world, "SELECT c.country, sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY 1",
                      answer={"type": "CHAT_ANSWER", "id": "msg_answer1"})
    assert status == 200
    assert {d["name"] for d in q["datasets"]} == {"customers", "orders"}
    drain(world.tenant.region)  # the query's lineage message, written by the worker
    status, graph = get(world, f"/v1/lineage/{world.customers}", world.member.token)
    assert status == 200
    types = {n["id"]: n["type"] for n in graph["nodes"]}
    assert types[world.connector] == "CONNECTOR"
    assert types[world.customers] == "DATASET"
    # queries are aggregated: one node per day and set of datasets, counting its queries
    node = lineage.query_node([world.customers, world.orders], clock.utcnow().strftime("%Y-%m-%d"))
    assert types[node] == "QUERY"
    assert q["query_id"] not in types
    assert types["msg_answer1"] == "CHAT_ANSWER"
    assert world.payroll not in types
    assert world.payroll not in json.dumps(graph)
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert {(world.connector, world.customers), (world.customers, node), (node, "msg_answer1")} <= edges
    assert world.member.user_id not in json.dumps(graph)  # who queried is not in the aggregate
    assert graph["truncated"] is False
    status, admin = get(world, f"/v1/lineage/{world.customers}", world.tenant.token)
    assert world.payroll in {n["id"] for n in admin["nodes"]}
    status, short = get(world, f"/v1/lineage/{world.customers}?depth=1", world.member.token)
    assert short["truncated"] is True
    assert "msg_answer1" not in {n["id"] for n in short["nodes"]}
    assert get(world, f"/v1/lineage/{world.customers}?depth=11", world.member.token)[0] == 400
    assert get(world, f"/v1/lineage/{world.payroll}", world.member.token)[0] == 404


# --- policies --------------------------------------------------------------------------------------

def test_policies_show_only_what_the_caller_may_see(world: World) -> None:
    status, body = get(world, "/v1/policies", world.member.token)
    assert status == 200
    acl = {p["dataset_name"] for p in body["policies"] if p["scope"] == "ACL"}
    assert acl == {"customers", "orders"}
    pii = {(p["dataset_name"], p["field"]): p["policy"] for p in body["policies"] if p["scope"] == "PII"}
    assert pii == {("customers", "email"): "MASK", ("customers", "name"): "HASH", ("customers", "phone"): "REDACT"}
    res = [p for p in body["policies"] if p["scope"] == "RESIDENCY"]
    assert len(res) == 1
    assert res[0]["residency"] == "us-east"
    assert res[0]["region"] == "us-east-1"
    assert "payroll" not in json.dumps(body)
    assert "ssn" not in json.dumps(body)
    status, only = get(world, "/v1/policies?scope=PII", world.member.token)
    assert {p["scope"] for p in only["policies"]} == {"PII"}
    status, admin = get(world, "/v1/policies?scope=PII", world.tenant.token)
    assert ("customers", "ssn") in {(p["dataset_name"], p["field"]) for p in admin["policies"]}
    assert get(world, "/v1/policies?scope=NOPE", world.member.token)[0] == 400


# --- residency -------------------------------------------------------------------------------------

def test_eu_workspace_query_reads_only_eu_central_objects(stack: None) -> None:
    eu = make_tenant("eu@example.com", residency="eu-central", name="EU GmbH")
    assert eu.region == "eu-central-1"
    ds = put_dataset(eu.workspace_id, eu.region, "kunden", [field("email", "STRING", "PII", "MASK")],
                     [("hans@example.de",)])
    us_calls: list[str] = []
    us_s3 = aws.client("s3", "us-east-1")
    us_s3.meta.events.register("before-call.s3", lambda model, **_: us_calls.append(model.name))
    with Client(create_app("gateway")) as client:
        r = client.http.post("/v1/query", headers={**bearer(eu.token), "Content-Type": "application/json"},
                             body=json.dumps({"sql": "SELECT email FROM kunden"}))
        assert r.status_code == 200, r.body
        assert json.loads(r.body)["rows"] == [["***********e.de"]]
        r = client.http.get(f"/v1/catalog/datasets/{ds}/schema", headers=bearer(eu.token))
        assert r.status_code == 200
    assert us_calls == []
    drain(eu.region)  # the query's lineage message goes to the EU queue and is written there
    drain("us-east-1")
    us_bucket = us_s3.list_objects_v2(Bucket=aws.bucket_name("data", "us-east-1")).get("KeyCount", 0)
    eu_keys = [o["Key"] for o in aws.client("s3", "eu-central-1").list_objects_v2(
        Bucket=aws.bucket_name("data", "eu-central-1"))["Contents"]]
    assert us_bucket == 0
    assert all(k.startswith(eu.workspace_id) for k in eu_keys)
    from chalicelib.gateway import models

    assert list(models.lineage_edges("us-east-1").query(eu.workspace_id)) == []
    assert len(list(models.lineage_edges("eu-central-1").query(eu.workspace_id))) == 1


def test_empty_and_drifted_datasets_and_admins_under_policies(world: World) -> None:
    ws, region = world.tenant.workspace_id, world.tenant.region
    from chalicelib.gateway import models
    from chalicelib.gateway.catalog import service as catalog

    empty = put_dataset(ws, region, "empty_one", [field("id", "INTEGER"), field("email", "STRING", "PII", "MASK")], [])
    models.datasets(region)(ws, empty).update(actions=[models.DatasetAttrs.data_prefix.set(None)])
    catalog.invalidate(ws)
    status, body = query(world, "SELECT * FROM empty_one")
    assert status == 200
    assert body["rows"] == []
    assert (body["columns"] == [{"name": "id", "type": "INTEGER"},
                                                                         {"name": "email", "type": "STRING"}])
    # a field added to the schema after the Parquet parts were written loads as nulls
    item = models.datasets(region).get(ws, world.orders)
    schema = json.loads(item.schema) + [field("coupon", "STRING")]
    item.update(actions=[models.DatasetAttrs.schema.set(json.dumps(schema))])
    catalog.invalidate(ws)
    assert query(world, "SELECT count(*), count(coupon) FROM orders")[1]["rows"] == [[3, 0]]
    # Admins see DENY fields listed, but policies apply to their query results too
    assert query(world, "SELECT ssn FROM customers", world.tenant.token)[0] == 400
    assert query(world, "SELECT email FROM customers WHERE id = 1", world.tenant.token)[1]["rows"] == [["*************.com"]]


def test_query_lineage_does_not_grow_with_reads(world: World, one_day: None) -> None:
    """Many queries over the same datasets on one day are one node and one edge per dataset, counting
    them, with a TTL; a query over another set of datasets is another node."""
    from chalicelib.gateway import models as gw_models

    region, ws = world.tenant.region, world.tenant.workspace_id
    before = len(list(gw_models.lineage_edges(region).query(ws)))
    for _ in range(5):
        assert query(world, "SELECT count(*) FROM customers c JOIN orders o ON o.customer_id = c.id")[0] == 200
    assert query(world, "SELECT count(*) FROM customers")[0] == 200
    drain(region)
    edges = list(gw_models.lineage_edges(region).query(ws))
    assert len(edges) == before + 3  # customers+orders -> one node (2 edges), customers alone -> another (1)
    day = clock.utcnow().strftime("%Y-%m-%d")
    both = lineage.query_node([world.orders, world.customers], day)
    counted = {e.source_id: int(e.uses) for e in edges if e.target_id == both}
    assert counted == {world.customers: 5, world.orders: 5}
    for e in edges:
        if e.target_type == "query":
            assert e.expires_at >= clock.now() + (lineage.QUERY_LINEAGE_DAYS - 1) * 86400
