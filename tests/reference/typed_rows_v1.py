"""The sync's typing path as it was before the sniffer/single-pass rewrite, kept as a test oracle only
(``tests/functional/gateway/test_sync_equivalence.py``). Not product code.

A sync's incoming rows as one typed DuckDB table, built natively where the source allows it.

CSV objects (``sources.CsvFile``) are parsed by DuckDB's CSV reader into all-text tables; their column
types are inferred by one aggregate per object (the rules of ``normalize.infer`` written as SQL, so a
value gets the same type either way), and typing, keying and the change hash are SQL too: no Python work
per row. JSON Lines and Parquet objects (the same ``CsvFile`` with another ``format``) become a table of
each member's text and JSON type, typed by the same rules for JSON values (``_load_json``). Rows that
readers hand over as ``Record`` objects (DynamoDB and HTTP through a ``RecordSpool``, documents, an object
the native reader refuses) are coerced in Python and streamed to DuckDB as JSON lines.

The result is table ``incoming``: ``_key``, ``_source``, ``_hash`` and the schema's columns, one row per
key (the last row of the last object wins). DuckDB runs on one thread with a memory limit and spills to
the stage's directory, so memory stays bounded whatever the row count (see ``docs/architecture.md``).
"""
from __future__ import annotations

import csv
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from chalicelib.gateway import storage
from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.ingest.sources import Batch, CsvFile, Record, RecordSpool, missing_key, resolve_columns
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
_CODES = {1: "INTEGER", 2: "FLOAT", 3: "BOOLEAN", 4: "DATE", 5: "TIMESTAMP", 6: "STRING"}
_PLAIN_JSON = r"[ !#-\[\]-~]*"  # printable ASCII without quote or backslash: json.dumps adds only quotes


@dataclass
class Stage:
    """A sync's scratch directory and DuckDB connection."""

    con: Any
    workdir: str
    rows_read: int = 0
    _tmp: Any = field(default=None, repr=False)

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()


def open_stage() -> Stage:
    tmp = tempfile.TemporaryDirectory(prefix="gwsync-")
    con = storage.connect(tmp.name)
    for stmt in (f"SET memory_limit = '{MEMORY_LIMIT}'", f"SET threads = {THREADS}",
                 "SET preserve_insertion_order = true", "SET TimeZone = 'UTC'"):
        con.execute(stmt)
    from duckdb import sqltypes  # noqa: PLC0415

    con.create_function("py_json_str", lambda s: json.dumps(s), [sqltypes.VARCHAR], sqltypes.VARCHAR)
    return Stage(con, tmp.name, _tmp=tmp)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _category(v: str) -> str:
    """SQL: the ``_CODES`` code of ``normalize.infer(v, untyped=True)`` for a text value (NULL for null).
    Cheap tests first: a value that cannot start a number, boolean or date is text at once."""
    return (f"CASE WHEN {v} IS NULL THEN NULL WHEN NOT contains('-.0123456789tTfF', left({v}, 1)) THEN 6 "
            f"WHEN regexp_full_match({v}, {_lit(_INT)}) THEN 1 WHEN regexp_full_match({v}, {_lit(_FLOAT)}) THEN 2 "
            f"WHEN lower({v}) IN ('true', 'false') THEN 3 "
            f"WHEN length({v}) < 10 OR try_cast(left({v}, 10) AS DATE) IS NULL THEN 6 "
            f"WHEN length({v}) = 10 THEN CASE WHEN regexp_full_match({v}, {_lit(_DATE)}) THEN 4 ELSE 6 END "
            f"WHEN regexp_full_match({v}, {_lit(_TS)}) THEN 5 ELSE 6 END")


