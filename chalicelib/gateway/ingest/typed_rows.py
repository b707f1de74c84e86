"""A sync's incoming rows as one typed row relation, built natively where the source allows it.

CSV objects (``sources.CsvFile``) are never copied into a text table: the type the dataset already has
for a column, or else DuckDB's sniffer (``sniff_csv``), proposes each column's type, and ONE validation
aggregate over the file (DuckDB's CSV reader, every value as text) checks each proposal against the
project's typing rules (``normalize.infer`` written as SQL), so a column gets exactly the type those rules
give; where the two differ (a proposal a later value breaks, a text column the rules would type), the rules
win. Typing, keying and the change hash are SQL too, read straight from the file by the snapshot writer's
single ``COPY (SELECT ... ORDER BY ...)`` (see ``storage.write_snapshot``): no Python work per row, no
intermediate table. JSON Lines and Parquet objects (the same ``CsvFile`` with another ``format``) become a
table of each member's text and JSON type, typed by the same rules for JSON values (``_load_json``). Rows
that readers hand over as ``Record`` objects (DynamoDB and HTTP through a ``RecordSpool``, documents, an
object the native reader refuses) are coerced in Python and streamed to DuckDB as JSON lines.

The result is ``Stage.incoming_sql``: a query of ``_key``, ``_source``, ``_hash``, the schema's columns and
``_ord`` (row order; the last row of the last object wins per key). ``Stage.materialize`` turns it into
table ``incoming`` (one row per key) for the writers that read it more than once. DuckDB runs on one
thread with a memory limit and spills to a directory of its own, so memory stays bounded whatever the row
count (see ``docs/architecture.md``).
"""
from __future__ import annotations

import atexit
import csv
import itertools
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import process_state
from chalicelib.gateway import storage
from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.ingest.sources import Batch, CsvFile, Record, RecordSpool, missing_key, resolve_columns
from chalicelib.gateway.storage import sql_literal
from chalicelib.gateway.vocabulary import DUCKDB_TYPES

MEMORY_LIMIT = "160MB"  # DuckDB's share of the workers function's 512 MB; the rest spills to /tmp
THREADS = 1  # a 512 MB Lambda has about a third of a vCPU
SNIFF_ROWS = 10_000  # a column found to be text in its first rows is text: the rest is not inspected
ORD_SHIFT = 40  # row order: (object position << ORD_SHIFT) + row number

# normalize.INT_RE / FLOAT_RE / DATE_RE / TS_RE for RE2 (full match)
_INT = r"-?(?:0|[1-9]\d{0,17})"
_FLOAT = r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+"
_DATE = r"\d{4}-\d{2}-\d{2}"
# TS_RE with the ranges ``datetime.fromisoformat`` checks (the day is checked by a DATE cast)
_TS = r"\d{4}-\d{2}-\d{2}[T ](?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d{1,6})?)?(?:Z|z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?"
_DATE_OR_TS = _DATE + "(?:" + _TS[len(_DATE):] + ")?"
_CODES = {1: "INTEGER", 2: "FLOAT", 3: "BOOLEAN", 4: "DATE", 5: "TIMESTAMP", 6: "STRING"}
_PLAIN_JSON = r"[ !#-\[\]-~]*"  # printable ASCII without quote or backslash: json.dumps adds only quotes
# stops the snapshot writer where a sampled object's value breaks its sample's typing (``_observe_sampled``)
_REFUTED = "error('a value past the sniffer''s sample refutes its typing')"


@dataclass
class Stage:
    """A sync's scratch directory and DuckDB connection."""

    con: Any
    workdir: str
    rows_read: int = 0
    incoming_sql: str | None = None  # the typed rows (``Incoming.build``); keys may repeat when ``may_repeat``
    incoming_parts: list[tuple[str, int]] = field(default_factory=list)  # its parts: (query, rows), in order
    may_repeat: bool = False
    incoming_rows: int | None = None  # rows of table ``incoming`` once materialized (unique keys)
    _tmp: Any = field(default=None, repr=False)
    _catalog: str = ""  # the stage's own catalog of ``_database`` (none: a connection of its own)
    _database: Any = field(default=None, repr=False)

    def materialize(self) -> int:
        """Table ``incoming`` from ``incoming_sql``, one row per key (the last by ``_ord``); its row count.
        Idempotent."""
        if self.incoming_rows is not None:
            return self.incoming_rows
        con = self.con
        con.execute(f"CREATE TABLE incoming AS {self.incoming_sql}")
        total = distinct = con.execute("SELECT count(*) FROM incoming").fetchone()[0]
        if self.may_repeat:
            distinct = con.execute("SELECT count(DISTINCT _key) FROM incoming").fetchone()[0]
        if total != distinct:  # the same key in several rows: the last one wins
            con.execute("CREATE TABLE deduped AS SELECT * FROM incoming "
                        "QUALIFY row_number() OVER (PARTITION BY _key ORDER BY _ord DESC) = 1")
            con.execute("DROP TABLE incoming")
            con.execute("ALTER TABLE deduped RENAME TO incoming")
        self.incoming_rows = int(distinct)
        return self.incoming_rows

    def close(self) -> None:
        """Drop the stage's catalog (its tables and their spilled blocks) and delete its directory."""
        try:
            if self._database is not None:
                self.con.execute("USE memory")
                self.con.execute(f"DETACH {self._catalog}")
        except Exception:  # noqa: BLE001 - the stage's work is over either way
            _forget_database(self._database)  # a database that cannot drop a stage's catalog is not reused
        finally:
            try:
                self.con.close()
            finally:
                if self._tmp is not None:
                    self._tmp.cleanup()


