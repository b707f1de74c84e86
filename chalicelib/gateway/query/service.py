"""Federated query: one SELECT over the caller's datasets, in DuckDB, under the caller's ACL.

Per query:
1. The text must parse (DuckDB's own parser) into exactly one statement of type SELECT; anything else
   (DDL, DML, COPY, ATTACH, INSTALL/LOAD, PRAGMA, SET, EXPLAIN, several statements) is refused. Every
   function it calls must be on the allow-list (``allowlist.py``, checked on the parse tree by
   ``statement.py``) and it may not name the engine's own views (settings, databases, catalog).
2. The identifiers in the text are matched (case-insensitively) to the names of datasets the caller may
   read; only those can be loaded. DuckDB's binder then says which of their columns the statement reads
   (``query_columns``: the SQL is planned against empty stand-ins holding the caller's visible columns);
   only those columns are loaded, and each through its field policy (masked, hashed, redacted or left
   out), so a policy costs only when its column is read. Internal ``_`` columns never load. Datasets
   and their row-level policy come from the policy-enforcing reader (``gateway/reader.py``): rows of a
   document whose per-document ACL excludes the caller are not loaded at all.
3. The projected tables live in a locked-down in-memory DuckDB (a *sandbox*, ``query_cache``) kept per
   container and keyed by the workspace and, per dataset, its snapshot (``data_prefix``), name and the
   caller's visible fields with their policies. A cold sandbox downloads the Parquet parts
   (``storage.snapshot_source``) into a private temp dir, which is deleted before any caller's SQL runs.
4. A sandbox is created with extension auto-install/auto-load off and no file or network access except to
   its own raw-data directory, which exists only while the sandbox loads (``_connect``); a container's first
   query binds its SQL on it before that (``query_columns``). The configuration is locked before the
   sandbox is cached; the caller's SQL runs on a fresh cursor of it with a row limit and a
   wall-clock limit (``query_timer`` calls ``interrupt``). Should the real tables refuse a statement the
   stand-ins accepted (a binder error), the sandbox is rebuilt with every visible column and it runs again.
5. The answer is one page: at most ``limit`` rows and ``MAX_ANSWER_BYTES`` of JSON rows. When more rows
   exist, ``truncated`` is true, ``truncated_reason`` says which cap ended the page (``row_limit`` or
   ``byte_limit``) and ``next_cursor`` continues it: send the same SQL with ``after``. A later page runs
   the query again and skips the rows already sent, so pages are stable when the SQL has an ORDER BY.
   A single row larger than the byte cap is refused (422 ``row_too_large``).
6. Lineage is recorded aggregated (``lineage.record_query``): ``dataset -> query`` per dataset used into
   the day's node of that set of datasets (plus ``query -> answer`` when the caller names the chat
   answer, agent run or saved query it serves). The query does not write it: once the SQL is bound to
   its datasets it sends one message to the region's queue (``lineage_queue``: the worker writes it; a
   failed send writes it directly) beside the query (``aws.alongside``), as the catalog version check
   runs (``catalog.checked_alongside``); the query answers when both are back.

DuckDB is imported inside the functions (the gateway's cold start does not pay for it).
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid
from concurrent.futures import Future
from typing import Any

from chalicelib.core import aws, clock
from chalicelib.core.authz import Principal, require
from chalicelib.core.config import settings
from chalicelib.core.durations import format_duration
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.process_state import cached
from chalicelib.core.telemetry import tracing
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import reader, storage
from chalicelib.gateway.catalog import fieldpolicy
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.query import cache as query_cache
from chalicelib.gateway.query import columns as query_columns
from chalicelib.gateway.query import lineage_queue, sql_errors, statement
from chalicelib.gateway.query import timer as query_timer

log = get_logger("gateway.query")

DEFAULT_ROWS = 1000
MAX_ROWS = 10_000
MAX_SQL_CHARS = 20_000
ANSWER_TYPES = ("CHAT_ANSWER", "AGENT_RUN", "SAVED_QUERY")
# JSON bytes of the rows of one answer: under Lambda's 6 MB response limit with room for the rest
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # of JSON rows per answer page (docs/api/gateway.md)
MAX_SKIP_ROWS = 1_000_000  # how far a cursor may page into one answer
CURSOR_KIND = "query"
_FETCH_CHUNK = 256

_SQL_TYPES = {
    "VARCHAR": "STRING", "BOOLEAN": "BOOLEAN", "DATE": "DATE", "JSON": "JSON",
    "TINYINT": "INTEGER", "SMALLINT": "INTEGER", "INTEGER": "INTEGER", "BIGINT": "INTEGER", "HUGEINT": "INTEGER",
    "UTINYINT": "INTEGER", "USMALLINT": "INTEGER", "UINTEGER": "INTEGER", "UBIGINT": "INTEGER",
    "FLOAT": "FLOAT", "DOUBLE": "FLOAT", "DECIMAL": "FLOAT",
    "TIMESTAMP": "TIMESTAMP", "TIMESTAMP WITH TIME ZONE": "TIMESTAMP", "TIMESTAMP_NS": "TIMESTAMP",
    "TIMESTAMP_MS": "TIMESTAMP", "TIMESTAMP_S": "TIMESTAMP",
}
_EMPTY_TYPES = {"STRING": "VARCHAR", "INTEGER": "BIGINT", "FLOAT": "DOUBLE", "BOOLEAN": "BOOLEAN",
                "TIMESTAMP": "TIMESTAMP", "DATE": "DATE", "JSON": "VARCHAR"}


def _bad_sql(code: str, detail: str) -> ApiError:
    return ApiError(400, code, detail)


def check_sql(sql: Any) -> str:
    """The SQL text when it is exactly one SELECT; a 400 naming the problem otherwise."""
    import duckdb  # noqa: PLC0415 - DuckDB loads at first query, not at cold start

    if not isinstance(sql, str) or not sql.strip():
        raise _bad_sql("invalid_sql", "'sql' must be a non-empty string holding one SELECT statement.")
    if len(sql) > MAX_SQL_CHARS:
        raise _bad_sql("invalid_sql", f"'sql' must have at most {MAX_SQL_CHARS} characters.")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise _bad_sql("sql_syntax_error", _clean(err)) from None
    if len(statements) != 1:
        raise _bad_sql("sql_not_allowed", f"Exactly one statement is allowed; found {len(statements)}.")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise _bad_sql("sql_not_allowed", f"Only SELECT statements are allowed; this is {kind.name}.")
    return sql


def _clean(err: Exception) -> str:
    return sql_errors.public_message(err)


@cached(maxsize=256, derived=True)
def _checked(sql: str) -> str:
    """``check_sql`` and ``check_functions`` of one text, remembered when it passed (both depend on the text
    alone: the parser and the allow-list are fixed for the process); a refusal is checked again each time."""
    check_functions(check_sql(sql))
    return sql


def check_functions(sql: str) -> None:
    """400 when the SQL calls a function the allow-list does not allow (``query/allowlist.py``) or names
    one of the engine's own views (its settings, databases and catalog)."""
    statement.check(sql)


