"""What one SELECT calls and names, as DuckDB's own parser sees it, checked against ``allowlist``.

The statement is parsed (``json_serialize_sql``: parsed only, never bound or run) on a process-wide DuckDB
that holds nothing. Every function call is collected with its kind (a table function in FROM, or an
expression function anywhere else, subqueries, CTEs and lambdas included) and every table reference with
its catalog and schema. A query may call only functions ``allowlist.allowed`` and may not name DuckDB's own
views or catalogs. Text that DuckDB would run as SQL (``query('...')``) needs a refused table function,
so what that text holds never matters.
"""
from __future__ import annotations

import atexit
import json
import threading
from typing import Any

from chalicelib.core.http.errors import ApiError
from chalicelib.gateway.query import allowlist

_lock = threading.Lock()
_parsing = threading.Lock()  # one parse at a time on the shared connection (each takes well under 1 ms)
_con: Any = None

Calls = set[tuple[str, str]]  # (kind, function name as written, lower-cased)
Relations = set[tuple[str, str, str]]  # (catalog, schema, name), lower-cased; "" when not written


def _connection() -> Any:
    global _con  # noqa: PLW0603 - one parser per process, built on first use
    with _lock:
        if _con is None:
            import duckdb  # noqa: PLC0415 - DuckDB loads at first query, not at cold start

            # DuckDB's default thread count: parsing on a one-thread connection took four times as long
            con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                     "autoload_known_extensions": False})
            for stmt in ("SET enable_external_access = false", "SET lock_configuration = true"):
                con.execute(stmt)
            _con = con
            atexit.register(_close)
        return _con


def _close() -> None:
    global _con  # noqa: PLW0603
    with _lock:
        if _con is not None:
            _con.close()
        _con = None


def _refused(detail: str) -> ApiError:
    return ApiError(400, "sql_not_allowed", detail)


def parse(sql: str) -> dict[str, Any]:
    """DuckDB's parse tree of ``sql`` (one SELECT), as JSON; 400 when it cannot be parsed."""
    con = _connection()
    with _parsing:
        tree = json.loads(con.execute("SELECT json_serialize_sql($sql)", {"sql": sql}).fetchone()[0])
    if tree.get("error"):
        if tree.get("error_type") == "parser":
            raise ApiError(400, "sql_syntax_error", "The SQL could not be parsed.")
        raise _refused("This statement cannot be checked; write it as a plain SELECT.")
    return tree


def uses(tree: dict[str, Any]) -> tuple[Calls, Relations, set[str]]:
    """The functions a parse tree calls, the relations it names and the engine listings it asks for
    (``SHOW TABLES``, ``SHOW DATABASES``: DuckDB's ``SHOW_SPECIAL``), by an iterative walk (no depth limit)."""
    calls: Calls = set()
    relations: Relations = set()
    listings: set[str] = set()
    stack: list[tuple[Any, str]] = [(tree, allowlist.EXPRESSION)]
    while stack:
        node, kind = stack.pop()
        if isinstance(node, list):
            stack.extend((item, allowlist.EXPRESSION) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("function_name"), str):
            calls.add((kind, node["function_name"].lower()))
        if node.get("type") == "SHOW_REF" and node.get("show_type") == "SHOW_SPECIAL":
            listings.add(str(node.get("table_name") or "").strip('"').lower())
        elif node.get("type") in ("BASE_TABLE", "SHOW_REF") and node.get("table_name"):
            relations.add((str(node.get("catalog_name") or "").lower(), str(node.get("schema_name") or "").lower(),
                           str(node.get("table_name") or "").lower()))
        for field, value in node.items():
            if field == "function" and node.get("type") == "TABLE_FUNCTION":
                stack.append((value, allowlist.TABLE))
            elif isinstance(value, (dict, list)):
                stack.append((value, allowlist.EXPRESSION))
    return calls, relations, listings


def check(sql: str) -> None:
    """400 ``sql_not_allowed`` when ``sql`` calls a function the allow-list does not allow or names one of
    DuckDB's own views, catalogs or schemas."""
    calls, relations, listings = uses(parse(sql))
    if listings:
        raise _refused("SHOW TABLES and SHOW DATABASES are not available in queries; the catalog lists your datasets.")
    for kind, name in sorted(calls):
        if not allowlist.allowed(kind, name):
            raise _refused(f"The function {name} is not available in queries.")
    for catalog, schema, name in sorted(relations):
        if catalog in allowlist.REFUSED_SCOPES or schema in allowlist.REFUSED_SCOPES \
                or name in allowlist.REFUSED_VIEWS:
            raise _refused(f"The table {name} is not available in queries; query your datasets.")