# The process's sync DuckDB, created at its first sync: connecting costs about as much as a small
# incremental sync's whole DuckDB work, so each stage takes a connection of it with a private in-memory
# catalog instead (dropped when the stage closes). Its settings are database-wide: one thread, the memory
# cap (shared when a local process runs several syncs at once), UTC, and spilling to a directory of its own.
_DATABASE: dict[str, Any] = {}
_DATABASE_LOCK = threading.Lock()
_CATALOGS = itertools.count()


def _database() -> Any:
    with _DATABASE_LOCK:
        db = _DATABASE.get("db")
        if db is None:
            db = storage.connect(tempfile.mkdtemp(prefix="gwduck-"))
            for stmt in (f"SET memory_limit = '{MEMORY_LIMIT}'", f"SET threads = {THREADS}",
                         "SET preserve_insertion_order = true", "SET TimeZone = 'UTC'"):
                db.execute(stmt)
            from duckdb import sqltypes  # noqa: PLC0415

            db.create_function("py_json_str", lambda s: json.dumps(s), [sqltypes.VARCHAR], sqltypes.VARCHAR)
            _DATABASE["db"] = db
        return db


def _forget_database(db: Any = None) -> None:
    """The next stage opens a new database (``db``: only if it is still the current one)."""
    with _DATABASE_LOCK:
        if db is None or _DATABASE.get("db") is db:
            _DATABASE.pop("db", None)


def _close_database() -> None:
    """At exit: close the database before the interpreter tears its bindings down."""
    with _DATABASE_LOCK:
        db = _DATABASE.pop("db", None)
    if db is not None:
        db.close()


process_state.enrol(f"{__name__}._DATABASE", _forget_database, derived=True)
atexit.register(_close_database)


def open_stage() -> Stage:
    """A new scratch directory and a connection of the process's sync DuckDB, in a catalog of its own (a
    database that refuses the catalog, say after a fatal error, is replaced once)."""
    catalog = f"stage{next(_CATALOGS)}"
    for attempt in range(2):
        db, con = _database(), None
        try:
            con = db.cursor()
            con.execute(f"ATTACH ':memory:' AS {catalog}")
            con.execute(f"USE {catalog}")
            break
        except Exception:
            if con is not None:
                con.close()
            _forget_database(db)
            if attempt:
                raise
    tmp = tempfile.TemporaryDirectory(prefix="gwsync-")
    return Stage(con, tmp.name, _tmp=tmp, _catalog=catalog, _database=db)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _category(v: str) -> str:
    """SQL: the ``_CODES`` code of ``normalize.infer(v, untyped=True)`` for a text value (NULL for null).
    Cheap tests first: a value that cannot start a number, boolean or date is text at once."""
    return (f"CASE WHEN {v} IS NULL THEN NULL WHEN NOT contains('-.0123456789tTfF', left({v}, 1)) THEN 6 "
            f"WHEN regexp_full_match({v}, {sql_literal(_INT)}) THEN 1 WHEN regexp_full_match({v}, {sql_literal(_FLOAT)}) THEN 2 "
            f"WHEN lower({v}) IN ('true', 'false') THEN 3 "
            f"WHEN length({v}) < 10 OR try_cast(left({v}, 10) AS DATE) IS NULL THEN 6 "
            f"WHEN length({v}) = 10 THEN CASE WHEN regexp_full_match({v}, {sql_literal(_DATE)}) THEN 4 ELSE 6 END "
            f"WHEN regexp_full_match({v}, {sql_literal(_TS)}) THEN 5 ELSE 6 END")


def _is(v: str, typ: str) -> str:
    """SQL: whether a non-null text value's ``_category`` lies within what widens to ``typ``."""
    date_ok = f"try_cast(left({v}, 10) AS DATE) IS NOT NULL"
    return {
        "INTEGER": f"regexp_full_match({v}, {sql_literal(_INT)})",
        "FLOAT": f"regexp_full_match({v}, {sql_literal(_FLOAT)})",  # (every INTEGER value matches it too)
        "BOOLEAN": f"lower({v}) IN ('true', 'false')",
        "DATE": f"(length({v}) = 10 AND regexp_full_match({v}, {sql_literal(_DATE)}) AND {date_ok})",
        "TIMESTAMP": f"({date_ok} AND ((length({v}) = 10 AND regexp_full_match({v}, {sql_literal(_DATE)})) "
                     f"OR regexp_full_match({v}, {sql_literal(_TS)})))",
    }[typ]


