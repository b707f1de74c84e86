"""Objects a sync reads natively (CSV, JSON Lines, Parquet): loaded as a part of the stage and observed.

``load`` turns an object into a ``NativePart`` (a CSV's rows stay in the file; JSON Lines and Parquet become a
table of each member's text and JSON type), or None when only the row-by-row reader reads it exactly.
``observe`` feeds the schema observer each column's type, nulls and samples: for a CSV, DuckDB's sniffer (or
the dataset's types) proposes, one validation aggregate over the file decides (see ``typed_rows``).
"""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.ingest.sources import CsvFile, missing_key, resolve_columns
from chalicelib.gateway.ingest.type_rules_sql import CODES, category, is_of, json_category, type_of
from chalicelib.gateway.storage import sql_literal

if TYPE_CHECKING:
    from chalicelib.gateway.ingest.typed_rows import Stage

SNIFF_ROWS = 10_000  # a column found to be text in its first rows is text: the rest is not inspected


@dataclass
class NativePart:
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


def load(stage: Stage, f: CsvFile, n: int) -> NativePart | None:
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
        return NativePart(f, "(SELECT 1 AS _none WHERE false)", [], 0)
    cols = "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(headers))) + "}"
    # (the stage's one thread reads in file order; ``parallel = false`` would buffer the whole file)
    scan = f"read_csv({_dialect(f)}, auto_detect = false, null_padding = true, strict_mode = true, columns = {cols})"
    return NativePart(f, scan, headers, -1)


# DuckDB column types whose ``to_json`` rendering reads back as the value Python's Parquet reader gives
_PARQUET_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
                            "DOUBLE", "BOOLEAN", "VARCHAR", "DATE", "TIMESTAMP"})
_JSON_KINDS = frozenset({"BIGINT", "UBIGINT", "DOUBLE", "BOOLEAN", "VARCHAR"})  # scalars (objects/arrays: JSON)


def _pointer(name: str) -> str:
    """A JSON pointer to the top-level member ``name``."""
    return sql_literal("/" + name.replace("~", "~0").replace("/", "~1"))


def _load_json(stage: Stage, f: CsvFile, n: int) -> NativePart | None:
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
    return NativePart(f, table, headers, rows, kinds)



def _json_sample(value: str | None, kind: str | None) -> Any:
    if value is None or kind == "VARCHAR":
        return value
    if kind == "BOOLEAN":
        return value == "true"
    try:
        return int(value)
    except ValueError:
        return float(value)


def _observe_json(stage: Stage, part: NativePart, observer: normalize.Observer) -> None:
    if not part.rows:
        return
    con, t = stage.con, part.scan
    n = len(part.headers)
    got = con.execute("SELECT " + ", ".join([f"count(c{i})" for i in range(n)]
                                            + [f"bit_or(1 << {json_category(f'c{i}', f't{i}')})" for i in range(n)])
                      + f" FROM {t}").fetchone()
    for i, h in enumerate(part.headers):
        samples: list[Any] = []
        if h not in observer.by_source:
            samples = [_json_sample(v, k) for v, k in con.execute(
                f"SELECT c{i}, t{i} FROM {t} WHERE c{i} IS NOT NULL ORDER BY rowid LIMIT 200").fetchall()]
        observer.add_column(h, type_of(got[n + i]), part.rows, got[i] < part.rows, samples)
    observer.add_count(part.rows)

def pk_columns(part: NativePart) -> list[str]:
    pk = part.file.primary_key or []
    return pk if all(k in part.headers for k in pk) else resolve_columns(pk, part.headers)