_IDENT = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*)')


def referenced(sql: str) -> set[str]:
    """Lower-cased identifiers of the SQL (quoted or not): a superset of the tables it can name.

    Only readable datasets among them are loaded, so a column or literal that happens to share a
    dataset's name costs a load, never an exposure. (DuckDB's ``get_table_names`` binds the statement,
    which fails for ``JOIN ... USING`` on a connection without the tables.)
    """
    return {(quoted.replace('""', '"') if quoted else bare).lower() for quoted, bare in _IDENT.findall(sql)}


def _columns_loaded(dataset_id: str, columns: list[str]) -> None:
    """Called with the columns read from a dataset's Parquet each time one is loaded (a seam for tests)."""


def visible_columns(principal: Principal, rec: catalog.DatasetRecord) -> list[dict[str, Any]]:
    """The caller's fields of ``rec`` a query can load: visible and not internal (``_``)."""
    return [f for f in catalog.visible_fields(principal, rec) if not f["name"].startswith("_")]


def _policy_type(f: dict[str, Any]) -> str:
    """The DuckDB type of a field after its policy (MASK and HASH turn a column into text)."""
    return "VARCHAR" if f["policy"] in ("MASK", "HASH") else _EMPTY_TYPES[f["type"]]


def _create_empty(con: Any, table: str, fields: list[dict[str, Any]]) -> None:
    cols = ", ".join(f"{fieldpolicy.quote_ident(f['name'])} {_policy_type(f)}"
                     for f in fields if f["policy"] != "DENY") or "\"_empty\" BOOLEAN"
    con.execute(f"CREATE TABLE {table} ({cols})")