def _is(v: str, typ: str) -> str:
    """SQL: whether a non-null text value's ``_category`` lies within what widens to ``typ``."""
    date_ok = f"try_cast(left({v}, 10) AS DATE) IS NOT NULL"
    return {
        "INTEGER": f"regexp_full_match({v}, {_lit(_INT)})",
        "FLOAT": f"(regexp_full_match({v}, {_lit(_INT)}) OR regexp_full_match({v}, {_lit(_FLOAT)}))",
        "BOOLEAN": f"lower({v}) IN ('true', 'false')",
        "DATE": f"(length({v}) = 10 AND regexp_full_match({v}, {_lit(_DATE)}) AND {date_ok})",
        "TIMESTAMP": f"({date_ok} AND ((length({v}) = 10 AND regexp_full_match({v}, {_lit(_DATE)})) "
                     f"OR regexp_full_match({v}, {_lit(_TS)})))",
    }[typ]


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
    if typ == "TIMESTAMP":  # with an offset: to UTC (slower); else as written (a trailing Z is UTC already)
        offset = (f"length({v}) > 10 AND (substr({v}, length({v}) - 5, 1) IN ('+', '-') "
                  f"OR substr({v}, length({v}) - 4, 1) IN ('+', '-'))")
        return (f"CASE WHEN {offset} THEN timezone('UTC', CAST({v} AS TIMESTAMPTZ)) "
                f"ELSE CAST(rtrim({v}, 'zZ') AS TIMESTAMP) END")
    if typ == "DATE":
        return f"CAST(left({v}, 10) AS DATE)"
    if typ == "JSON":
        return f"py_json_str({v})"
    return v


def _json_str(v: str) -> str:
    """SQL: ``json.dumps(v)`` for a text value (Python only for values needing escapes)."""
    return f"CASE WHEN regexp_full_match({v}, {_lit(_PLAIN_JSON)}) THEN '\"' || {v} || '\"' ELSE py_json_str({v}) END"


@dataclass
class _Native:
    file: CsvFile
    table: str
    headers: list[str]
    rows: int
    json_kinds: list[set[str]] | None = None  # JSON Lines/Parquet: each column's JSON value types (``t<i>``)


def _headers(path: str, delimiter: str) -> list[str] | None:
    """The header record as Python's csv module reads it (None: not UTF-8)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            return next(csv.reader(fh, delimiter=delimiter), None) or []
    except UnicodeDecodeError:
        return None


def _load(stage: Stage, f: CsvFile, n: int) -> _Native | None:
    """The CSV as an all-text table ``raw_<n>`` (columns ``c0``...), or None when the native reader
    cannot read it exactly as Python's csv module would (the caller falls back to records)."""
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
    table = f"raw_{n}"
    if not headers:
        return _Native(f, table, [], 0)
    cols = "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(headers))) + "}"
    try:
        stage.con.execute(
            f"CREATE TABLE {table} AS SELECT * FROM read_csv(?, delim = ?, quote = '\"', escape = '\"', header = true, "
            f"auto_detect = false, null_padding = true, strict_mode = true, parallel = false, columns = {cols})",
            [f.path, f.delimiter])
    except duckdb.Error:
        stage.con.execute(f"DROP TABLE IF EXISTS {table}")
        return None
    rows = stage.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    return _Native(f, table, headers, int(rows))


# DuckDB column types whose ``to_json`` rendering reads back as the value Python's Parquet reader gives
_PARQUET_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
                            "DOUBLE", "BOOLEAN", "VARCHAR", "DATE", "TIMESTAMP"})
_JSON_KINDS = frozenset({"BIGINT", "UBIGINT", "DOUBLE", "BOOLEAN", "VARCHAR"})  # scalars (objects/arrays: JSON)


def _pointer(name: str) -> str:
    """A JSON pointer to the top-level member ``name``."""
    return _lit("/" + name.replace("~", "~0").replace("/", "~1"))


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
            f"WHEN length({v}) = 10 THEN CASE WHEN regexp_full_match({v}, {_lit(_DATE)}) THEN 4 ELSE 6 END "
            f"WHEN regexp_full_match({v}, {_lit(_TS)}) THEN 5 ELSE 6 END")


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
    con, t = stage.con, part.table
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