def _accepts(v: str, typ: str) -> str:
    """SQL: ``_is`` for a value that is also cast to ``typ`` (a DATE or TIMESTAMP whose day does not exist
    fails the cast instead)."""
    if typ == "DATE":
        return f"(length({v}) = 10 AND regexp_full_match({v}, {sql_literal(_DATE)}))"
    if typ == "TIMESTAMP":
        return f"regexp_full_match({v}, {sql_literal(_DATE_OR_TS)})"
    if typ == "INTEGER":  # ``_INT`` but "-0", without a regular expression: the integer's own text, 18 digits at most
        return (f"(length({v}) <= CASE WHEN starts_with({v}, '-') THEN 19 ELSE 18 END "
                f"AND CAST(TRY_CAST({v} AS BIGINT) AS VARCHAR) = {v})")
    return _is(v, typ)


def _type_of(mask: int | None) -> str | None:
    typ = None
    for code, name in _CODES.items():
        if mask and mask & (1 << code):
            typ = name if typ is None else normalize.widen(typ, name)
    return typ


def _typed(v: str, typ: str) -> str:
    """SQL: a text value as the column type (``normalize.coerce`` for text)."""
    if typ == "INTEGER":
        return f"CAST({v} AS BIGINT)"
    if typ == "FLOAT":
        return f"CAST({v} AS DOUBLE)"
    if typ == "BOOLEAN":
        return f"(lower({v}) = 'true')"
    if typ == "TIMESTAMP":  # with an offset: to UTC; else as written (the stage's time zone is UTC)
        return f"CAST(CAST(CASE WHEN suffix({v}, 'z') THEN rtrim({v}, 'z') ELSE {v} END AS TIMESTAMPTZ) AS TIMESTAMP)"
    if typ == "DATE":
        return f"CAST(left({v}, 10) AS DATE)"
    if typ == "JSON":
        return f"py_json_str({v})"
    return v


def _json_str(v: str) -> str:
    """SQL: ``json.dumps(v)`` for a text value (Python only for values needing escapes)."""
    return f"CASE WHEN regexp_full_match({v}, {sql_literal(_PLAIN_JSON)}) THEN '\"' || {v} || '\"' ELSE py_json_str({v}) END"

@dataclass
class _Native:
    file: CsvFile
    scan: str  # a table expression of the object's rows: columns ``c<i>`` (text), file order
    headers: list[str]
    rows: int
    json_kinds: list[set[str]] | None = None  # JSON Lines/Parquet: each column's JSON value types (``t<i>``)
    proposed: list[str | None] | None = None  # CSV: the proposed type per column (project names; ``_proposals``)
    key_missing: bool = False  # CSV: some row has no value for part of the primary key
    # CSV typed from its sample (``_observe_sampled``): the proposal each column's values are checked against
    # as the snapshot writer reads them (``rows`` is then unknown until the rows are written)
    checks: dict[str, str] | None = None

    @property
    def planned_rows(self) -> int:
        """Its rows, or an estimate from its size while they are unknown (to plan the writer's runs)."""
        return self.rows if self.rows >= 0 else _estimate_rows(self.file.path)

    @property
    def numbered(self) -> str:
        """``scan`` with ``_rn``, the row's position from 0."""
        if self.json_kinds is not None:
            return f"(SELECT *, rowid AS _rn FROM {self.scan})"
        return f"(SELECT *, row_number() OVER () - 1 AS _rn FROM {self.scan})"


def _headers(path: str, delimiter: str) -> list[str] | None:
    """The header record as Python's csv module reads it (None: not UTF-8)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            return next(csv.reader(fh, delimiter=delimiter), None) or []
    except UnicodeDecodeError:
        return None


def _dialect(f: CsvFile) -> str:
    return f"{sql_literal(f.path)}, delim = {sql_literal(f.delimiter)}, quote = '\"', escape = '\"', header = true"


# DuckDB's sniffed types as the project's (None: no proposal, the full rules decide)
_SNIFFED = {"BIGINT": "INTEGER", "INTEGER": "INTEGER", "SMALLINT": "INTEGER", "TINYINT": "INTEGER",
            "DOUBLE": "FLOAT", "FLOAT": "FLOAT", "BOOLEAN": "BOOLEAN", "DATE": "DATE", "TIMESTAMP": "TIMESTAMP",
            "TIMESTAMP WITH TIME ZONE": "TIMESTAMP", "VARCHAR": "STRING"}


def _sniff(stage: Stage, f: CsvFile, width: int) -> list[str | None]:
    """DuckDB's type proposal for each of the ``width`` columns (from its sample of the file)."""
    import duckdb  # noqa: PLC0415

    try:
        found = stage.con.execute(f"SELECT Columns FROM sniff_csv({_dialect(f)}, sample_size = {SNIFF_ROWS})"
                                  ).fetchone()[0]
    except duckdb.Error:
        return [None] * width
    if len(found) != width:
        return [None] * width
    return [_SNIFFED.get(str(c["type"])) for c in found]


def _load(stage: Stage, f: CsvFile, n: int) -> _Native | None:
    """The object as a native part, or None when the native reader cannot read it exactly as the row-by-row
    reader would (the caller falls back to records). A CSV's rows stay in the file."""
    import duckdb  # noqa: PLC0415

    if f.format != "csv":
        try:
            return _load_json(stage, f, n)
        except duckdb.Error:
            for t in (f"raw_{n}", f"json_{n}"):
                stage.con.execute(f"DROP TABLE IF EXISTS {t}")
            return None
    headers = _headers(f.path, f.delimiter)
    if headers is None or len(set(headers)) != len(headers):
        return None
    if not headers:
        return _Native(f, "(SELECT 1 AS _none WHERE false)", [], 0)
    cols = "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(headers))) + "}"
    # (the stage's one thread reads in file order; ``parallel = false`` would buffer the whole file)
    scan = f"read_csv({_dialect(f)}, auto_detect = false, null_padding = true, strict_mode = true, columns = {cols})"
    return _Native(f, scan, headers, -1)