def load_dataset(con: Any, rec: catalog.DatasetRecord, fields: list[dict[str, Any]], columns: frozenset[str],
                 into: str, rows: reader.View | None = None) -> None:
    """Create table ``rec.name`` in ``con`` holding ``columns`` of the dataset, each through its policy in
    ``fields`` (the caller's visible fields), without the rows ``rows`` (the caller's view) hides; the
    snapshot's files go to ``into`` (the caller deletes it)."""
    region = rec.region
    table = fieldpolicy.quote_ident(rec.name)
    source = storage.snapshot_source(region, rec.data_prefix, into) if rec.data_prefix else None
    if source is None:
        _create_empty(con, table, fields)
        return
    present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    chosen = [f for f in fields if f["name"] in columns and f["policy"] != "DENY"]
    _columns_loaded(rec.id, [f["name"] for f in chosen if f["name"] in present])
    items = [p for p in (fieldpolicy.projection(f["name"], f["policy"], f["name"] in present) for f in chosen) if p]
    if not items:
        items = ["NULL AS \"_empty\""]
    needs_key = any(f["policy"] == "HASH" and f["name"] in present for f in chosen)
    where, params = rows.row_filter() if rows is not None else ("", {})
    if where and reader.ROW_ACL_COLUMN not in present:
        where, params = "", {}  # no document column: no row belongs to a restricted document
    sql = f"CREATE TABLE {table} AS SELECT {', '.join(items)} FROM {source}{where}"
    if needs_key:
        ipad, opad = fieldpolicy.hmac_pads(fieldpolicy.workspace_hash_key(region, rec.workspace_id))
        params = {**params, "ipad": ipad, "opad": opad}
    con.execute(sql, params) if params else con.execute(sql)


def _cheapest(fields: list[dict[str, Any]]) -> frozenset[str]:
    """One column to load for a scan that reads none (``count(*)``): a number or date before text, a clear
    value before a masked or hashed one."""
    if not fields:
        return frozenset()
    rank = {"REDACT": 0, "ALLOW": 1, "MASK": 2, "HASH": 3}
    best = min(fields, key=lambda f: (rank.get(f["policy"], 4), f["type"] in ("STRING", "JSON")))
    return frozenset([best["name"]])


def _standins(used: list[catalog.DatasetRecord], fields: dict[str, list[dict[str, Any]]]) -> query_columns.Tables:
    return {r.name: [(f["name"], _policy_type(f)) for f in fields[r.name]] for r in used}


def columns_needed(sql: str, used: list[catalog.DatasetRecord], fields: dict[str, list[dict[str, Any]]],
                   con: Any = None) -> tuple[dict[str, frozenset[str]], bool]:
    """The columns to load per dataset the SQL scans (DuckDB's binder decides, see ``query_columns``; on
    ``con``, a new sandbox from ``_connect``, when given), and whether that is every visible column of every
    used dataset (the binder could not tell)."""
    every = {r.name: frozenset(f["name"] for f in fields[r.name]) for r in used}
    if not used:
        return {}, True
    reads = query_columns.columns_read(sql, _standins(used, fields), con)
    if reads is None:
        return every, True
    needs: dict[str, frozenset[str]] = {}
    for name, cols in reads.items():
        if not cols <= every[name]:  # a name the stand-in did not have: load everything visible
            return every, True
        needs[name] = cols or _cheapest(fields[name])
    return needs, needs == every