def _estimate_rows(path: str) -> int:
    """A file's rows from the line length of its first MB (quoted line breaks make it an estimate)."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 20)
    return max(1, round(os.path.getsize(path) * head.count(b"\n") / max(1, len(head))))


def _observe_sampled(stage: Stage, part: NativePart, observer: normalize.Observer, cols: list[str], known: set[str],
                     guess: dict[str, str]) -> bool:
    """The object typed from the sniffer's sample alone, when the full rules give each proposal exactly on
    it and the file runs past it: the rest of the file is then checked as the snapshot writer reads it
    (``_select_native``: a value the proposal refutes, or a missing key, stops the write and the sync is
    typed again by the exact aggregate). Nulls and the row count come from the written rows
    (``Incoming.settle``). False (nothing fed) when the sample does not decide."""
    con = stage.con
    got = con.execute("SELECT " + ", ".join(["count(*)"] + [f"bit_or(1 << {category(c)})" for c in guess])
                      + f" FROM (SELECT {', '.join(guess) or '1'} FROM {part.scan} LIMIT {SNIFF_ROWS})").fetchone()
    if got[0] < SNIFF_ROWS or any(type_of(m) != typ for m, typ in zip(got[1:], guess.values(), strict=True)):
        return False  # the whole file is in the sample (exact at once), or the sample is narrower or wider
    part.checks = dict(guess)
    for c, h in zip(cols, part.headers, strict=True):
        samples: list[Any] = []
        if h not in observer.by_source:
            samples = [r[0] for r in con.execute(f"SELECT {c} FROM {part.scan} WHERE {c} IS NOT NULL LIMIT 200").fetchall()]
        observer.add_column(h, "STRING" if c in known else guess[c], 0, False, samples)
    return True


def _proposals(stage: Stage, part: NativePart, observer: normalize.Observer) -> list[str | None]:
    """Each column's proposed type: the one the dataset (or an earlier object of this batch) already has,
    else DuckDB's sniffer's (which is then asked). A proposal only saves work: the validation aggregate
    decides every column exactly whichever proposal it checks (a refuted one gets the full rules)."""
    prior = [observer.type_of(h) for h in part.headers]
    if all(prior):
        return prior
    return [p or s for p, s in zip(prior, _sniff(stage, part.file, len(part.headers)), strict=True)]


# whether every value of a column its check accepted is of the narrower type (a FLOAT without '.', 'e' or 'E'
# matches ``_INT`` unless it has more than 18 digits)
_NARROWER = {"FLOAT": "NOT (contains(#, '.') OR contains(#, 'e') OR contains(#, 'E')) "
                      "AND length(#) <= 18 + CAST(starts_with(#, '-') AS INTEGER)",
             "TIMESTAMP": "length(#) = 10"}
_NARROWED = {"FLOAT": "INTEGER", "TIMESTAMP": "DATE"}


def observe(stage: Stage, part: NativePart, observer: normalize.Observer, sampled: bool = False) -> None:
    """Types, nulls and samples of the object's columns, fed to ``observer``. For a CSV: the proposals
    (``_proposals``) checked by one aggregate over the file (a proposal it refutes, or a column without one,
    gets the full rules), its row count and whether a primary key value is missing. ``sampled``: a CSV
    that runs past the sniffer's sample may be typed from it (``_observe_sampled``)."""
    if part.json_kinds is not None:
        _observe_json(stage, part, observer)
        return
    if not part.headers:
        return
    cols = [f"c{i}" for i in range(len(part.headers))]
    proposed = part.proposed = part.proposed or _proposals(stage, part, observer)
    known = _known_text(stage, part, observer, cols, proposed)
    guess = {c: p for c, p in zip(cols, proposed, strict=True) if c not in known and p not in (None, "STRING")}
    slow = [c for c in cols if c not in known and c not in guess]
    if sampled and not slow and _observe_sampled(stage, part, observer, cols, known, guess):
        return
    got = stage.con.execute(_validation_sql(part, cols, guess, slow)).fetchone()
    part.rows = int(got[0])
    counts = got[1:1 + len(cols)]
    part.key_missing = bool(got[-1])
    masks = _masks(stage, part, known, guess, slow, got)
    for i, (c, h) in enumerate(zip(cols, part.headers, strict=True)):
        samples: list[Any] = []
        if h not in observer.by_source and counts[i]:  # a new column: classified from its first values
            samples = [r[0] for r in stage.con.execute(
                f"SELECT {c} FROM {part.scan} WHERE {c} IS NOT NULL LIMIT 200").fetchall()]
        observer.add_column(h, type_of(masks[c]), part.rows, counts[i] < part.rows, samples)
    observer.add_count(part.rows)