# DuckDB column types whose ``to_json`` rendering reads back as the value Python's Parquet reader gives
_PARQUET_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
                            "DOUBLE", "BOOLEAN", "VARCHAR", "DATE", "TIMESTAMP"})
_JSON_KINDS = frozenset({"BIGINT", "UBIGINT", "DOUBLE", "BOOLEAN", "VARCHAR"})  # scalars (objects/arrays: JSON)


def _pointer(name: str) -> str:
    """A JSON pointer to the top-level member ``name``."""
    return sql_literal("/" + name.replace("~", "~0").replace("/", "~1"))


def _load_json(stage: Stage, f: CsvFile, n: int) -> _Native | None:
    """A JSON Lines or Parquet object as table ``raw_<n>``: per member ``c<i>`` its text (a string's value,
    else its JSON text) and ``t<i>`` its JSON type; None (records instead) for anything the native rules
    would type or render otherwise than the row-by-row reader: a JSON array file, a non-object line,
    nested or huge values, Parquet types other than ``_PARQUET_TYPES``, duplicate member names."""
    con = stage.con
    if f.format == "parquet":
        types = con.execute("SELECT column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))", [f.path]).fetchall()
        if not all(t[0] in _PARQUET_TYPES for t in types):
            return None
        con.execute(f"CREATE TABLE json_{n} AS SELECT CAST(to_json(t) AS JSON) AS json FROM read_parquet(?) t", [f.path])
    else:
        with open(f.path, "rb") as fh:
            if fh.read(64).lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
                return None  # a JSON array of objects: the row-by-row reader's
        con.execute(f"CREATE TABLE json_{n} AS SELECT json FROM read_ndjson_objects(?)", [f.path])
    src = f"json_{n}"
    if con.execute(f"SELECT count(*) FROM {src} WHERE json_type(json) <> 'OBJECT'").fetchone()[0]:
        return None
    headers = [r[0] for r in con.execute(
        f"SELECT k FROM (SELECT rowid AS r, unnest(json_keys(json)) AS k, "
        f"generate_subscripts(json_keys(json), 1) AS p FROM {src}) GROUP BY k ORDER BY min(r), arg_min(p, r)").fetchall()]
    if con.execute(f"SELECT count(*) FROM {src} WHERE len(json_keys(json)) <> len(list_distinct(json_keys(json)))"
                   ).fetchone()[0]:
        return None
    table = f"raw_{n}"
    cols = [f"json_extract_string(json, {_pointer(h)}) AS c{i}, json_type(json, {_pointer(h)}) AS t{i}"
            for i, h in enumerate(headers)]
    con.execute(f"CREATE TABLE {table} AS SELECT {', '.join(cols) or '1 AS _none'} FROM {src} ORDER BY rowid")
    con.execute(f"DROP TABLE {src}")
    rows = int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    kinds: list[set[str]] = []
    if headers:
        found = con.execute("SELECT " + ", ".join(f"list(DISTINCT t{i})" for i in range(len(headers)))
                            + f" FROM {table}").fetchone()
        kinds = [{k for k in ks if k not in (None, "NULL")} for ks in found]
    if any(not k <= _JSON_KINDS for k in kinds):
        return None
    pk = f.primary_key or []
    pk_cols = pk if all(k in headers for k in pk) else resolve_columns(pk, headers)
    if any(kinds[headers.index(c)] - {"BIGINT", "UBIGINT", "VARCHAR"} for c in pk_cols if c in headers):
        return None  # a key of booleans or floats: ``str()`` of the Python value, not its JSON text
    return _Native(f, table, headers, rows, kinds)


def _json_category(v: str, t: str) -> str:
    """SQL: the ``_CODES`` code of ``normalize.infer(value, untyped=False)`` for a JSON value (text ``v``,
    JSON type ``t``): numbers by their JSON type (an integer beyond 64 bits is text), strings by the date
    and timestamp rules only."""
    integer = f"CASE WHEN try_cast({v} AS BIGINT) IS NOT NULL THEN 1 ELSE 6 END"
    return (f"CASE WHEN {v} IS NULL THEN NULL WHEN {t} IN ('BIGINT', 'UBIGINT') THEN {integer} "
            f"WHEN {t} = 'DOUBLE' THEN CASE WHEN regexp_matches({v}, '[.eE]') THEN 2 ELSE {integer} END "
            f"WHEN {t} = 'BOOLEAN' THEN 3 "
            f"WHEN length({v}) < 10 OR try_cast(left({v}, 10) AS DATE) IS NULL THEN 6 "
            f"WHEN length({v}) = 10 THEN CASE WHEN regexp_full_match({v}, {sql_literal(_DATE)}) THEN 4 ELSE 6 END "
            f"WHEN regexp_full_match({v}, {sql_literal(_TS)}) THEN 5 ELSE 6 END")


