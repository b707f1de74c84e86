"""Pure pieces of the gateway read side: masking/hashing (SQL twin equals Python), the SQL gate."""
from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core.http.errors import ApiError
from chalicelib.gateway.catalog import fieldpolicy
from chalicelib.gateway.query import service as query


def _sql_policy(policy: str, value: str | None, key: bytes) -> str | None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (v VARCHAR)")
    con.execute("INSERT INTO t VALUES (?)", [value])
    item = fieldpolicy.projection("v", policy, True)
    ipad, opad = fieldpolicy.hmac_pads(key)
    params = {"ipad": ipad, "opad": opad} if policy == "HASH" else None
    return con.execute(f"SELECT {item} FROM t", params).fetchone()[0]


@settings(deadline=None, max_examples=80)
@given(st.text(max_size=40))
def test_sql_mask_and_hash_equal_the_python_definitions(value: str) -> None:
    key = b"k" * 32
    assert _sql_policy("MASK", value, key) == fieldpolicy.mask_text(value)
    assert _sql_policy("HASH", value, key) == fieldpolicy.hash_text(key, value)


def test_policies_on_nulls_and_edge_lengths() -> None:
    key = b"\x01" * 32
    assert fieldpolicy.mask_text("abcd") == "****"
    assert fieldpolicy.mask_text("abcde") == "*bcde"
    for policy in ("MASK", "HASH", "REDACT"):
        assert _sql_policy(policy, None, key) is None
    assert _sql_policy("REDACT", "secret", key) is None
    assert fieldpolicy.projection("v", "DENY", True) is None
    assert fieldpolicy.projection("v", "SOMETHING_NEW", True) is None  # unknown policies fail closed
    assert fieldpolicy.hash_text(key, "x") != fieldpolicy.hash_text(b"\x02" * 32, "x")


@pytest.mark.parametrize("sql", ["SELECT 1", "select * from t where a = ';'", "WITH a AS (SELECT 1) SELECT * FROM a",
                                 "FROM t", "SELECT 1 UNION ALL SELECT 2", "DESCRIBE t"])
def test_check_sql_accepts_single_selects(sql: str) -> None:
    assert query.check_sql(sql) == sql


@pytest.mark.parametrize("sql", ["UPDATE t SET a = 1", "DELETE FROM t", "CREATE VIEW v AS SELECT 1", "COPY t FROM 'x'",
                                 "EXPORT DATABASE '/tmp/x'", "ATTACH ':memory:' AS m", "DETACH m", "USE m",
                                 "INSTALL x", "LOAD x", "PRAGMA threads=1", "SET threads=1", "RESET threads",
                                 "CALL pragma_version()", "CHECKPOINT", "VACUUM", "BEGIN", "SELECT 1;SELECT 2",
                                 "PREPARE p AS SELECT 1", "EXPLAIN ANALYZE SELECT 1", "   ", 42])
def test_check_sql_refuses_everything_else(sql: object) -> None:
    with pytest.raises(ApiError) as err:
        query.check_sql(sql)
    assert err.value.status == 400


def test_referenced_identifiers() -> None:
    assert query.referenced('SELECT * FROM Customers c JOIN "Order ""X""" o USING (id)') >= {"customers", 'order "x"'}