def _observe_native(stage: Stage, part: _Native, observer: normalize.Observer) -> None:
    """Types, nulls and samples of the object's columns, fed to ``observer``."""
    if part.json_kinds is not None:
        _observe_json(stage, part, observer)
        return
    if not part.rows:
        return
    con, t = stage.con, part.table
    cols = [f"c{i}" for i in range(len(part.headers))]
    if part.rows > SNIFF_ROWS:
        sniff = con.execute("SELECT " + ", ".join(f"bit_or(1 << {_category(c)})" for c in cols)
                            + f" FROM (SELECT * FROM {t} LIMIT {SNIFF_ROWS})").fetchone()
    else:
        sniff = (None,) * len(cols)
    full = [c for c, h, m in zip(cols, part.headers, sniff, strict=True)
            if _type_of(m) != "STRING" and observer.type_of(h) != "STRING"]
    masks: dict[str, int | None] = {c: (1 << 6 if c not in full else None) for c in cols}
    # a column whose first rows gave one type: one test per value confirms it (else the full rules)
    guess = {c: _type_of(m) for c, m in zip(cols, sniff, strict=True) if c in full and _type_of(m) is not None}
    slow = [c for c in full if c not in guess]
    counts = con.execute("SELECT " + ", ".join([f"count({c})" for c in cols]
                                               + [f"bool_and({c} IS NULL OR {_is(c, guess[c])})" for c in guess]
                                               + [f"bit_or(1 << {_category(c)})" for c in slow]) + f" FROM {t}").fetchone()
    confirmed = dict(zip(guess, counts[len(cols):len(cols) + len(guess)], strict=True))
    masks.update(zip(slow, counts[len(cols) + len(guess):], strict=True))
    for c, ok in confirmed.items():
        if ok:
            masks[c] = 1 << next(code for code, name in _CODES.items() if name == guess[c])
    redo = [c for c, ok in confirmed.items() if not ok]
    if redo:
        masks.update(zip(redo, con.execute("SELECT " + ", ".join(f"bit_or(1 << {_category(c)})" for c in redo)
                                           + f" FROM {t}").fetchone(), strict=True))
    for i, (c, h) in enumerate(zip(cols, part.headers, strict=True)):
        samples: list[Any] = []
        if h not in observer.by_source:  # a new column: classified from its first values
            samples = [r[0] for r in con.execute(f"SELECT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY rowid LIMIT 200")
                       .fetchall()]
        observer.add_column(h, _type_of(masks[c]), part.rows, counts[i] < part.rows, samples)
    observer.add_count(part.rows)


def _check_key(stage: Stage, part: _Native) -> list[str]:
    """The primary key's columns (``c<i>``) in the object; raises for the first row missing a value."""
    pk = part.file.primary_key or []
    pk_cols = pk if all(k in part.headers for k in pk) else resolve_columns(pk, part.headers)
    index = {h: f"c{i}" for i, h in enumerate(part.headers)}
    if not part.rows:
        return []
    if any(col not in index for col in pk_cols):
        raise missing_key(part.file.source, 1, [k for k, col in zip(pk, pk_cols, strict=True) if col not in index])
    cols = [index[col] for col in pk_cols]
    gone = [f"({c} IS NULL OR {c} = '')" for c in cols]  # as the row-by-row reader: null or empty is missing
    hit = stage.con.execute(f"SELECT rowid + 1, {', '.join(gone)} FROM {part.table} "
                            f"WHERE {' OR '.join(gone)} ORDER BY rowid LIMIT 1").fetchone()
    if hit:
        raise missing_key(part.file.source, int(hit[0]), [k for k, gone in zip(pk, hit[1:], strict=True) if gone])
    return cols


def _spec(schema: list[dict[str, Any]]) -> dict[str, str]:
    return {"_key": "VARCHAR", "_source": "VARCHAR", "_hash": "VARCHAR",
            **{f["name"]: DUCKDB_TYPES[f["type"]] for f in schema}}


def _digest(schema: list[dict[str, Any]]) -> str:
    """SQL: a row's change hash: DuckDB's 64-bit hash over its typed values (a collision between two
    versions of one key's row is ~2^-64; snapshots hashed otherwise just count as changed once)."""
    if not schema:
        return "'0'"
    return f"CAST(hash({', '.join(_q(f['name']) for f in schema)}) AS VARCHAR)"


def _insert_native(stage: Stage, part: _Native, schema: list[dict[str, Any]], names: dict[str, str]) -> None:
    if not part.rows:
        return
    key_cols = _check_key(stage, part) if part.file.primary_key else []
    by_col = {names[h]: i for i, h in enumerate(part.headers)}
    items = []
    for f in schema:
        typ = DUCKDB_TYPES[f["type"]]
        i = by_col.get(f["name"])
        if i is None:
            items.append(f"CAST(NULL AS {typ}) AS {_q(f['name'])}")
            continue
        value = (_typed(f"c{i}", f["type"]) if part.json_kinds is None else
                 _json_typed(f"c{i}", f"t{i}", f["type"]))
        items.append(f"CAST({value} AS {typ}) AS {_q(f['name'])}")
    if key_cols:
        key = "'[' || " + " || ', ' || ".join(_json_str(c) for c in key_cols) + " || ']'"
    else:
        key = f"{_lit(part.file.source + '#')} || CAST(rowid + 1 AS VARCHAR)"
    order = part.file.order << ORD_SHIFT
    typed = ", ".join(items)
    stage.con.execute(f"INSERT INTO incoming BY NAME SELECT t.*, {_digest(schema)} AS _hash FROM "
                      f"(SELECT {key} AS _key, {_lit(part.file.source)} AS _source, {typed}, "
                      f"{order} + rowid AS _ord FROM {part.table}) t")
    stage.con.execute(f"DROP TABLE {part.table}")