def _json_typed(v: str, t: str, typ: str) -> str:
    """SQL: a JSON value as the column type (``normalize.coerce``): text renderings of numbers and
    booleans as Python's ``str``/``json.dumps`` give them."""
    number = f"CAST(CAST({v} AS DOUBLE) AS VARCHAR)"
    if typ == "STRING":
        return f"CASE WHEN {t} = 'DOUBLE' AND regexp_matches({v}, '[.eE]') THEN {number} ELSE {v} END"
    if typ == "JSON":
        return (f"CASE WHEN {t} = 'VARCHAR' THEN {_json_str(v)} "
                f"WHEN {t} = 'DOUBLE' AND regexp_matches({v}, '[.eE]') THEN {number} ELSE {v} END")
    return _typed(v, typ)


def _json_sample(value: str | None, kind: str | None) -> Any:
    if value is None or kind == "VARCHAR":
        return value
    if kind == "BOOLEAN":
        return value == "true"
    try:
        return int(value)
    except ValueError:
        return float(value)


def _observe_json(stage: Stage, part: _Native, observer: normalize.Observer) -> None:
    if not part.rows:
        return
    con, t = stage.con, part.scan
    n = len(part.headers)
    got = con.execute("SELECT " + ", ".join([f"count(c{i})" for i in range(n)]
                                            + [f"bit_or(1 << {_json_category(f'c{i}', f't{i}')})" for i in range(n)])
                      + f" FROM {t}").fetchone()
    for i, h in enumerate(part.headers):
        samples: list[Any] = []
        if h not in observer.by_source:
            samples = [_json_sample(v, k) for v, k in con.execute(
                f"SELECT c{i}, t{i} FROM {t} WHERE c{i} IS NOT NULL ORDER BY rowid LIMIT 200").fetchall()]
        observer.add_column(h, _type_of(got[n + i]), part.rows, got[i] < part.rows, samples)
    observer.add_count(part.rows)

def _pk_columns(part: _Native) -> list[str]:
    pk = part.file.primary_key or []
    return pk if all(k in part.headers for k in pk) else resolve_columns(pk, part.headers)


