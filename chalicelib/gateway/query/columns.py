"""Which columns of which datasets one SELECT reads, as DuckDB's own binder and planner decide.

The SQL is planned (``EXPLAIN (FORMAT JSON)``, never run) against empty stand-in tables that have the
caller's visible columns with the types they have after their field policy. Every optimizer is
disabled except ``unused_columns`` and ``column_lifetime``, so filters stay above the scans and each
table scan lists exactly the columns the statement binds (``SELECT *``, ``COLUMNS(..)``, subqueries,
CTEs and views included). A stand-in that is named but never scanned (``LIMIT 0``) needs no rows.

The stand-ins live in one process-wide DuckDB that holds no data and is locked down like a query
connection (no files, no network, no extensions, no configuration changes), so binding a caller's
``read_csv('/etc/passwd')`` fails the same way running it would. Answers are memoised per SQL text and
stand-in schema (a small LRU).

A container's first query has no process-wide binder yet and must create a sandbox anyway, so it can bind
on the new sandbox instead (``columns_read(..., con=...)``): a DuckDB whose external access is already
off, which holds no data yet and whose one allowed directory does not exist yet (see ``query._connect``).
The optimizers are disabled for that one ``EXPLAIN`` and restored after it.
"""
from __future__ import annotations

import atexit
import json
import threading
from collections import OrderedDict
from typing import Any

_KEEP = ("unused_columns", "column_lifetime")
_MEMO_SIZE = 512
_STANDIN = "__gwq_standin_"

Tables = dict[str, list[tuple[str, str]]]  # dataset name -> [(column, DuckDB type)]
Reads = dict[str, frozenset[str]]  # dataset name -> the columns read, for each dataset scanned

_lock = threading.Lock()
_con: Any = None
_memo: OrderedDict[tuple[Any, ...], Reads | None] = OrderedDict()


def _connection() -> Any:
    global _con  # noqa: PLW0603 - one binder per process, built on first use
    if _con is None:
        import duckdb  # noqa: PLC0415

        con = duckdb.connect(":memory:", config={"threads": 1, "autoinstall_known_extensions": False,
                                                 "autoload_known_extensions": False})
        for stmt in (f"SET disabled_optimizers = '{_disabled(con)}'", "SET enable_external_access = false",
                     "SET allow_community_extensions = false", "SET lock_configuration = true"):
            con.execute(stmt)
        _con = con
        atexit.register(_close)  # closed before the interpreter tears DuckDB down
    return _con


_off: str | None = None


def _disabled(con: Any) -> str:
    """Every optimizer but ``_KEEP``, as a ``disabled_optimizers`` value (asked of DuckDB once)."""
    global _off  # noqa: PLW0603
    if _off is None:
        names = [r[0] for r in con.execute("SELECT name FROM duckdb_optimizers()").fetchall()]
        _off = ",".join(n for n in names if n not in _KEEP)
    return _off


def _close() -> None:
    global _con  # noqa: PLW0603
    with _lock:
        if _con is not None:
            _con.close()
        _con = None
        _memo.clear()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _memo_key(sql: str, tables: Tables) -> tuple[Any, ...]:
    return (sql, tuple(sorted((n, tuple(c)) for n, c in tables.items())))


def known(sql: str, tables: Tables) -> bool:
    """Whether the answer for ``sql`` and ``tables`` is memoised (no DuckDB is needed to give it)."""
    with _lock:
        return _memo_key(sql, tables) in _memo


def columns_read(sql: str, tables: Tables, con: Any = None) -> Reads | None:
    """The columns ``sql`` reads per dataset it scans; None when the binder refuses the statement against
    the stand-ins (the caller then loads every visible column and lets the real run report the error).
    ``con``: an empty, not yet locked sandbox without file access to bind on instead of the process-wide
    binder (a container's first query)."""
    key = _memo_key(sql, tables)
    with _lock:
        if key in _memo:
            _memo.move_to_end(key)
            return _memo[key]
        reads = _bind(sql, tables) if con is None else _bind_on(con, sql, tables)
        _memo[key] = reads
        if len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)
        return reads


def _bind_on(con: Any, sql: str, tables: Tables) -> Reads | None:
    con.execute(f"SET disabled_optimizers = '{_disabled(con)}'")
    try:
        return _bind(sql, tables, con)
    finally:
        con.execute("RESET disabled_optimizers")


def _bind(sql: str, tables: Tables, con: Any = None) -> Reads | None:
    import duckdb  # noqa: PLC0415

    con = _connection() if con is None else con
    standins = {f"{_STANDIN}{i}": name for i, name in enumerate(sorted(tables))}
    created: list[str] = []
    try:
        for standin, name in standins.items():
            cols = ", ".join(f"{_quote(c)} {t}" for c, t in tables[name]) or '"_empty" BOOLEAN'
            con.execute(f"CREATE TABLE {standin} ({cols})")
            created.append(f"TABLE {standin}")
            con.execute(f"CREATE VIEW {_quote(name)} AS SELECT * FROM {standin}")
            created.append(f"VIEW {_quote(name)}")
        plan = con.execute("EXPLAIN (FORMAT JSON) " + sql).fetchall()
    except duckdb.Error:  # refused by the binder (or a name the stand-ins cannot take): unknown
        return None
    finally:
        for obj in reversed(created):
            con.execute(f"DROP {obj}")
    reads: dict[str, set[str]] = {}
    for _, text in plan:
        for node in json.loads(text):
            _scans(node, standins, reads)
    return {name: frozenset(cols) for name, cols in reads.items()}


def _scans(node: dict[str, Any], standins: dict[str, str], out: dict[str, set[str]]) -> None:
    info = node.get("extra_info") or {}
    table = info.get("Table") if isinstance(info, dict) else None
    if isinstance(table, str):
        name = standins.get(table.rsplit(".", 1)[-1])
        if name is not None:
            cols = info.get("Projections") or []
            out.setdefault(name, set()).update([cols] if isinstance(cols, str) else cols)
    for child in node.get("children") or []:
        _scans(child, standins, out)
