"""Dataset data in the region's ``data`` bucket, as Parquet snapshots.

Layout: ``datasets/<workspace>/<dataset>/<sync id>-a<attempt>/``. Each successful sync writes under a
prefix of its own and the commit switches ``DatasetAttrs.data_prefix`` to it, so every content change
changes ``data_prefix``. A prefix holds ``manifest.json`` naming the snapshot's files:

- ``base``: Parquet parts, each sorted by ``_source`` then ``_key`` (about ``PART_ROWS`` rows each), possibly under an
  older prefix, and ``parts``: each part's digest (key range and sources) for change detection;
- ``layers``: in order, each an upsert file (new or changed rows) and/or a delete file (``_key`` only).

A row of the base or of layer *i* is current unless its key appears in a later layer (upserted again or
deleted): ``snapshot_source`` merges this on read. An incremental sync therefore writes only its layer
(O(changed rows)); a full refresh, a type change, or layers grown past ``MAX_LAYERS`` or
``COMPACT_FRACTION`` of the base compact everything into a new base. A prefix without a manifest (written
before manifests existed) is a base of all its ``*.parquet``. Every file holds the schema's columns plus
internal ``_key``, ``_source``, ``_hash`` (readers drop columns starting with ``_``). ``_hash`` is a
``UBIGINT``; files written before it was held it as its decimal text, which every comparison casts back
(``HASH``), so old and new files mix in one snapshot.
A crashed attempt leaves an orphan prefix that is never referenced and is removed by a later commit;
the previous snapshot's files are kept (in-flight queries may still read them), other unreferenced
files are deleted.

DuckDB is imported inside the functions: the workers entry must not load it at import time.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import aws, process_state
from chalicelib.gateway import local_parts
from chalicelib.gateway.vocabulary import DUCKDB_TYPES

BUCKET = "data"
PART_ROWS = 250_000  # rows per Parquet part (rounded up to DuckDB's 2,048-row chunks)
INTERNAL = ("_key", "_source", "_hash")
HASH = "CAST(_hash AS UBIGINT) AS _hash"  # a file's row hashes, whichever way it stored them
MANIFEST = "manifest.json"
MAX_LAYERS = 8  # an incremental sync that would add a ninth layer compacts instead
COMPACT_FRACTION = 0.25  # ... as does one whose layers would hold more rows than this share of the base
COMPACT_MIN_ROWS = 1_000  # ... unless they hold fewer rows than this (small data: layers are cheap)
_LITERAL_SOURCES = 1_000  # replaced sources written into a layer's lookup as constants (more: a table)
_STATS_CUT = 256  # bytes: DuckDB's Parquet writer cuts string statistics there


def connect(workdir: str) -> Any:
    """An in-memory DuckDB whose spill and home directories are ``workdir`` (Lambda: only /tmp is
    writable and HOME may be unset)."""
    import duckdb  # noqa: PLC0415

    return duckdb.connect(config={"temp_directory": workdir, "home_directory": workdir})


def _part_written(key: str) -> None:
    """Called after each file of a snapshot is uploaded (a seam for crash tests; does nothing)."""


@dataclass
class SnapshotResult:
    prefix: str
    row_count: int
    rows_written: int  # new or changed rows
    rows_deleted: int
    parts: int  # objects written
    compacted: bool = True
    layer_added: bool = False  # a layer sync that stacked a new layer (at most ``MAX_LAYERS`` before a new base)
    incoming_rows: int = 0  # unique keys that arrived (``rows_written`` of them new or changed)
    keys: list[str] = field(default_factory=list)  # the snapshot's files (its manifest's)
    old_keys: list[str] = field(default_factory=list)  # the files of the snapshot it replaces
    # the files of the snapshot before that one, from its manifest (None: unknown, a prune must list)
    older_files: list[str] | None = None
    # a complete batch's rows as read (before the last row per key won): rows per source, columns with a null
    rows_by_source: dict[str, int] = field(default_factory=dict)
    null_columns: set[str] = field(default_factory=set)
    manifest: Manifest | None = None  # the one it wrote (None: the snapshot stayed)


@dataclass
class Manifest:
    base: list[str]
    layers: list[dict[str, Any]] = field(default_factory=list)  # {"upserts": key|None, "deletes": key|None, "rows": n}
    row_count: int = 0
    base_rows: int = -1  # -1: unknown (a snapshot written without a manifest)
    # per base part, its digest: {"lo": min _key, "hi": max _key (or bounds of them), "sources": the _source
    # values of its rows ("" for none), "rows", "hsum": the sum of its row hashes}; lets an incremental sync
    # read only the parts a change can touch (``_touched_parts``) and a full refresh compare only the parts
    # that changed (``_same_parts``). None: a base written before digests existed (the next layer reads the
    # whole snapshot instead); digests without "hsum" are never equal to a new one.
    parts: list[dict[str, Any]] | None = None
    # the snapshot this one replaced: {"prefix", "keys"}, {} for none (the files a later sync's prune deletes
    # unlisted); None: written before manifests said
    replaced: dict[str, Any] | None = None
    prefix: str = ""  # where it was read from (not stored)

    def keys(self) -> list[str]:
        return self.base + [k for layer in self.layers for k in (layer.get("upserts"), layer.get("deletes")) if k]

    def replacing(self, old: Manifest) -> Manifest:
        """This manifest, naming ``old`` as the snapshot it replaces (none unless ``old`` was read from a prefix)."""
        self.replaced = {"prefix": old.prefix, "keys": old.keys()} if old.prefix else {}
        return self


    def to_json(self) -> str:
        doc: dict[str, Any] = {"version": 1, "base": self.base, "layers": self.layers, "row_count": self.row_count,
                               "base_rows": self.base_rows}
        if self.parts is not None:
            doc["parts"] = self.parts
        if self.replaced is not None:
            doc["replaced"] = self.replaced
        return json.dumps(doc, separators=(",", ":"))


def dataset_root(workspace_id: str, dataset_id: str) -> str:
    return f"datasets/{workspace_id}/{dataset_id}/"


def snapshot_prefix(workspace_id: str, dataset_id: str, sync_id: str, attempt: int) -> str:
    return f"{dataset_root(workspace_id, dataset_id)}{sync_id}-a{attempt}"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _files_sql(paths: list[str]) -> str:
    return "[" + ", ".join(sql_literal(p) for p in paths) + "]"


def _list_keys(region: str, prefix: str) -> list[str]:
    s3 = aws.client("s3", region)
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=aws.bucket_name(BUCKET, region), Prefix=prefix):
        keys.extend(o["Key"] for o in page.get("Contents", []))
    return keys


def _delete_keys(region: str, keys: list[str]) -> None:
    local_parts.forget(region, keys)
    s3 = aws.client("s3", region)
    for i in range(0, len(keys), 1000):
        s3.delete_objects(Bucket=aws.bucket_name(BUCKET, region),
                          Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})


_COMMITTED: OrderedDict[tuple[str, str], str] = OrderedDict()  # (region, prefix) -> manifest JSON
_COMMITTED_LOCK = threading.Lock()
COMMITTED_MANIFESTS = 256  # the manifests of snapshots this process committed that it remembers
process_state.enrol(f"{__name__}._COMMITTED", _COMMITTED.clear)


def remember_committed(region: str, snap: SnapshotResult) -> None:
    """Keep the manifest of a snapshot this process wrote and then committed, so that the dataset's next sync
    here does not read it again. A committed snapshot's files never change: its prefix is its run's and
    attempt's, and a finished run writes nothing more."""
    if snap.manifest is None:
        return
    with _COMMITTED_LOCK:  # a local process runs several sync workers on threads
        _COMMITTED[(region, snap.prefix)] = snap.manifest.to_json()
        _COMMITTED.move_to_end((region, snap.prefix))
        while len(_COMMITTED) > COMMITTED_MANIFESTS:
            _COMMITTED.popitem(last=False)