def _estimate_rows(path: str) -> int:
    """A file's rows from the line length of its first MB (quoted line breaks make it an estimate)."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 20)
    return max(1, round(os.path.getsize(path) * head.count(b"\n") / max(1, len(head))))


def _observe_sampled(stage: Stage, part: _Native, observer: normalize.Observer, cols: list[str], known: set[str],
                     guess: dict[str, str]) -> bool:
    """The object typed from the sniffer's sample alone, when the full rules give each proposal exactly on
    it and the file runs past it: the rest of the file is then checked as the snapshot writer reads it
    (``_select_native``: a value the proposal refutes, or a missing key, stops the write and the sync is
    typed again by the exact aggregate). Nulls and the row count come from the written rows
    (``Incoming.settle``). False (nothing fed) when the sample does not decide."""
    con = stage.con
    got = con.execute("SELECT " + ", ".join(["count(*)"] + [f"bit_or(1 << {_category(c)})" for c in guess])
                      + f" FROM (SELECT {', '.join(guess) or '1'} FROM {part.scan} LIMIT {SNIFF_ROWS})").fetchone()
    if got[0] < SNIFF_ROWS or any(_type_of(m) != typ for m, typ in zip(got[1:], guess.values(), strict=True)):
        return False  # the whole file is in the sample (exact at once), or the sample is narrower or wider
    part.checks = dict(guess)
    for c, h in zip(cols, part.headers, strict=True):
        samples: list[Any] = []
        if h not in observer.by_source:
            samples = [r[0] for r in con.execute(f"SELECT {c} FROM {part.scan} WHERE {c} IS NOT NULL LIMIT 200").fetchall()]
        observer.add_column(h, "STRING" if c in known else guess[c], 0, False, samples)
    return True


def _proposals(stage: Stage, part: _Native, observer: normalize.Observer) -> list[str | None]:
    """Each column's proposed type: the one the dataset (or an earlier object of this batch) already has,
    else DuckDB's sniffer's (which is then asked). A proposal only saves work: the validation aggregate
    decides every column exactly whichever proposal it checks (a refuted one gets the full rules)."""
    prior = [observer.type_of(h) for h in part.headers]
    if all(prior):
        return prior
    return [p or s for p, s in zip(prior, _sniff(stage, part.file, len(part.headers)), strict=True)]


def _observe_native(stage: Stage, part: _Native, observer: normalize.Observer, sampled: bool = False) -> None:
    """Types, nulls and samples of the object's columns, fed to ``observer``. For a CSV: the proposals
    (``_proposals``) checked by one aggregate over the file (a proposal it refutes, or a column without one,
    gets the full rules), its row count and whether a primary key value is missing. ``sampled``: a CSV
    that runs past the sniffer's sample may be typed from it (``_observe_sampled``)."""
    if part.json_kinds is not None:
        _observe_json(stage, part, observer)
        return
    if not part.headers:
        return
    con, t = stage.con, part.scan
    cols = [f"c{i}" for i in range(len(part.headers))]
    proposed = part.proposed = part.proposed or _proposals(stage, part, observer)
    known = {c for c, h in zip(cols, part.headers, strict=True) if observer.type_of(h) == "STRING"}
    # a text proposal: text by our rules too when the sniffer's sample already widens to STRING
    texts = [c for c, p in zip(cols, proposed, strict=True) if p == "STRING" and c not in known]
    if texts:
        got = con.execute("SELECT " + ", ".join(f"bit_or(1 << {_category(c)})" for c in texts)
                          + f" FROM (SELECT {', '.join(texts)} FROM {t} LIMIT {SNIFF_ROWS})").fetchone()
        known.update(c for c, m in zip(texts, got, strict=True) if _type_of(m) == "STRING")
    guess = {c: p for c, p in zip(cols, proposed, strict=True) if c not in known and p not in (None, "STRING")}
    slow = [c for c in cols if c not in known and c not in guess]
    if sampled and not slow and _observe_sampled(stage, part, observer, cols, known, guess):
        return
    index = {h: f"c{i}" for i, h in enumerate(part.headers)}
    keys = [index[k] for k in _pk_columns(part) if k in index] if part.file.primary_key else []
    # the validation aggregate: one pass over the file
    items = ["count(*)"] + [f"count({c})" for c in cols]
    items += [f"bool_and({c} IS NULL OR {_is(c, typ)})" for c, typ in guess.items()]
    # whether every value of a column its check accepted is of the narrower type (a FLOAT without '.', 'e'
    # or 'E' matches ``_INT`` unless it has more than 18 digits)
    narrower = {"FLOAT": "NOT (contains(#, '.') OR contains(#, 'e') OR contains(#, 'E')) "
                         "AND length(#) <= 18 + CAST(starts_with(#, '-') AS INTEGER)",
                "TIMESTAMP": "length(#) = 10"}
    items += [f"bool_and({narrower[typ].replace('#', c)})" if typ in narrower else "NULL" for c, typ in guess.items()]
    items += [f"bit_or(1 << {_category(c)})" for c in slow]
    items.append("bool_or(" + " OR ".join(f"({c} IS NULL OR {c} = '')" for c in keys) + ")" if keys else "false")
    got = con.execute("SELECT " + ", ".join(items) + f" FROM {t}").fetchone()
    part.rows = int(got[0])
    counts = got[1:1 + len(cols)]
    at = 1 + len(cols)
    checks = got[at:at + len(guess)]
    narrow = got[at + len(guess):at + 2 * len(guess)]
    masks: dict[str, int | None] = {c: 1 << 6 for c in known}
    masks.update(zip(slow, got[at + 2 * len(guess):at + 2 * len(guess) + len(slow)], strict=True))
    part.key_missing = bool(got[-1])
    code = {name: c for c, name in _CODES.items()}
    redo = []
    present = dict(zip(cols, counts, strict=True))
    for (c, typ), ok, only_narrow in zip(guess.items(), checks, narrow, strict=True):
        if not present[c]:  # no value at all
            masks[c] = None
        elif ok:
            name = {"FLOAT": "INTEGER", "TIMESTAMP": "DATE"}[typ] if only_narrow else typ
            masks[c] = 1 << code[name]
        else:  # the proposal is refuted by a value the sniffer did not see: the full rules decide
            redo.append(c)
    if redo:
        masks.update(zip(redo, con.execute("SELECT " + ", ".join(f"bit_or(1 << {_category(c)})" for c in redo)
                                           + f" FROM {t}").fetchone(), strict=True))
    for i, (c, h) in enumerate(zip(cols, part.headers, strict=True)):
        samples: list[Any] = []
        if h not in observer.by_source and counts[i]:  # a new column: classified from its first values
            samples = [r[0] for r in con.execute(f"SELECT {c} FROM {t} WHERE {c} IS NOT NULL LIMIT 200").fetchall()]
        observer.add_column(h, _type_of(masks[c]), part.rows, counts[i] < part.rows, samples)
    observer.add_count(part.rows)


def _check_key(stage: Stage, part: _Native) -> list[str]:
    """The primary key's columns (``c<i>``) in the object; raises for the first row missing a value."""
    pk = part.file.primary_key or []
    pk_cols = _pk_columns(part)
    index = {h: f"c{i}" for i, h in enumerate(part.headers)}
    if not part.rows:
        return []
    if any(col not in index for col in pk_cols):
        raise missing_key(part.file.source, 1, [k for k, col in zip(pk, pk_cols, strict=True) if col not in index])
    cols = [index[col] for col in pk_cols]
    if part.json_kinds is None and not part.key_missing:
        return cols  # the validation aggregate found every key value
    gone = [f"({c} IS NULL OR {c} = '')" for c in cols]  # as the row-by-row reader: null or empty is missing
    hit = stage.con.execute(f"SELECT _rn + 1, {', '.join(gone)} FROM {part.numbered} "
                            f"WHERE {' OR '.join(gone)} ORDER BY _rn LIMIT 1").fetchone()
    if hit:
        raise missing_key(part.file.source, int(hit[0]), [k for k, gone in zip(pk, hit[1:], strict=True) if gone])
    return cols