def _connect() -> tuple[Any, str]:
    """A new sandbox DuckDB and its private work dir. From the start it has no file or network access except
    to ``<work>/data/``, which does not exist until ``_build`` downloads the raw Parquet into it and is deleted
    before any caller's SQL runs; so the caller's SQL may be bound on it first (``query_columns``)."""
    import duckdb  # noqa: PLC0415 - DuckDB loads at first query, not at cold start

    work = tempfile.mkdtemp(prefix="gwq-")  # Lambda: only /tmp is writable; HOME may be unset
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False, "threads": 1,
                                             "temp_directory": os.path.join(work, "spill"), "home_directory": work})
    try:
        con.execute("SET allowed_directories = [$raw]", {"raw": os.path.join(work, "data") + os.sep})
        con.execute("SET enable_external_access = false")
    except BaseException:
        con.close()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return con, work


def _build(key: query_cache.Key, used: list[catalog.DatasetRecord], fields: dict[str, list[dict[str, Any]]],
           wanted: dict[str, frozenset[str]], fresh: tuple[Any, str] | None = None,
           views: dict[str, reader.View] | None = None) -> query_cache.Sandbox:
    """A locked-down DuckDB (``fresh``, or a new one from ``_connect``) holding ``wanted`` columns of each used
    dataset (zero-row stand-ins for the datasets the SQL names but never scans); the raw files are deleted
    before it is returned."""
    con, work = fresh if fresh is not None else _connect()
    raw = os.path.join(work, "data")
    loaded: dict[str, frozenset[str]] = {}
    try:
        try:
            for rec in used:
                table = fieldpolicy.quote_ident(rec.name)
                if rec.name in wanted:
                    load_dataset(con, rec, fields[rec.name], wanted[rec.name], os.path.join(raw, rec.id),
                                 (views or {}).get(rec.name))
                    loaded[rec.name] = (frozenset(f["name"] for f in fields[rec.name])
                                        if not rec.data_prefix else wanted[rec.name])
                else:
                    _create_empty(con, table, fields[rec.name])
        finally:
            shutil.rmtree(raw, ignore_errors=True)  # the raw files are gone before any caller's SQL runs
        if os.path.exists(raw):  # the one directory the sandbox may read must not exist when callers' SQL runs
            raise RuntimeError("the raw files of a query sandbox could not be deleted")
        nbytes = int(con.execute("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()").fetchone()[0])
        lock_down(con)
    except BaseException:
        con.close()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return query_cache.Sandbox(key, con, work, loaded, {r.id: r.data_prefix for r in used}, nbytes)


def lock_down(con: Any) -> None:
    """No files, no network, no extensions, no configuration changes from here on."""
    for stmt in ("SET enable_external_access = false", "SET autoinstall_known_extensions = false",
                 "SET autoload_known_extensions = false", "SET allow_community_extensions = false",
                 f"SET memory_limit = '{settings().query_memory_limit}'",
                 f"SET max_temp_directory_size = '{settings().query_spill_limit}'",
                 "SET lock_configuration = true"):
        con.execute(stmt)


def _json_value(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, dt.datetime):
        return clock.iso(v if v.tzinfo else v.replace(tzinfo=dt.UTC))
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return format_duration(v.total_seconds())
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return str(v)


def _column_type(type_code: Any) -> str:
    name = str(type_code).upper()
    if name.startswith("DECIMAL"):
        return "FLOAT"
    return _SQL_TYPES.get(name, "JSON" if any(name.startswith(p) for p in ("STRUCT", "MAP", "LIST")) or name.endswith("[]") else "STRING")