def read_manifest(region: str, prefix: str) -> Manifest:
    """The files of the snapshot at ``prefix`` (a prefix without a manifest: all its Parquet parts)."""
    remembered = _COMMITTED.get((region, prefix))
    if remembered is not None:
        return _manifest(remembered, prefix)
    s3 = aws.client("s3", region)
    try:
        body = s3.get_object(Bucket=aws.bucket_name(BUCKET, region), Key=f"{prefix}/{MANIFEST}")["Body"].read()
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
            raise
        return Manifest(base=sorted(k for k in _list_keys(region, prefix + "/") if k.endswith(".parquet")),
                        prefix=prefix)
    return _manifest(body, prefix)


def _manifest(body: str | bytes, prefix: str) -> Manifest:
    doc = json.loads(body)
    return Manifest(base=doc["base"], layers=doc.get("layers", []), row_count=int(doc.get("row_count", 0)),
                    base_rows=int(doc.get("base_rows", -1)), parts=doc.get("parts"), replaced=doc.get("replaced"),
                    prefix=prefix)


def _download(region: str, keys: list[str], into: str, *, keep: bool = True) -> dict[str, str]:
    """Each key into ``into`` for reading: key -> local path. From this container's copy when it has one
    (``local_parts``), else one GET each, streamed (no transfer thread pool), and with ``keep`` the file
    becomes the local copy."""
    os.makedirs(into, exist_ok=True)
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    out: dict[str, str] = {}
    for i, key in enumerate(keys):
        path = os.path.join(into, f"{i:05d}.parquet")
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # never written through: it may be a link to a local copy
        if not local_parts.copy_to(region, key, path):
            body = s3.get_object(Bucket=bucket, Key=key)["Body"]
            with open(path, "wb") as fh:
                shutil.copyfileobj(body, fh, 1 << 20)
            if keep:
                local_parts.keep(region, key, path)
        out[key] = path
    return out


