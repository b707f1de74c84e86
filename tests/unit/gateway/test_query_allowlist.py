"""The federated query's function allow-list covers DuckDB's whole catalog, and the statement check uses it."""
from __future__ import annotations

import shutil

import pytest

from chalicelib.core.http.errors import ApiError
from chalicelib.gateway.query import allowlist, statement
from chalicelib.gateway.query import service as query

_KINDS = {"scalar": allowlist.EXPRESSION, "aggregate": allowlist.EXPRESSION, "macro": allowlist.EXPRESSION,
          "window": allowlist.EXPRESSION, "table": allowlist.TABLE, "table_macro": allowlist.TABLE,
          "pragma": allowlist.TABLE}


@pytest.fixture(scope="module")
def sandbox_catalog() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(function type, name) of every function and (schema, name) of every built-in view of a query sandbox."""
    con, work = query._connect()
    try:
        functions = {(t, n) for t, n in con.execute(
            "SELECT DISTINCT function_type, function_name FROM duckdb_functions()").fetchall()}
        views = {(s, n) for s, n in con.execute(
            "SELECT schema_name, view_name FROM duckdb_views() WHERE internal").fetchall()}
    finally:
        con.close()
        shutil.rmtree(work, ignore_errors=True)
    return functions, views


def test_every_function_of_duckdb_is_classified_once(sandbox_catalog) -> None:
    functions, _ = sandbox_catalog
    assert len(functions) > 1000
    unknown_types = {t for t, _ in functions} - set(_KINDS)
    assert not unknown_types, f"a new kind of DuckDB function: classify it in _KINDS and allowlist.py: {unknown_types}"
    unclassified = sorted(f"{_KINDS[t]} {n}" for t, n in functions
                          if not allowlist.listed("allowed", _KINDS[t], n) and not allowlist.listed("refused", _KINDS[t], n))
    assert not unclassified, f"functions nobody classified (add each to a group of allowlist.py): {unclassified}"
    both = sorted(f"{_KINDS[t]} {n}" for t, n in functions
                  if allowlist.listed("allowed", _KINDS[t], n) and allowlist.listed("refused", _KINDS[t], n))
    assert not both, f"functions both allowed and refused: {both}"


def test_allowed_names_exist_in_the_catalog(sandbox_catalog) -> None:
    """An allowed word names a function of its kind (or is one of the few the binder handles itself)."""
    functions, _ = sandbox_catalog
    by_kind = {(_KINDS[t], allowlist.key(n)) for t, n in functions}
    syntax = {"unnest", "unlist"}
    stale = [(kind, word) for kind, groups in allowlist.ALLOWED.items() for names in groups.values()
             for word in names.split()
             if not allowlist.is_pattern(word) and (kind, word) not in by_kind and word not in syntax]
    assert not stale


def test_the_refused_views_are_the_engines_views(sandbox_catalog) -> None:
    _, views = sandbox_catalog
    reachable = {n for s, n in views if s in ("main", "pg_catalog")}
    assert reachable == allowlist.REFUSED_VIEWS | allowlist.OWN_TABLE_VIEWS
    assert not allowlist.REFUSED_VIEWS & allowlist.OWN_TABLE_VIEWS
    assert {s for s, _ in views} - {"main", "information_schema"} <= allowlist.REFUSED_SCOPES


@pytest.mark.parametrize("sql", [
    "SELECT * FROM query('SELECT name, value FROM duck' || 'db_settings()')",
    "SELECT * FROM query_table('customers')",
    "SELECT current_setting('temp_directory')",
    "SELECT x.current_setting() FROM (SELECT 'home_directory' AS x)",
    "SELECT * FROM pragma_database_list",
    "SELECT * FROM duckdb_databases()",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM pg_settings",
    "SELECT * FROM system.main.duckdb_tables",
    "SELECT * FROM pg_catalog.pg_class",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT 1 FROM range(1), LATERAL (SELECT getvariable('x'))",
    "WITH v AS (SELECT version()) SELECT * FROM v",
    "SELECT [current_query() FOR x IN [1]]",
    "SELECT list_transform([1], x -> current_setting('threads'))",
    "SHOW DATABASES",
    "SHOW system.main.duckdb_settings",
    "SELECT json_serialize_plan('SELECT 1')",
    "SELECT * FROM histogram(customers, email)",
])
def test_engine_functions_and_views_are_refused(sql: str) -> None:
    with pytest.raises(ApiError) as err:
        statement.check(sql)
    assert err.value.status == 400
    assert err.value.code == "sql_not_allowed"


@pytest.mark.parametrize("sql", [
    "SELECT c.email, count(*) AS orders FROM customers c JOIN orders o USING (customer_id) GROUP BY 1 LIMIT 5",
    "SELECT upper(name) LIKE 'A%', name ILIKE '%b', CAST(id AS VARCHAR), EXTRACT(year FROM d), "
    "coalesce(a, b), a BETWEEN 1 AND 2, s[1:2], {'k': 1}, [1, 2], a::INT, 5!, j->>'$.a', 'a' || 'b', "
    "count(DISTINCT a), percentile_cont(0.5) WITHIN GROUP (ORDER BY a), row_number() OVER (), unnest([1]), "
    "list_transform([1], x -> x + 1), date_trunc('month', d) + INTERVAL 1 DAY, current_date, now() FROM t",
    "SELECT i FROM range(5) t(i) ORDER BY i",
    "SELECT * FROM generate_series(1, 3), unnest([1, 2])",
    "WITH a AS (SELECT 1 AS x) SELECT * FROM a",
    "DESCRIBE customers",
    "SELECT current_user, current_schema",
    "SELECT table_name FROM information_schema.tables UNION SELECT table_name FROM duckdb_tables()",
])
def test_ordinary_queries_pass(sql: str) -> None:
    statement.check(sql)


def test_a_deeply_nested_statement_is_walked_without_recursion() -> None:
    deep = "SELECT " + "(" * 400 + "getvariable('x')" + ")" * 400
    with pytest.raises(ApiError):
        statement.check(deep)