def _known_text(stage: Stage, part: NativePart, observer: normalize.Observer, cols: list[str],
                proposed: list[str | None]) -> set[str]:
    """The columns that are text: so typed in the dataset already, or proposed as text by the sniffer and
    text by our rules too on its sample."""
    known = {c for c, h in zip(cols, part.headers, strict=True) if observer.type_of(h) == "STRING"}
    texts = [c for c, p in zip(cols, proposed, strict=True) if p == "STRING" and c not in known]
    if texts:
        got = stage.con.execute("SELECT " + ", ".join(f"bit_or(1 << {category(c)})" for c in texts)
                                + f" FROM (SELECT {', '.join(texts)} FROM {part.scan} LIMIT {SNIFF_ROWS})").fetchone()
        known.update(c for c, m in zip(texts, got, strict=True) if type_of(m) == "STRING")
    return known


def _validation_sql(part: NativePart, cols: list[str], guess: dict[str, str], slow: list[str]) -> str:
    """SQL: the validation aggregate, one pass over the file: the row count, each column's values, each
    proposal's check and whether only the narrower type occurs, the full rules' mask of each column without
    a proposal, and whether some row misses a primary key value."""
    index = {h: f"c{i}" for i, h in enumerate(part.headers)}
    keys = [index[k] for k in pk_columns(part) if k in index] if part.file.primary_key else []
    items = ["count(*)"] + [f"count({c})" for c in cols]
    items += [f"bool_and({c} IS NULL OR {is_of(c, typ)})" for c, typ in guess.items()]
    items += [f"bool_and({_NARROWER[typ].replace('#', c)})" if typ in _NARROWER else "NULL" for c, typ in guess.items()]
    items += [f"bit_or(1 << {category(c)})" for c in slow]
    items.append("bool_or(" + " OR ".join(f"({c} IS NULL OR {c} = '')" for c in keys) + ")" if keys else "false")
    return "SELECT " + ", ".join(items) + f" FROM {part.scan}"


def _masks(stage: Stage, part: NativePart, known: set[str], guess: dict[str, str], slow: list[str],
           got: tuple[Any, ...]) -> dict[str, int | None]:
    """Each column's ``CODES`` mask from the validation aggregate's row ``got``; a proposal it refutes (a
    value the sniffer did not see) gets the full rules in a second pass."""
    width = len(part.headers)
    at = 1 + width
    present = dict(zip((f"c{i}" for i in range(width)), got[1:at], strict=True))
    checks = got[at:at + len(guess)]
    narrow = got[at + len(guess):at + 2 * len(guess)]
    masks: dict[str, int | None] = {c: 1 << 6 for c in known}
    masks.update(zip(slow, got[at + 2 * len(guess):at + 2 * len(guess) + len(slow)], strict=True))
    code = {name: c for c, name in CODES.items()}
    redo = []
    for (c, typ), ok, only_narrow in zip(guess.items(), checks, narrow, strict=True):
        if not present[c]:  # no value at all
            masks[c] = None
        elif ok:
            masks[c] = 1 << code[_NARROWED[typ] if only_narrow else typ]
        else:  # the proposal is refuted by a value the sniffer did not see: the full rules decide
            redo.append(c)
    if redo:
        masks.update(zip(redo, stage.con.execute("SELECT " + ", ".join(f"bit_or(1 << {category(c)})" for c in redo)
                                                 + f" FROM {part.scan}").fetchone(), strict=True))
    return masks


def check_key(stage: Stage, part: NativePart) -> list[str]:
    """The primary key's columns (``c<i>``) in the object; raises for the first row missing a value."""
    pk = part.file.primary_key or []
    pk_cols = pk_columns(part)
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