def merged_source(manifest: Manifest, local: dict[str, str]) -> str | None:
    """A DuckDB table expression yielding the snapshot's current rows (files already downloaded to
    ``local``), or None when it has no files."""
    base = [local[k] for k in manifest.base]
    layers = [(i, layer) for i, layer in enumerate(manifest.layers, start=1)
              if layer.get("upserts") or layer.get("deletes")]
    if not layers:
        return f"read_parquet({_files_sql(base)}, union_by_name = true)" if base else None
    rows = [f"SELECT *, 0 AS _layer FROM read_parquet({_files_sql(base)}, union_by_name = true)"] if base else []
    keys = []
    for i, layer in layers:
        if layer.get("upserts"):
            rows.append(f"SELECT *, {i} AS _layer FROM read_parquet({_files_sql([local[layer['upserts']]])})")
            keys.append(f"SELECT _key, {i} AS _layer FROM read_parquet({_files_sql([local[layer['upserts']]])})")
        if layer.get("deletes"):
            keys.append(f"SELECT _key, {i} AS _layer FROM read_parquet({_files_sql([local[layer['deletes']]])})")
    if not rows:
        return None
    return (f"(SELECT r.* EXCLUDE (_layer) FROM ({' UNION ALL BY NAME '.join(rows)}) r "
            f"LEFT JOIN (SELECT _key, max(_layer) AS _top FROM ({' UNION ALL '.join(keys)}) GROUP BY _key) s "
            f"ON s._key = r._key WHERE s._top IS NULL OR r._layer >= s._top)")


def write_snapshot(region: str, workspace_id: str, dataset_id: str, sync_id: str, attempt: int,
                   schema: list[dict[str, Any]], stage: Any, *, old_prefix: str | None, complete: bool,
                   replaced_sources: set[str], compact: bool = False) -> SnapshotResult:
    """Write the new snapshot from the typed rows of ``stage`` (an ``ingest.Stage``: ``incoming_sql``, or
    table ``incoming`` once materialized). Unless ``complete``, old rows stay except those with a key that
    arrived again or from a replaced source. As a layer on the old snapshot when possible, else (``compact``,
    ``complete``, no or a legacy old snapshot, layers grown too big) as a new base.

    A new base of a ``complete`` batch is ONE ``COPY (SELECT ... ORDER BY _source, _key)`` straight from
    the stage's relation (a CSV is typed, keyed and hashed as the file is read) into Parquet parts; the
    counts then come from the parts' ``_key``/``_hash`` columns. A layer whose rows all come from replaced
    sources reads, of the old snapshot, only its layers and the base parts whose digest (``Manifest.parts``)
    says they hold a replaced source's rows or an incoming key: O(changed rows + parts touched + layers +
    manifest), not O(snapshot). The prefix is new per attempt and never listed: files a crashed try of the
    same attempt left there are overwritten or, unreferenced, removed by ``prune``."""
    prefix = snapshot_prefix(workspace_id, dataset_id, sync_id, attempt)
    con = stage.con
    old = read_manifest(region, old_prefix) if old_prefix else Manifest(base=[], base_rows=0)
    con.execute("CREATE TABLE replaced (src VARCHAR)")
    if replaced_sources:
        con.executemany("INSERT INTO replaced VALUES (?)", [[s] for s in sorted(replaced_sources)])
    layerable = (not compact and not complete and bool(old_prefix) and old.base_rows >= 0
                 and len(old.layers) < MAX_LAYERS)
    if layerable:
        result = _try_layer(region, prefix, schema, stage, old, replaced_sources)
        if result is not None:
            return result
    return _write_base(region, prefix, schema, stage, old, complete)


def _spec(schema: list[dict[str, Any]]) -> dict[str, str]:
    return {"_key": "VARCHAR", "_source": "VARCHAR", "_hash": "UBIGINT",
            **{f["name"]: DUCKDB_TYPES[f["type"]] for f in schema}}


def _old_view(con: Any, region: str, tmp: str, old: Manifest, spec: dict[str, str],
              local: dict[str, str] | None = None) -> None:
    """View ``old``: the old snapshot's current rows in the new schema's types (files in ``local`` are not
    downloaded again)."""
    local = dict(local or {})
    local.update(_download(region, [k for k in old.keys() if k not in local], os.path.join(tmp, "old-all")))
    source = merged_source(old, local)
    present = ({r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()} if source else set())
    select = ", ".join(
        (f"CAST({_ident(n)} AS {t}) AS {_ident(n)}" if n in present else f"CAST(NULL AS {t}) AS {_ident(n)}")
        for n, t in spec.items())
    if source:
        con.execute(f"CREATE OR REPLACE TEMP VIEW old AS SELECT {select} FROM {source}")
    else:
        con.execute(f"CREATE OR REPLACE TEMP VIEW old AS {_no_rows(spec)}")