def _insert_records(stage: Stage, records: Iterable[tuple[int, Record]], schema: list[dict[str, Any]],
                    names: dict[str, str]) -> None:
    """Records coerced in Python, streamed to a JSON-lines file and read by DuckDB."""
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
        return
    loaded = {"_key": "VARCHAR", "_source": "VARCHAR", "_ord": "BIGINT",
              **{f["name"]: DUCKDB_TYPES[f["type"]] for f in schema}}
    struct = "{" + ", ".join(f"{_lit(n)}: '{t}'" for n, t in loaded.items()) + "}"
    stage.con.execute(f"INSERT INTO incoming BY NAME SELECT t.*, {_digest(schema)} AS _hash FROM "
                      f"(SELECT * FROM read_json(?, format = 'newline_delimited', columns = {struct}, "
                      f"maximum_object_size = 67108864)) t", [path])
    os.remove(path)


class Incoming:
    """The batch's rows in a stage: ``observe`` (loads CSV objects, feeds the schema observer) then
    ``build`` (table ``incoming``, typed by the planned schema)."""

    def __init__(self, stage: Stage, batch: Batch, report: Callable[[int, int], None] | None = None) -> None:
        self.stage, self.batch, self.report = stage, batch, report
        self.parts: list[tuple[int, Any]] = []  # (order, _Native | list[(ord, Record)])

    def observe(self, observer: normalize.Observer) -> None:
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
            if native is None:
                recs = f.fallback()
                self.parts.append((f.order, [((f.order << ORD_SHIFT) + i, r) for i, r in enumerate(recs)]))
            else:
                self.parts.append((f.order, native))
        self.parts.sort(key=lambda p: p[0])
        rows = len(batch.records)
        for objects, (_, part) in enumerate(self.parts, start=1):
            if isinstance(part, _Native):
                _observe_native(self.stage, part, observer)
                rows += part.rows
                if self.report is not None:
                    self.report(objects, rows)
            elif isinstance(part, list):
                observer.add_rows((r.values, r.untyped) for _, r in part)
                if part and part[0][1].source in {f.source for f in batch.files}:
                    rows += len(part)
                    if self.report is not None:
                        self.report(objects, rows)
        self.stage.rows_read = rows

    def build(self, schema: list[dict[str, Any]], names: dict[str, str]) -> int:
        """Create table ``incoming``; returns its row count (unique keys)."""
        con = self.stage.con
        spec = {**_spec(schema), "_ord": "BIGINT"}
        con.execute("CREATE TABLE incoming (" + ", ".join(f"{_q(n)} {t}" for n, t in spec.items()) + ")")
        records: list[Iterable[tuple[int, Record]]] = []
        for _, part in self.parts:
            if isinstance(part, _Native):
                _insert_native(self.stage, part, schema, names)
            elif isinstance(part, RecordSpool):
                records.append(((-1 << ORD_SHIFT) + i, r) for i, r in enumerate(part))
            else:
                records.append(part)
        _insert_records(self.stage, itertools.chain.from_iterable(records), schema, names)
        total = distinct = con.execute("SELECT count(*) FROM incoming").fetchone()[0]
        spooled = isinstance(self.batch.records, RecordSpool)  # not deduplicated while observed
        if spooled or any(f.primary_key for f in self.batch.files):  # keys from values may repeat
            distinct = con.execute("SELECT count(DISTINCT _key) FROM incoming").fetchone()[0]
        if total != distinct:  # the same key in several rows: the last one wins
            con.execute("CREATE TABLE deduped AS SELECT * FROM incoming "
                        "QUALIFY row_number() OVER (PARTITION BY _key ORDER BY _ord DESC) = 1")
            con.execute("DROP TABLE incoming")
            con.execute("ALTER TABLE deduped RENAME TO incoming")
        return int(distinct)