def _digest(schema: list[dict[str, Any]]) -> str:
    """SQL: a row's change hash, a ``UBIGINT``: DuckDB's 64-bit hash over its typed values (a collision between
    two versions of one key's row is ~2^-64; snapshots hashed otherwise just count as changed once)."""
    if not schema:
        return "CAST(0 AS UBIGINT)"
    return f"hash({', '.join(_q(f['name']) for f in schema)})"


def _ordered(schema: list[dict[str, Any]], inner: str) -> str:
    """SQL: the rows of ``inner`` (typed columns, ``_key``, ``_source``, ``_ord``) with their hash, columns in
    the order every part of ``incoming_sql`` shares."""
    names = ", ".join(["_key", "_source", "_hash", *(_q(f["name"]) for f in schema), "_ord"])
    return f"SELECT {names} FROM (SELECT t.*, {_digest(schema)} AS _hash FROM ({inner}) t)"


def _select_native(stage: Stage, part: _Native, schema: list[dict[str, Any]], names: dict[str, str]) -> str | None:
    """SQL: the object's typed, keyed and hashed rows (read from the file itself for a CSV)."""
    if not part.rows:
        return None
    key_cols = _check_key(stage, part) if part.file.primary_key else []
    checks = part.checks or {}
    by_col = {names[h]: i for i, h in enumerate(part.headers)}
    types = {f"c{i}": next(f["type"] for f in schema if f["name"] == names[h]) for i, h in enumerate(part.headers)}
    items = []
    for f in schema:
        typ = DUCKDB_TYPES[f["type"]]
        i = by_col.get(f["name"])
        if i is None:
            items.append(f"CAST(NULL AS {typ}) AS {_q(f['name'])}")
            continue
        value = (_typed(f"c{i}", f["type"]) if part.json_kinds is None else
                 _json_typed(f"c{i}", f"t{i}", f["type"]))
        if f"c{i}" in checks:
            value = f"CASE WHEN c{i} IS NULL OR {_accepts(f'c{i}', checks[f'c{i}'])} THEN {value} ELSE {_REFUTED} END"
        items.append(f"CAST({value} AS {typ}) AS {_q(f['name'])}")
    if key_cols:
        # a CSV value of a column typed other than text matched that type's ASCII pattern: no escaping needed
        pieces: list[tuple[bool, str]] = [(True, "[")]  # (literal?, text or SQL), adjacent literals joined
        for n, c in enumerate(key_cols):
            pieces += [(True, ", ")] if n else []
            if part.json_kinds is None and types[c] not in ("STRING", "JSON"):
                pieces += [(True, '"'), (False, c), (True, '"')]
            else:
                pieces.append((False, _json_str(c)))
        pieces.append((True, "]"))
        key = _concat(pieces)
        if part.checks is not None:
            missing = " OR ".join(f"{c} IS NULL OR {c} = ''" for c in key_cols)
            key = f"CASE WHEN {missing} THEN {_REFUTED} ELSE {key} END"
    else:
        key = f"{sql_literal(part.file.source + '#')} || CAST(_rn + 1 AS VARCHAR)"
    order = part.file.order << ORD_SHIFT
    typed = ", ".join(items + [f"{order} + _rn AS _ord"])
    return _ordered(schema, f"SELECT {key} AS _key, {sql_literal(part.file.source)} AS _source, {typed} FROM {part.numbered}")


def _concat(pieces: list[tuple[bool, str]]) -> str:
    """SQL: the pieces (literal text, or SQL when the flag is False) concatenated, adjacent literals as one."""
    out: list[str] = []
    text: str | None = None
    for literal, piece in pieces:
        if literal:
            text = (text or "") + piece
            continue
        if text is not None:
            out.append(sql_literal(text))
            text = None
        out.append(piece)
    if text is not None:
        out.append(sql_literal(text))
    return " || ".join(out)


def _select_records(stage: Stage, records: Iterable[tuple[int, Record]], schema: list[dict[str, Any]],
                    names: dict[str, str]) -> tuple[str | None, int]:
    """Records coerced in Python, streamed to a JSON-lines file in the stage; SQL reading it back and its rows."""
    types = {f["name"]: f["type"] for f in schema}
    plan_of = {src: (col, types[col]) for src, col in names.items()}
    coerce = normalize.coerce
    path = os.path.join(stage.workdir, "records.jsonl")
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        for ord_, r in records:
            written += 1
            values: dict[str, Any] = {}
            for src_name, v in r.values.items():
                col, typ = plan_of[src_name]
                values[col] = coerce(v, typ)
            values["_key"], values["_source"], values["_ord"] = r.key, r.source, ord_
            fh.write(encode(values))
            fh.write("\n")
    if not written:
        os.remove(path)
        return None, 0
    loaded = {"_key": "VARCHAR", "_source": "VARCHAR", "_ord": "BIGINT",
              **{f["name"]: DUCKDB_TYPES[f["type"]] for f in schema}}
    struct = "{" + ", ".join(f"{sql_literal(n)}: '{t}'" for n, t in loaded.items()) + "}"
    return _ordered(schema, f"SELECT * FROM read_json({sql_literal(path)}, format = 'newline_delimited', "
                            f"columns = {struct}, maximum_object_size = 67108864)"), written