def _try_layer(region: str, prefix: str, schema: list[dict[str, Any]], stage: Any, old: Manifest,
               replaced_sources: set[str]) -> SnapshotResult | None:
    """The sync as a layer on ``old``, or None when the layers would grow too big (compact instead)."""
    con, tmp = stage.con, stage.workdir
    incoming = stage.materialize()
    touched = _touched_parts(con, old, replaced_sources)
    if touched is not None:  # the touched base parts and the layers only: their current rows' keys and hashes
        part = Manifest(base=[old.base[i] for i in touched], layers=old.layers)
        source = merged_source(part, _download(region, part.keys(), os.path.join(tmp, "old")))
        if source is None:
            con.execute("CREATE TABLE old_index (_key VARCHAR, _source VARCHAR, _hash UBIGINT)")
        else:  # only the rows the comparison uses: those of replaced sources and those of incoming keys
            con.execute(f"CREATE TABLE old_index AS {_old_rows_used(con, source, replaced_sources)}")
        old_rows = old.row_count
    else:
        _old_view(con, region, tmp, old, _spec(schema))
        con.execute("CREATE TABLE old_index AS SELECT _key, _source, _hash FROM old")
        old_rows = con.execute("SELECT count(*) FROM old_index").fetchone()[0]
    written, added, deleted = con.execute(
        "SELECT (SELECT count(*) FROM incoming i LEFT JOIN old_index o ON o._key = i._key "
        "WHERE o._hash IS DISTINCT FROM i._hash), "
        "(SELECT count(*) FROM incoming WHERE _key NOT IN (SELECT _key FROM old_index)), "
        "(SELECT count(*) FROM old_index o WHERE o._source IN (SELECT src FROM replaced) "
        "AND o._key NOT IN (SELECT _key FROM incoming))").fetchone()
    grown = sum(int(layer.get("rows", 0)) for layer in old.layers) + incoming + deleted
    if not (grown <= COMPACT_MIN_ROWS or grown <= COMPACT_FRACTION * old.base_rows):
        con.execute("DROP TABLE old_index")
        return None
    cols = ", ".join(_ident(n) for n in _spec(schema))
    manifest, objects = _write_layer(con, region, tmp, prefix, old, cols, deleted)
    total = old_rows + added - deleted
    manifest.row_count = int(total)
    _put_manifest(region, prefix, manifest.replacing(old))
    return SnapshotResult(prefix=prefix, row_count=int(total), rows_written=int(written), rows_deleted=int(deleted),
                          parts=objects + 1, compacted=False, layer_added=objects > 0, incoming_rows=incoming,
                          keys=manifest.keys(), old_keys=old.keys(), older_files=_replaced_files(old),
                          manifest=manifest)


def _old_rows_used(con: Any, source: str, replaced: set[str]) -> str:
    """SQL: the ``_key``, ``_source`` and ``_hash`` of the rows of ``source`` that are of a replaced source or
    have an incoming key. Constants (the sources, the incoming keys' range) let the scans skip the other
    rows, often whole parts, before the lookup: parts are sorted by key and their statistics hold their
    sources' and keys' ranges."""
    among = ("FALSE" if not replaced else f"_source IN ({', '.join(map(sql_literal, sorted(replaced)))})"
             if len(replaced) <= _LITERAL_SOURCES else "_source IN (SELECT src FROM replaced)")
    rows = f"SELECT _key, _source, {HASH} FROM {source} WHERE {among}"
    lo, hi = con.execute("SELECT min(_key), max(_key) FROM incoming").fetchone()
    if lo is None:  # no incoming row
        return rows
    return (f"{rows} UNION ALL SELECT _key, _source, {HASH} FROM {source} WHERE _key BETWEEN {sql_literal(lo)} "
            f"AND {sql_literal(hi)} AND _key IN (SELECT _key FROM incoming) AND NOT coalesce({among}, false)")


def _copy_sorted(con: Any, body: str, out: str, *, one_source: bool = False) -> list[str]:
    """ONE ``COPY (body ORDER BY _source, _key)`` (``_key`` alone for the rows of ``one_source``) into Parquet
    parts of one row group each under ``out``: about ``PART_ROWS`` rows, cut where DuckDB's 2,048-row chunks
    pass it; the parts' paths in order (none when there are no rows)."""
    shutil.rmtree(out, ignore_errors=True)
    order = "_key" if one_source else "_source NULLS FIRST, _key"
    con.execute(f"COPY ({body} ORDER BY {order}) TO '{out}' (FORMAT PARQUET, COMPRESSION ZSTD, "
                f"ROW_GROUP_SIZE {PART_ROWS}, ROW_GROUPS_PER_FILE 1, FILENAME_PATTERN 'part-{{i}}')")
    files = sorted(os.listdir(out) if os.path.isdir(out) else [], key=lambda n: int(n[5:].split(".")[0]))
    return [os.path.join(out, n) for n in files]


def _groups(parts: list[tuple[str, int]]) -> list[list[str]]:
    """The relation's parts (query, rows) in runs of at most ``PART_ROWS`` rows (a bigger part alone). Each
    run is sorted by one COPY; a sort fed by several scans held more memory than one fed by a single scan (1M
    rows of two objects ran out of the cap), so a run of several parts is staged in a table first."""
    groups: list[list[str]] = []
    rows = 0
    for sql, n in parts:
        if not groups or rows + n > PART_ROWS:
            groups.append([])
            rows = 0
        groups[-1].append(sql)
        rows += n
    return groups


