"""DuckDB's binder names the columns a SELECT reads, per dataset scanned; refusals come back as None."""
from __future__ import annotations

import pytest

from chalicelib.gateway.query.columns import columns_read

TABLES = {"customers": [("id", "BIGINT"), ("email", "VARCHAR"), ("name", "VARCHAR"), ("country", "VARCHAR")],
          "Orders Big": [("order_id", "BIGINT"), ("customer_id", "BIGINT"), ("amount", "DOUBLE"), ("we,ird", "VARCHAR")]}


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT country FROM customers", {"customers": {"country"}}),
    ("SELECT country FROM customers WHERE email IS NULL", {"customers": {"country", "email"}}),
    ("SELECT c.country, sum(o.amount) FROM customers c JOIN \"Orders Big\" o ON o.customer_id = c.id GROUP BY 1",
     {"customers": {"id", "country"}, "Orders Big": {"customer_id", "amount"}}),
    ("SELECT * EXCLUDE (email) FROM customers", {"customers": {"id", "name", "country"}}),
    ("SELECT COLUMNS('^(e|n).*') FROM customers", {"customers": {"email", "name"}}),
    ("WITH x AS (SELECT * FROM customers) SELECT email FROM x UNION ALL SELECT name FROM x",
     {"customers": {"email", "name"}}),
    ("SELECT id FROM customers ORDER BY name LIMIT 3", {"customers": {"id", "name"}}),
    ("SELECT (SELECT max(amount) FROM \"orders big\") AS m, country FROM customers",
     {"customers": {"country"}, "Orders Big": {"amount"}}),
    ("SELECT count(*) FROM customers", {"customers": set()}),
    ("SELECT \"we,ird\" FROM \"Orders Big\" WHERE 1 = 0", {"Orders Big": {"we,ird"}}),
    ("SELECT 'customers' AS customers", {}),
])
def test_the_columns_a_select_reads(sql: str, expected: dict[str, set[str]]) -> None:
    assert columns_read(sql, TABLES) == {k: frozenset(v) for k, v in expected.items()}


@pytest.mark.parametrize("sql", [
    "SELECT nosuch FROM customers",
    "SELECT * FROM read_csv('/etc/passwd')",  # binding would read the file: the binder is locked down
    "SELECT * FROM customers JOIN \"Orders Big\" USING (id)",
])
def test_a_statement_the_binder_refuses_is_none(sql: str) -> None:
    assert columns_read(sql, TABLES) is None


def test_the_stand_ins_are_gone_after_each_answer() -> None:
    columns_read("SELECT id FROM customers", TABLES)
    assert columns_read("SELECT count(*) FROM duckdb_tables()", {}) == {}
    assert columns_read("SELECT id FROM customers", {}) is None  # no leftover stand-in answers it


def test_a_dataset_named_like_a_stand_in_is_unknown_not_an_error() -> None:
    tables = {"__gwq_standin_1": [("a", "BIGINT")], "x": [("b", "BIGINT")]}
    assert columns_read("SELECT a FROM __gwq_standin_1", tables) is None
    assert columns_read("SELECT b FROM x", {"x": [("b", "BIGINT")]}) == {"x": frozenset({"b"})}