class Incoming:
    """The batch's rows in a stage: ``observe`` (sniffs and validates CSV objects, loads the others, feeds
    the schema observer) then ``build`` (``Stage.incoming_sql``, typed by the planned schema)."""

    def __init__(self, stage: Stage, batch: Batch, report: Callable[[int, int], None] | None = None) -> None:
        self.stage, self.batch, self.report = stage, batch, report
        self.parts: list[tuple[int, Any]] = []  # (order, _Native | list[(ord, Record)])

    def observe(self, observer: normalize.Observer, sampled: bool = False) -> None:
        """``sampled``: CSV objects past the sniffer's sample may be typed from it (``_observe_sampled``);
        the caller then calls ``settle`` with what the written rows say, and types the batch again
        without ``sampled`` if the writer was stopped."""
        import duckdb  # noqa: PLC0415

        batch = self.batch
        if isinstance(batch.records, RecordSpool):  # streamed twice (here and in ``build``), never held
            self.parts = [(-1, batch.records)]
            observer.add_rows((r.values, r.untyped) for r in batch.records)
            if self.report is not None:
                self.report(0, len(batch.records))
        unique: dict[str, tuple[int, Record]] = {}  # last record wins per key (as before)
        for i, rec in enumerate(batch.records if isinstance(batch.records, list) else ()):
            unique[rec.key] = ((batch.source_order.get(rec.source or "", -1) << ORD_SHIFT) + i, rec)
        groups: dict[int, list[tuple[int, Record]]] = {}
        for ord_, rec in unique.values():
            groups.setdefault(ord_ >> ORD_SHIFT, []).append((ord_, rec))
        self.parts += sorted(groups.items(), key=lambda p: p[0])
        for n, f in enumerate(batch.files):
            native = _load(self.stage, f, n)
            self.parts.append((f.order, native if native is not None else self._fallback(f)))
        self.parts.sort(key=lambda p: p[0])
        rows = len(batch.records)
        for objects, (order, part) in enumerate(self.parts, start=1):
            if isinstance(part, _Native):
                try:
                    _observe_native(self.stage, part, observer, sampled)
                except duckdb.Error:  # the CSV reader refused a row the sniffer did not see: row by row
                    part = self._fallback(part.file)
                    self.parts[objects - 1] = (order, part)
                else:
                    rows += max(part.rows, 0)
                    if self.report is not None:
                        self.report(objects, rows)
                    continue
            if isinstance(part, list):
                observer.add_rows((r.values, r.untyped) for _, r in part)
                if part and part[0][1].source in {f.source for f in batch.files}:
                    rows += len(part)
                    if self.report is not None:
                        self.report(objects, rows)
        self.stage.rows_read = rows

    @property
    def sampled(self) -> list[str]:
        """The sources typed from their sample (their rows and nulls are known once written)."""
        return [p.file.source for _, p in self.parts if isinstance(p, _Native) and p.checks is not None]

    def settle(self, schema: list[dict[str, Any]], rows_by_source: dict[str, int],
               null_columns: set[str]) -> list[dict[str, Any]]:
        """After the snapshot of a batch with ``sampled`` objects is written: their rows added to
        ``Stage.rows_read``, and the schema with every column that holds a null in the written rows
        nullable (what the exact aggregate would have said: a column missing from some rows is null there)."""
        self.stage.rows_read += sum(rows_by_source.get(source, 0) for source in self.sampled)
        return [dict(f, nullable=True) if f["name"] in null_columns and not f["nullable"] else f for f in schema]

    @staticmethod
    def _fallback(f: CsvFile) -> list[tuple[int, Record]]:
        return [((f.order << ORD_SHIFT) + i, r) for i, r in enumerate(f.fallback())]

    def build(self, schema: list[dict[str, Any]], names: dict[str, str]) -> None:
        """Set ``Stage.incoming_sql``: every part's typed rows (keys may repeat: see ``Stage.materialize``)."""
        selects: list[tuple[str, int]] = []
        records: list[Iterable[tuple[int, Record]]] = []
        for _, part in self.parts:
            if isinstance(part, _Native):
                sql = _select_native(self.stage, part, schema, names)
                if sql is not None:
                    selects.append((sql, part.planned_rows))
            elif isinstance(part, RecordSpool):
                records.append(((-1 << ORD_SHIFT) + i, r) for i, r in enumerate(part))
            else:
                records.append(part)
        sql, rows = _select_records(self.stage, itertools.chain.from_iterable(records), schema, names)
        if sql is not None:
            selects.append((sql, rows))
        if not selects:  # no rows: an empty relation of the right columns
            selects.append((_ordered(schema, "SELECT CAST(NULL AS VARCHAR) AS _key, CAST(NULL AS VARCHAR) AS _source, "
                                     + "".join(f"CAST(NULL AS {DUCKDB_TYPES[f['type']]}) AS {_q(f['name'])}, "
                                               for f in schema) + "CAST(NULL AS BIGINT) AS _ord WHERE false"), 0))
        self.stage.incoming_parts = selects
        self.stage.incoming_sql = " UNION ALL ".join(sql for sql, _ in selects)
        spooled = isinstance(self.batch.records, RecordSpool)  # not deduplicated while observed
        self.stage.may_repeat = spooled or any(f.primary_key for f in self.batch.files)  # keys from values