def _cursor_offset(sql: str, after: str | None) -> int:
    """The rows already sent, from a cursor of an earlier page of this same SQL (400 otherwise)."""
    pos = paging.decode(CURSOR_KIND, after, dict)
    if pos is None:  # absent or empty: the first page
        return 0
    offset = pos.get("o")
    if (pos.get("s") != _sql_tag(sql) or isinstance(offset, bool) or not isinstance(offset, int)
            or not 0 < offset <= MAX_SKIP_ROWS):
        raise ApiError(400, "validation_failed", "'after' is not a cursor of this query.",
                       errors=[{"field": "after", "message": "is not a cursor of this query"}])
    return offset


def _sql_tag(sql: str) -> str:
    return hashlib.sha256(sql.encode()).hexdigest()[:32]


def fetch_page(cur: Any, *, skip: int, limit: int, max_bytes: int | None = None
               ) -> tuple[list[list[Any]], str | None]:
    """Up to ``limit`` rows (as JSON values) after ``skip`` rows, stopping before ``max_bytes`` (default
    ``MAX_ANSWER_BYTES``) of JSON; and why the page ended early (``row_limit``/``byte_limit``), or None
    when the result is exhausted."""
    max_bytes = MAX_ANSWER_BYTES if max_bytes is None else max_bytes
    skipped = 0
    while skipped < skip:
        chunk = cur.fetchmany(min(_FETCH_CHUNK * 16, skip - skipped))
        if not chunk:
            return [], None
        skipped += len(chunk)
    rows: list[list[Any]] = []
    size = 2  # the enclosing brackets
    while True:
        chunk = cur.fetchmany(_FETCH_CHUNK)
        if not chunk:
            return rows, None
        for raw in chunk:
            if len(rows) == limit:
                return rows, "row_limit"
            row = [_json_value(v) for v in raw]
            row_bytes = len(json.dumps(row, separators=(",", ":"), default=str).encode()) + 1
            if size + row_bytes > max_bytes:
                if not rows:
                    raise ApiError(422, "row_too_large", f"One row of the answer is larger than the {max_bytes}-byte "
                                                         "answer cap; select fewer or shorter columns.")
                return rows, "byte_limit"
            rows.append(row)
            size += row_bytes


@tracing.traced("query", lambda p, *_, **__: tracing.query_attrs(p.workspace_id))
def run(scope: RequestScope, sql: Any, *, limit: int | None = None, answer: dict[str, str] | None = None,
        time_limit: float | None = None, after: str | None = None) -> dict[str, Any]:
    """Run one SELECT for the caller of ``scope``; see the module docstring."""
    principal = scope.principal
    require(principal, "knowledge.read")
    sql = _checked(sql) if isinstance(sql, str) else check_sql(sql)
    limit = DEFAULT_ROWS if limit is None else limit
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ROWS:
        raise ApiError(400, "validation_failed", f"'limit' must be between 1 and {MAX_ROWS}.",
                       errors=[{"field": "limit", "message": f"must be between 1 and {MAX_ROWS}"}])
    if answer is not None:
        if (not isinstance(answer, dict) or set(answer) != {"type", "id"}
                or str(answer.get("type", "")).upper() not in ANSWER_TYPES or not isinstance(answer.get("id"), str)
                or not 1 <= len(answer["id"]) <= 128):
            raise ApiError(400, "validation_failed", "'answer' must be {type, id} with type one of "
                           + ", ".join(ANSWER_TYPES) + ".", errors=[{"field": "answer", "message": "is invalid"}])
    skip = _cursor_offset(sql, after)
    names = referenced(sql)
    lineage_write: list[Future[Any]] = []  # started once, beside the query's run (``_run``)

    def attempt() -> dict[str, Any]:
        views = {v.rec.name: v for v in reader.by_name(scope, names)}
        used = [v.rec for v in views.values()]
        fields = {r.name: visible_columns(principal, r) for r in used}
        key = (principal.workspace_id, *(views[r.name].cache_key() for r in used))
        # A container's first query (no sandbox, no memoised binder answer) binds on the sandbox it must
        # create anyway rather than creating the process-wide binder's DuckDB too.
        spare: list[tuple[Any, str]] = []
        if used and not query_cache.holds(key) and not query_columns.known(sql, _standins(used, fields)):
            spare.append(_connect())
        try:
            needs, complete = columns_needed(sql, used, fields, spare[0][0] if spare else None)
            if used and not lineage_write:
                lineage_write.append(aws.alongside(lineage_queue.send, scope, [(r.id, r.name) for r in used],
                                                   answer))
            return _run(principal, sql, used, fields, key, needs, complete, spare, limit=limit,
                        time_limit=time_limit, skip=skip, views=views)
        finally:
            for con, work in spare:  # not used: another query built the sandbox meanwhile
                con.close()
                shutil.rmtree(work, ignore_errors=True)

    try:
        result = catalog.checked_alongside(scope.home, principal.workspace_id, attempt)
    except Exception:
        for write in lineage_write:  # waited for, but the query's own error is the caller's
            if write.exception() is not None:
                log.warning("query lineage not recorded", extra={"error": type(write.exception()).__name__})
        raise
    for write in lineage_write:
        write.result()
    return result