def _write_base(region: str, prefix: str, schema: list[dict[str, Any]], stage: Any, old: Manifest,
                complete: bool) -> SnapshotResult:
    """A new base: the kept old rows (none when ``complete``) and the incoming ones, sorted, in one COPY."""
    con, tmp = stage.con, stage.workdir
    spec = _spec(schema)
    cols = ", ".join(_ident(n) for n in spec)
    if not complete:  # its rows are kept
        _old_view(con, region, tmp, old, spec)
    out = os.path.join(tmp, "base")
    direct = complete and stage.incoming_rows is None  # straight from the files, keys possibly repeated

    def body() -> str:
        rows = f"SELECT {cols} FROM ({stage.incoming_sql})" if direct else f"SELECT {cols} FROM incoming"
        if complete:
            return rows
        return (f"SELECT {cols} FROM old o WHERE o._key NOT IN (SELECT _key FROM incoming) AND "
                f"(o._source IS NULL OR o._source NOT IN (SELECT src FROM replaced)) UNION ALL {rows}")

    def write() -> list[str]:
        if not direct:
            stage.materialize()
            paths = _copy_sorted(con, body(), out)
        else:  # straight from the objects, in runs (one COPY each): parts sorted within, by source across
            paths = []
            os.makedirs(out, exist_ok=True)
            for g, sqls in enumerate(_groups(stage.incoming_parts)):
                rows = " UNION ALL ".join(f"SELECT {cols} FROM ({sql})" for sql in sqls)
                if len(sqls) > 1:  # a run of small objects: staged first, so the sort is fed by one scan
                    con.execute(f"CREATE OR REPLACE TABLE run_rows AS {rows}")
                    rows = "SELECT * FROM run_rows"
                paths += _copy_sorted(con, rows, os.path.join(out, f"g{g:05d}"), one_source=len(sqls) == 1)
                con.execute("DROP TABLE IF EXISTS run_rows")
        if not paths:  # no rows: one empty part holds the schema
            os.makedirs(out, exist_ok=True)
            paths = [os.path.join(out, "empty.parquet")]
            con.execute(f"COPY ({_no_rows(spec)}) TO '{paths[0]}' (FORMAT PARQUET, COMPRESSION ZSTD)")
        return paths

    def counts(paths: list[str], digests: dict[str, dict[str, Any]]) -> tuple[int, int, int, int]:
        """(rows, distinct keys, rows new or changed against the old snapshot, old keys gone): one join of
        the parts' keys and hashes with the old snapshot's. A complete sync leaves out of it the parts equal
        to an old part (``_same_parts``), and that part: nothing in them was written or deleted."""
        same: dict[str, int] = {}
        if complete:
            same, local = _same_parts(con, region, tmp, old, digests)
            rest = Manifest(base=[k for j, k in enumerate(old.base) if j not in set(same.values())],
                            layers=old.layers)
            _old_view(con, region, tmp, rest, spec, local)
        others = [p for p in paths if p not in same]
        new = (f"SELECT _key, _hash FROM read_parquet({_files_sql(others)})" if others else
               "SELECT CAST(NULL AS VARCHAR) AS _key, CAST(NULL AS UBIGINT) AS _hash WHERE false")
        total, written, deleted = con.execute(
            "SELECT count(n._key), count(*) FILTER (WHERE n._key IS NOT NULL AND o._hash IS DISTINCT FROM n._hash), "
            f"count(*) FILTER (WHERE n._key IS NULL) FROM ({new}) n "
            "FULL OUTER JOIN (SELECT _key, _hash FROM old) o ON o._key = n._key").fetchone()
        same_rows = sum(digests[p]["rows"] for p in same)
        distinct = total = total + same_rows
        if direct and stage.may_repeat:  # keys told apart by their 64-bit hashes: a collision only sends the
            # sync down the exact path. The parts equal to old ones hold distinct keys, none in another of them:
            # only the other parts are counted, with those of them whose range holds one of the others' keys.
            ranged = sorted(same)
            near = {ranged[r[0]] for r in con.execute(
                f"SELECT DISTINCT r.i FROM ({new}) n JOIN "
                f"{_ranges_sql([(i, digests[p]['lo'], digests[p]['hi']) for i, p in enumerate(ranged)])} r "
                "ON n._key BETWEEN r.lo AND r.hi").fetchall()} if others and same else set()
            counted = others + sorted(near)
            distinct = same_rows - sum(digests[p]["rows"] for p in near) + (con.execute(
                f"SELECT count(DISTINCT hash(_key)) FROM read_parquet({_files_sql(counted)})").fetchone()[0]
                if counted else 0)
        return total, distinct, written, deleted

    paths = write()
    keys = _part_keys(prefix, paths)
    with ThreadPoolExecutor(max_workers=1) as pool:  # the parts go up while DuckDB reads them for the counts
        uploads = pool.submit(contextvars.copy_context().run, _upload_all, region, paths, keys)
        digests, by_source = _digests(con, paths)
        total, distinct, written, deleted = counts(paths, digests)
        nulls = _null_columns(con, paths) if complete else set()
        if total != distinct:
            uploads.result()
            direct = False  # the same key in several rows: the last one wins (``Stage.materialize``), written again
            shutil.rmtree(out, ignore_errors=True)
            paths = write()
            keys = _part_keys(prefix, paths)
            uploads = pool.submit(contextvars.copy_context().run, _upload_all, region, paths, keys)
            digests = _digests(con, paths)[0]
            total, _, written, deleted = counts(paths, digests)
        uploads.result()
    parts = [digests[path] for path in paths if path in digests]
    for path, key in zip(paths, keys, strict=True):
        local_parts.keep(region, key, path, move=True)
    manifest = Manifest(base=keys, row_count=int(total), base_rows=int(total),
                        parts=parts if len(parts) == len(keys) else None)
    _put_manifest(region, prefix, manifest.replacing(old))
    return SnapshotResult(prefix=prefix, row_count=int(total), rows_written=int(written), rows_deleted=int(deleted),
                          parts=len(keys) + 1, incoming_rows=int(total) if complete else stage.incoming_rows,
                          keys=manifest.keys(), old_keys=old.keys(), older_files=_replaced_files(old),
                          rows_by_source=by_source if complete else {}, null_columns=nulls, manifest=manifest)


