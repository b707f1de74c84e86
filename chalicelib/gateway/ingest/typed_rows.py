"""A sync's incoming rows as one typed row relation, built natively where the source allows it.

CSV objects (``sources.CsvFile``) are never copied into a text table: the type the dataset already has
for a column, or else DuckDB's sniffer (``sniff_csv``), proposes each column's type, and ONE validation
aggregate over the file (DuckDB's CSV reader, every value as text) checks each proposal against the
project's typing rules (``normalize.infer`` written as SQL), so a column gets exactly the type those rules
give; where the two differ (a proposal a later value breaks, a text column the rules would type), the rules
win. Typing, keying and the change hash are SQL too, read straight from the file by the snapshot writer's
single ``COPY (SELECT ... ORDER BY ...)`` (see ``storage.write_snapshot``): no Python work per row, no
intermediate table. JSON Lines and Parquet objects (the same ``CsvFile`` with another ``format``) become a
table of each member's text and JSON type, typed by the same rules for JSON values (``native_objects``; the rules as SQL in ``type_rules_sql``). Rows
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
from chalicelib.gateway.ingest import native_objects as native
from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.ingest import type_rules_sql as rules
from chalicelib.gateway.ingest.sources import Batch, CsvFile, Record, RecordSpool
from chalicelib.gateway.storage import sql_literal
from chalicelib.gateway.vocabulary import DUCKDB_TYPES

MEMORY_LIMIT = "160MB"  # DuckDB's share of the workers function's 512 MB; the rest spills to /tmp
THREADS = 1  # a 512 MB Lambda has about a third of a vCPU
ORD_SHIFT = 40  # row order: (object position << ORD_SHIFT) + row number


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



def _digest(schema: list[dict[str, Any]]) -> str:
    """SQL: a row's change hash, a ``UBIGINT``: DuckDB's 64-bit hash over its typed values (a collision between
    two versions of one key's row is ~2^-64; snapshots hashed otherwise just count as changed once)."""
    if not schema:
        return "CAST(0 AS UBIGINT)"
    return f"hash({', '.join(rules.ident(f['name']) for f in schema)})"


def _ordered(schema: list[dict[str, Any]], inner: str) -> str:
    """SQL: the rows of ``inner`` (typed columns, ``_key``, ``_source``, ``_ord``) with their hash, columns in
    the order every part of ``incoming_sql`` shares."""
    names = ", ".join(["_key", "_source", "_hash", *(rules.ident(f["name"]) for f in schema), "_ord"])
    return f"SELECT {names} FROM (SELECT t.*, {_digest(schema)} AS _hash FROM ({inner}) t)"


def _select_native(stage: Stage, part: native.NativePart, schema: list[dict[str, Any]], names: dict[str, str]) -> str | None:
    """SQL: the object's typed, keyed and hashed rows (read from the file itself for a CSV)."""
    if not part.rows:
        return None
    key_cols = native.check_key(stage, part) if part.file.primary_key else []
    checks = part.checks or {}
    by_col = {names[h]: i for i, h in enumerate(part.headers)}
    types = {f"c{i}": next(f["type"] for f in schema if f["name"] == names[h]) for i, h in enumerate(part.headers)}
    items = []
    for f in schema:
        typ = DUCKDB_TYPES[f["type"]]
        i = by_col.get(f["name"])
        if i is None:
            items.append(f"CAST(NULL AS {typ}) AS {rules.ident(f['name'])}")
            continue
        value = (rules.typed(f"c{i}", f["type"]) if part.json_kinds is None else
                 rules.json_typed(f"c{i}", f"t{i}", f["type"]))
        if f"c{i}" in checks:
            value = f"CASE WHEN c{i} IS NULL OR {rules.accepts(f'c{i}', checks[f'c{i}'])} THEN {value} ELSE {rules.REFUTED} END"
        items.append(f"CAST({value} AS {typ}) AS {rules.ident(f['name'])}")
    if key_cols:
        # a CSV value of a column typed other than text matched that type's ASCII pattern: no escaping needed
        pieces: list[tuple[bool, str]] = [(True, "[")]  # (literal?, text or SQL), adjacent literals joined
        for n, c in enumerate(key_cols):
            pieces += [(True, ", ")] if n else []
            if part.json_kinds is None and types[c] not in ("STRING", "JSON"):
                pieces += [(True, '"'), (False, c), (True, '"')]
            else:
                pieces.append((False, rules.json_str(c)))
        pieces.append((True, "]"))
        key = rules.concat(pieces)
        if part.checks is not None:
            missing = " OR ".join(f"{c} IS NULL OR {c} = ''" for c in key_cols)
            key = f"CASE WHEN {missing} THEN {rules.REFUTED} ELSE {key} END"
    else:
        key = f"{sql_literal(part.file.source + '#')} || CAST(_rn + 1 AS VARCHAR)"
    order = part.file.order << ORD_SHIFT
    typed = ", ".join(items + [f"{order} + _rn AS _ord"])
    return _ordered(schema, f"SELECT {key} AS _key, {sql_literal(part.file.source)} AS _source, {typed} FROM {part.numbered}")





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
        self.parts: list[tuple[int, Any]] = []  # (order, NativePart | list[(ord, Record)])

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
            loaded = native.load(self.stage, f, n)
            self.parts.append((f.order, loaded if loaded is not None else self._fallback(f)))
        self.parts.sort(key=lambda p: p[0])
        rows = len(batch.records)
        for objects, (order, part) in enumerate(self.parts, start=1):
            if isinstance(part, native.NativePart):
                try:
                    native.observe(self.stage, part, observer, sampled)
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
        return [p.file.source for _, p in self.parts if isinstance(p, native.NativePart) and p.checks is not None]

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
            if isinstance(part, native.NativePart):
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
                                     + "".join(f"CAST(NULL AS {DUCKDB_TYPES[f['type']]}) AS {rules.ident(f['name'])}, "
                                               for f in schema) + "CAST(NULL AS BIGINT) AS _ord WHERE false"), 0))
        self.stage.incoming_parts = selects
        self.stage.incoming_sql = " UNION ALL ".join(sql for sql, _ in selects)
        spooled = isinstance(self.batch.records, RecordSpool)  # not deduplicated while observed
        self.stage.may_repeat = spooled or any(f.primary_key for f in self.batch.files)  # keys from values