def _run(principal: Principal, sql: str, used: list[catalog.DatasetRecord], fields: dict[str, list[dict[str, Any]]],
         key: query_cache.Key, needs: dict[str, frozenset[str]], complete: bool, spare: list[tuple[Any, str]], *,
         limit: int, time_limit: float | None, skip: int,
         views: dict[str, reader.View] | None = None) -> dict[str, Any]:
    import duckdb  # noqa: PLC0415 - DuckDB loads at first query, not at cold start

    query_id = new_id("q")
    limit_s = settings().query_time_limit_seconds
    while True:
        box = query_cache.acquire(key, needs, settings().query_cache_bytes,
                                  lambda wanted: _build(key, used, fields, wanted, spare.pop() if spare else None,
                                                        views))
        cur = box.con.cursor()
        timer = query_timer.arm(limit_s if time_limit is None else time_limit, cur.interrupt)
        try:
            cur_result = cur.execute(sql)
            description = cur_result.description or []
            rows, ended_by = fetch_page(cur_result, skip=skip, limit=limit)
            break
        except duckdb.InterruptException:
            raise ApiError(422, "query_timeout", f"The query ran longer than {limit_s:g} s and was stopped.") from None
        except duckdb.BinderException as err:
            if complete:  # every visible column was there: the caller's SQL is wrong
                raise _bad_sql("sql_error", _clean(err)) from None
            needs, complete = {r.name: frozenset(f["name"] for f in fields[r.name]) for r in used}, True
        except duckdb.Error as err:
            raise _bad_sql("sql_error", _clean(err)) from None
        except (ValueError, TypeError, OverflowError):  # a value Python cannot take: nothing internal shown
            raise _bad_sql("sql_error", sql_errors.public_message(Exception())) from None
        finally:
            query_timer.disarm(timer)
            cur.close()
            query_cache.release(box)
    truncated = ended_by is not None
    now = clock.now()
    datasets = [{"id": r.id, "name": r.name, "freshness": format_duration(catalog.freshness_seconds(r, now)),
                 "last_synced_at": r.last_synced_at} for r in used]
    log.info("federated query", extra={"query_id": query_id, "datasets": [r.id for r in used],
                                       "rows": len(rows), "truncated": truncated})
    return {"query_id": query_id,
            "columns": [{"name": d[0], "type": _column_type(d[1])} for d in description],
            "rows": rows, "row_count": len(rows), "truncated": truncated, "truncated_reason": ended_by,
            "next_cursor": paging.encode(CURSOR_KIND, {"s": _sql_tag(sql), "o": skip + len(rows)})
            if truncated and skip + len(rows) <= MAX_SKIP_ROWS else None,
            "datasets": datasets}