def _ranges_sql(ranges: list[tuple[int, str, str]]) -> str:
    """SQL: a relation ``r(i, lo, hi)`` of the parts' numbers and key ranges."""
    return f"(SELECT * FROM (VALUES {', '.join(f'({i}, {sql_literal(lo)}, {sql_literal(hi)})' for i, lo, hi in ranges)}) r(i, lo, hi))"


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _no_rows(spec: dict[str, str]) -> str:
    """SQL: no rows, with the columns of ``spec``."""
    return "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {_ident(n)}" for n, t in spec.items()) + " WHERE false"


def _digests(con: Any, paths: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Per part (path) with rows, its manifest digest: lowest and highest ``_key``, its ``_source`` values ("" for
    none), its rows and the sum of its row hashes (as text); and the rows per source over all parts. From the
    parts' Parquet statistics where they decide (one source, no null, strings shorter than DuckDB's cut),
    with one read of the hashes; the other parts are scanned."""
    files = _files_sql(paths)
    stats: dict[tuple[str, str], list[tuple[int, str | None, str | None, int | None]]] = {}
    for path, column, rows, lo, hi, nulls in con.execute(
            "SELECT file_name, path_in_schema, row_group_num_rows, stats_min_value, stats_max_value, stats_null_count "
            f"FROM parquet_metadata({files}) WHERE path_in_schema IN ('_key', '_source')").fetchall():
        stats.setdefault((path, column), []).append((rows, lo, hi, nulls))
    sums = dict(con.execute(f"SELECT filename, sum(_hash) FROM read_parquet({files}, filename = true) "
                            "GROUP BY filename").fetchall())
    digests: dict[str, dict[str, Any]] = {}
    by_source: dict[str, int] = {}
    scan = []
    for path in paths:
        keys, sources = stats.get((path, "_key"), []), stats.get((path, "_source"), [])
        rows = sum(r for r, *_ in keys)
        if not rows:
            continue  # an empty part has no digest
        exact = all(_exact(lo) and _exact(hi) and nulls == 0 for _, lo, hi, nulls in keys + sources)
        names = {v for _, lo, hi, _ in sources for v in (lo, hi)}
        if not exact or len(names) != 1:
            scan.append(path)
            continue
        source = names.pop()
        digests[path] = {"lo": min(lo for _, lo, _, _ in keys), "hi": max(hi for _, _, hi, _ in keys),
                         "sources": [source], "rows": rows, "hsum": str(sums[path])}
        by_source[source] = by_source.get(source, 0) + rows
    if scan:
        for path, lo, hi, sources, rows, hsum in con.execute(
                "SELECT filename, min(lo), max(hi), list(src), list(n), sum(h) FROM (SELECT filename, "
                "coalesce(_source, '') AS src, min(_key) AS lo, max(_key) AS hi, count(*) AS n, sum(_hash) AS h "
                f"FROM read_parquet({_files_sql(scan)}, filename = true) GROUP BY ALL) GROUP BY filename").fetchall():
            digests[path] = {"lo": lo, "hi": hi, "sources": sorted(sources), "rows": int(sum(rows)), "hsum": str(hsum)}
            for src, n in zip(sources, rows, strict=True):
                by_source[src] = by_source.get(src, 0) + n
    return digests, by_source


def _exact(value: str | None) -> bool:
    """Whether a string statistic may stand for a part's key range or source: DuckDB's Parquet writer keeps a
    string shorter than ``_STATS_CUT`` bytes whole and cuts a longer one back to a character's start (a cut
    maximum is then raised, a bound rather than a key), or leaves it out. One as long as a cut may be one."""
    return value is not None and len(value.encode()) < _STATS_CUT - 4


def _same_parts(con: Any, region: str, tmp: str, old: Manifest, digests: dict[str, dict[str, Any]]
                ) -> tuple[dict[str, int], dict[str, str]]:
    """The new parts (path -> old base part index) equal to a part of the old snapshot: the same digest (key
    range, sources, rows, sum of row hashes), and every row of that old part still current (no key of a
    layer in it). Their rows are neither written nor deleted, so a complete sync's counts join only the
    other parts. Also the old files downloaded to tell (key -> local path)."""
    parts = old.parts
    if not parts or len(parts) != len(old.base) or any("hsum" not in p for p in parts):
        return {}, {}
    index: dict[tuple, int] = {}
    for j, part in enumerate(parts):
        index.setdefault(_digest_key(part), j)
    same = {path: index[_digest_key(d)] for path, d in digests.items() if _digest_key(d) in index}
    local: dict[str, str] = {}
    if same and old.layers:
        layer_files = [k for layer in old.layers for k in (layer.get("upserts"), layer.get("deletes")) if k]
        local = _download(region, layer_files, os.path.join(tmp, "old-layers"))
        ranges = _ranges_sql([(j, parts[j]["lo"], parts[j]["hi"]) for j in sorted(set(same.values()))])
        layer_keys = " UNION ALL ".join(f"SELECT _key FROM read_parquet({_files_sql([local[k]])})" for k in layer_files)
        in_range = [r[0] for r in con.execute(f"SELECT DISTINCT r.i FROM {ranges} r JOIN ({layer_keys}) k "
                                              "ON k._key BETWEEN r.lo AND r.hi ORDER BY 1").fetchall()]
        # a range only bounds a part's keys: a part a layer key falls in is read for the keys themselves
        local.update(_download(region, [old.base[j] for j in in_range], os.path.join(tmp, "old-ranged")))
        overridden = {j for j in in_range if con.execute(
            f"SELECT count(*) FROM read_parquet({_files_sql([local[old.base[j]]])}) "
            f"WHERE _key IN (SELECT _key FROM ({layer_keys}))").fetchone()[0]}
        same = {path: j for path, j in same.items() if j not in overridden}
    taken: set[int] = set()
    out = {}
    for path, j in same.items():  # one new part per old part
        if j not in taken:
            out[path] = j
            taken.add(j)
    return out, local


def _digest_key(part: dict[str, Any]) -> tuple:
    return part["lo"], part["hi"], tuple(part["sources"]), part.get("rows"), part.get("hsum")


def _null_columns(con: Any, paths: list[str]) -> set[str]:
    """The columns holding a null in the parts (from their Parquet statistics; counted where one lacks them)."""
    found = con.execute("SELECT path_in_schema, sum(stats_null_count), count(*) - count(stats_null_count) "
                        f"FROM parquet_metadata({_files_sql(paths)}) GROUP BY ALL").fetchall()
    unknown = [name for name, _, missing in found if missing]
    nulls = {name for name, n, missing in found if n and not missing}
    if unknown:
        got = con.execute("SELECT " + ", ".join(f"bool_or({_ident(n)} IS NULL)" for n in unknown)
                          + f" FROM read_parquet({_files_sql(paths)})").fetchone()
        nulls.update(n for n, has in zip(unknown, got, strict=True) if has)
    return nulls


def _touched_parts(con: Any, old: Manifest, replaced: set[str]) -> list[int] | None:
    """The base parts (indexes) an incremental layer must read besides the layers: those holding rows of a
    replaced source and those whose key range holds an incoming key. None when the part digests cannot
    decide (none recorded, or incoming rows from a source that was not replaced)."""
    if old.parts is None or len(old.parts) != len(old.base):
        return None
    if con.execute("SELECT count(*) FROM incoming WHERE _source IS NULL OR _source NOT IN (SELECT src FROM replaced)"
                   ).fetchone()[0]:
        return None
    touched = {i for i, part in enumerate(old.parts) if replaced.intersection(part["sources"])}
    ranges = [(i, part["lo"], part["hi"]) for i, part in enumerate(old.parts) if i not in touched]
    if ranges:
        touched.update(r[0] for r in con.execute(f"SELECT DISTINCT r.i FROM {_ranges_sql(ranges)} r JOIN incoming i "
                                                 "ON i._key BETWEEN r.lo AND r.hi").fetchall())
    return sorted(touched)


def _write_layer(con: Any, region: str, tmp: str, prefix: str, old: Manifest, cols: str,
                 deleted: int) -> tuple[Manifest, int]:
    """The new layer: incoming rows not already current with the same hash and source, and deletes of
    old keys from replaced sources that did not arrive again."""
    n = len(old.layers) + 1
    layer: dict[str, Any] = {"upserts": None, "deletes": None, "rows": 0}
    written = 0
    for kind, count, sql in (
            ("upserts", None, f"SELECT {cols} FROM incoming i WHERE NOT EXISTS (SELECT 1 FROM old_index o WHERE "
             "o._key = i._key AND o._hash = i._hash AND o._source IS NOT DISTINCT FROM i._source) ORDER BY _key"),
            ("deletes", deleted, "SELECT o._key FROM old_index o WHERE o._source IN "
             "(SELECT src FROM replaced) AND o._key NOT IN (SELECT _key FROM incoming) ORDER BY 1")):
        if count == 0:
            continue
        path = os.path.join(tmp, f"layer-{kind}.parquet")
        count = con.execute(f"COPY ({sql}) TO '{path}' (FORMAT PARQUET, COMPRESSION ZSTD)").fetchone()[0]
        if not count:  # every incoming row is current already
            os.remove(path)
            continue
        key = f"{prefix}/layer-{n:03d}-{kind}.parquet"
        _upload(region, path, key)
        layer[kind] = key
        layer["rows"] += int(count)
        written += 1
    layers = old.layers + ([layer] if written else [])
    return Manifest(base=list(old.base), layers=layers, base_rows=old.base_rows, parts=old.parts), written


def _upload(region: str, path: str, key: str, *, keep: bool = True) -> None:
    """One PUT streamed from the file (no transfer thread pool: its buffers would add to the peak). With
    ``keep`` the file then moves to the local copies (``local_parts``); else it stays where it is."""
    with open(path, "rb") as fh:
        aws.client("s3", region).put_object(Bucket=aws.bucket_name(BUCKET, region), Key=key, Body=fh)
    if keep:
        local_parts.keep(region, key, path, move=True)
    _part_written(key)


def _part_keys(prefix: str, paths: list[str]) -> list[str]:
    return [f"{prefix}/part-{p:05d}.parquet" for p in range(len(paths))]


def _upload_all(region: str, paths: list[str], keys: list[str]) -> None:
    """The files, in order, each to its key (the files stay)."""
    for path, key in zip(paths, keys, strict=True):
        _upload(region, path, key, keep=False)


def _replaced_files(manifest: Manifest) -> list[str] | None:
    """The files (and manifest) of the snapshot ``manifest`` replaced; None when it does not say."""
    gone = manifest.replaced
    if gone is None:
        return None
    return [*gone["keys"], f"{gone['prefix']}/{MANIFEST}"] if gone else []


def _put_manifest(region: str, prefix: str, manifest: Manifest) -> None:
    key = f"{prefix}/{MANIFEST}"
    aws.client("s3", region).put_object(Bucket=aws.bucket_name(BUCKET, region), Key=key,
                                        Body=manifest.to_json().encode(), ContentType="application/json")
    _part_written(key)


def prune(region: str, workspace_id: str, dataset_id: str, keep: set[str],
          known: dict[str, list[str]] | None = None, candidates: list[str] | None = None,
          manifest_waits: bool = False) -> int:
    """Delete every object of the dataset except the files of the snapshots in ``keep`` (prefixes) and their
    manifests; returns objects removed. ``known``: files of some of those snapshots the caller already
    has (prefix -> keys), whose manifests are then not read again. ``candidates``: delete only these (the
    files of the one snapshot a sync retires) instead of listing the dataset's objects. ``manifest_waits``:
    when only the retired snapshot's manifest would go (what a sync that stacks a layer retires), it is left
    to the next listing prune; layers stack at most ``MAX_LAYERS`` deep before a new base lists, so at most
    that many manifests wait."""
    root = dataset_root(workspace_id, dataset_id)
    known = known or {}
    referenced = {f"{p}/{MANIFEST}" for p in keep if p}
    for p in keep:
        if p:
            referenced.update(known[p] if p in known else read_manifest(region, p).keys())
    listed = _list_keys(region, root) if candidates is None else [k for k in candidates if k.startswith(root)]
    doomed = [k for k in listed if k not in referenced]
    if manifest_waits and candidates is not None and all(k.endswith(f"/{MANIFEST}") for k in doomed):
        return 0
    if doomed:
        _delete_keys(region, doomed)
    return len(doomed)


def delete_dataset_data(region: str, workspace_id: str, dataset_id: str) -> int:
    return prune(region, workspace_id, dataset_id, set())


def read_rows(region: str, data_prefix: str, *, internal: bool = False,
              limit: int | None = None) -> tuple[list[str], list[tuple]]:
    """The current rows of a snapshot by key, all or the first ``limit`` (tests, demo, small tools)."""
    with tempfile.TemporaryDirectory(prefix="gwread-") as tmp:
        source = snapshot_source(region, data_prefix, os.path.join(tmp, "files"))
        if source is None:
            return [], []
        con = connect(tmp)
        try:
            cur = con.execute(f"SELECT * FROM {source} ORDER BY _key" + (f" LIMIT {int(limit)}" if limit is not None else ""))
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        finally:
            con.close()
    if internal:
        return names, rows
    keep = [i for i, n in enumerate(names) if not n.startswith("_")]
    return [names[i] for i in keep], [tuple(r[i] for i in keep) for r in rows]


def snapshot_source(region: str, data_prefix: str, into: str) -> str | None:
    """Download what the snapshot under ``data_prefix`` needs into the local directory ``into`` and return a
    DuckDB table expression yielding its current rows (layers merged; None when it has no files).

    The query engine calls this while it builds a policy-projected table; the files are deleted before any
    caller's SQL runs. One GET per file, streamed to disk (no transfer thread pool), but none for a file
    this container holds a copy of (``local_parts``; a read here does not add one).
    """
    manifest = read_manifest(region, data_prefix.rstrip("/"))
    return merged_source(manifest, _download(region, manifest.keys(), into, keep=False))
