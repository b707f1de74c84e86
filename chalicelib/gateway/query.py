"""Federated query: one SELECT over the caller's datasets, in DuckDB, under the caller's ACL.

Per query:
1. The text must parse (DuckDB's own parser) into exactly one statement of type SELECT; anything else
   (DDL, DML, COPY, ATTACH, INSTALL/LOAD, PRAGMA, SET, EXPLAIN, several statements) is refused.
2. The identifiers in the text are matched (case-insensitively) to the names of datasets the caller may
   read; only those are loaded. Nothing else is ever loaded.
3. A fresh in-memory connection loads each of those datasets from its Parquet parts (downloaded with
   boto3 from the workspace region's data bucket into a private temp dir), projecting every column
   through its field policy (masked, hashed, redacted or left out), dropping internal ``_`` columns.
   The temp dir is deleted before the caller's SQL runs.
4. External access is disabled, extension auto-install/auto-load are off and the configuration is locked;
   then the caller's SQL runs with a row limit and a wall-clock limit (a timer calls ``interrupt``).
5. One lineage edge ``dataset -> query`` per dataset used (plus ``query -> answer`` when the caller
   names the chat answer, agent run or saved query it serves) is recorded.

DuckDB is imported inside the functions (the gateway's cold start does not pay for it).
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import os
import re
import shutil
import tempfile
import threading
import uuid
from typing import Any

from chalicelib.core import aws, clock
from chalicelib.core.authz import Principal, require
from chalicelib.core.config import settings
from chalicelib.core.durations import format_duration
from chalicelib.core.errors import ApiError
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.tenancy import region_of
from chalicelib.gateway import catalog, fieldpolicy, lineage

log = get_logger("gateway.query")

DEFAULT_ROWS = 1000
MAX_ROWS = 10_000
MAX_SQL_CHARS = 20_000
ANSWER_TYPES = ("CHAT_ANSWER", "AGENT_RUN", "SAVED_QUERY")

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
    import duckdb

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
    text = str(err).strip().replace("\n", " ")
    return text[:500]


_IDENT = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*)')


def _referenced(sql: str) -> set[str]:
    """Lower-cased identifiers of the SQL (quoted or not): a superset of the tables it can name.

    Only readable datasets among them are loaded, so a column or literal that happens to share a
    dataset's name costs a load, never an exposure. (DuckDB's ``get_table_names`` binds the statement,
    which fails for ``JOIN ... USING`` on a connection without the tables.)
    """
    return {(quoted.replace('""', '"') if quoted else bare).lower() for quoted, bare in _IDENT.findall(sql)}


def _download(region: str, prefix: str, into: str) -> list[str]:
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name("data", region)
    paths: list[str] = []
    token = None
    prefix = prefix.rstrip("/") + "/"
    while True:
        kw = {"Bucket": bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
        page = s3.list_objects_v2(**kw)
        for obj in page.get("Contents", []):
            if not obj["Key"].endswith(".parquet"):
                continue
            path = os.path.join(into, f"{len(paths):05d}.parquet")
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"]  # one GET; no transfer thread pool
            with open(path, "wb") as fh:
                shutil.copyfileobj(body, fh, 1 << 20)
            paths.append(path)
        if not page.get("IsTruncated"):
            return paths
        token = page["NextContinuationToken"]


def load_dataset(con: Any, principal: Principal, rec: catalog.DatasetRecord, tmp: str) -> None:
    """Create table ``rec.name`` in ``con`` holding the dataset as the caller may see it."""
    region = region_of(rec.workspace_id)
    fields = [f for f in catalog.visible_fields(principal, rec) if not f["name"].startswith("_")]
    files = _download(region, rec.data_prefix, os.path.join(tmp, rec.id)) if rec.data_prefix else []
    table = fieldpolicy.quote_ident(rec.name)
    if not files:
        cols = ", ".join(  # MASK and HASH turn a column into text, as on the non-empty path
            f"{fieldpolicy.quote_ident(f['name'])} "
            f"{'VARCHAR' if f['policy'] in ('MASK', 'HASH') else _EMPTY_TYPES[f['type']]}"
            for f in fields if f["policy"] != "DENY") or "\"_empty\" BOOLEAN"
        con.execute(f"CREATE TABLE {table} ({cols})")
        return
    source = "read_parquet([" + ", ".join("'" + p.replace("'", "''") + "'" for p in files) + "], union_by_name=true)"
    present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    items = [p for p in (fieldpolicy.projection(f["name"], f["policy"], f["name"] in present) for f in fields) if p]
    if not items:
        items = ["NULL AS \"_empty\""]
    needs_key = any(f["policy"] == "HASH" and f["name"] in present for f in fields)
    sql = f"CREATE TABLE {table} AS SELECT {', '.join(items)} FROM {source}"
    if needs_key:
        ipad, opad = fieldpolicy.hmac_pads(fieldpolicy.workspace_hash_key(region, rec.workspace_id))
        con.execute(sql, {"ipad": ipad, "opad": opad})
    else:
        con.execute(sql)


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


def run(principal: Principal, sql: Any, *, limit: int | None = None, answer: dict[str, str] | None = None,
        time_limit: float | None = None) -> dict[str, Any]:
    """Run one SELECT for the caller; see the module docstring."""
    require(principal, "knowledge.read")
    import duckdb

    sql = check_sql(sql)
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
    used = catalog.readable_by_name(principal, _referenced(sql))
    query_id = new_id("q")
    work = tempfile.mkdtemp(prefix="gwq-")  # Lambda: only /tmp is writable; HOME may be unset
    tmp = os.path.join(work, "data")
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False, "threads": 1,
                                             "temp_directory": os.path.join(work, "spill"), "home_directory": work})
    timer: threading.Timer | None = None
    try:
        try:
            for rec in used:
                os.makedirs(os.path.join(tmp, rec.id), exist_ok=True)
                load_dataset(con, principal, rec, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # the raw files are gone before the caller's SQL runs
        lock_down(con)
        limit_s = settings().query_time_limit_seconds
        timer = threading.Timer(limit_s if time_limit is None else time_limit, con.interrupt)
        timer.start()
        try:
            cur = con.execute(sql)
            rows = cur.fetchmany(limit + 1)
            description = cur.description or []
        except duckdb.InterruptException:
            raise ApiError(422, "query_timeout", f"The query ran longer than {limit_s:g} s and was stopped.") from None
        except duckdb.Error as err:
            raise _bad_sql("sql_error", _clean(err)) from None
    finally:
        if timer is not None:
            timer.cancel()
        con.close()
        shutil.rmtree(work, ignore_errors=True)
    truncated = len(rows) > limit
    rows = rows[:limit]
    now = clock.now()
    datasets = [{"id": r.id, "name": r.name, "freshness": format_duration(catalog.freshness_seconds(r, now)),
                 "last_synced_at": r.last_synced_at} for r in used]
    details = {"user_id": principal.user_id, "row_count": len(rows),
               "sql_sha256": hashlib.sha256(sql.encode()).hexdigest(), "target_name": "query"}
    edges: list[tuple[str, str, str, str, dict[str, Any]]] = [
        ("dataset", r.id, "query", query_id, {**details, "source_name": r.name}) for r in used]
    if answer is not None and used:
        edges.append(("query", query_id, answer["type"].lower(), answer["id"],
                      {"source_name": "query", "target_name": answer["type"].lower()}))
    if edges:
        lineage.record_edges(principal.workspace_id, edges)
    log.info("federated query", extra={"query_id": query_id, "datasets": [r.id for r in used],
                                       "rows": len(rows), "truncated": truncated})
    return {"query_id": query_id,
            "columns": [{"name": d[0], "type": _column_type(d[1])} for d in description],
            "rows": [[_json_value(v) for v in row] for row in rows], "row_count": len(rows),
            "truncated": truncated, "datasets": datasets}
