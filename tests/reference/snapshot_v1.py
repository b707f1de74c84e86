"""The sync's snapshot writer as it was before the single-pass rewrite, kept as a test oracle only
(``tests/functional/gateway/test_sync_equivalence.py``): table ``incoming`` of a ``typed_rows_v1`` stage
merged with the old snapshot into a ``merged`` table, then written part by part. Not product code."""
from __future__ import annotations

import os
from typing import Any

from chalicelib.gateway.snapshots.base import PART_ROWS
from chalicelib.gateway.snapshots.layers import COMPACT_FRACTION, COMPACT_MIN_ROWS, MAX_LAYERS
from chalicelib.gateway.snapshots.manifests import (
    Manifest,
    SnapshotResult,
    put_manifest,
    read_manifest,
    snapshot_prefix,
)
from chalicelib.gateway.snapshots.reading import merged_source
from chalicelib.gateway.snapshots.sql import ident
from chalicelib.gateway.snapshots.transfer import delete_keys, download, list_keys, upload
from chalicelib.gateway.vocabulary import DUCKDB_TYPES


def write_snapshot(region: str, workspace_id: str, dataset_id: str, sync_id: str, attempt: int,
                   schema: list[dict[str, Any]], stage: Any, *, old_prefix: str | None, complete: bool,
                   replaced_sources: set[str], compact: bool = False) -> SnapshotResult:
    """Write the new snapshot from table ``incoming`` of ``stage`` (an ``ingest.Stage``: typed rows,
    unique keys). Unless ``complete``, old rows stay except those with a key that arrived again or from a
    replaced source. As a layer on the old snapshot when possible, else (``compact``, ``complete``, no or
    a legacy old snapshot, layers grown too big) as a new base.

    A layer whose rows all come from replaced sources reads, of the old snapshot, only its layers and the
    base parts whose digest (``Manifest.parts``) says they hold a replaced source's rows or an incoming
    key: O(changed rows + parts touched + layers + manifest), not O(snapshot)."""
    spec = {"_key": "VARCHAR", "_source": "VARCHAR", "_hash": "VARCHAR",
            **{f["name"]: DUCKDB_TYPES[f["type"]] for f in schema}}
    prefix = snapshot_prefix(workspace_id, dataset_id, sync_id, attempt)
    stale = list_keys(region, prefix + "/")
    if stale:  # files of an earlier try of this very attempt
        delete_keys(region, stale)
    con, tmp = stage.con, stage.workdir
    old = read_manifest(region, old_prefix) if old_prefix else Manifest(base=[], base_rows=0)
    con.execute("CREATE TABLE replaced (src VARCHAR)")
    if replaced_sources:
        con.executemany("INSERT INTO replaced VALUES (?)", [[s] for s in sorted(replaced_sources)])
    layerable = (not compact and not complete and bool(old_prefix) and old.base_rows >= 0
                 and len(old.layers) < MAX_LAYERS)
    touched = _touched_parts(con, old, replaced_sources) if layerable else None
    if touched is not None:  # the touched base parts and the layers only: their current rows' keys and hashes
        part = Manifest(base=[old.base[i] for i in touched], layers=old.layers)
        source = merged_source(part, download(region, part.keys(), os.path.join(tmp, "old")))
        # only the rows the comparison uses: those of replaced sources and those of incoming keys
        con.execute(f"CREATE TABLE old_index AS SELECT _key, _source, _hash FROM {source} WHERE _source IN "
                    "(SELECT src FROM replaced) OR _key IN (SELECT _key FROM incoming)" if source else
                    "CREATE TABLE old_index (_key VARCHAR, _source VARCHAR, _hash VARCHAR)")
        old_rows = old.row_count
    else:
        local = download(region, old.keys(), os.path.join(tmp, "old"))
        source = merged_source(old, local)
        present = ({r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()} if source else set())
        select = ", ".join(
            (f"CAST({ident(n)} AS {t}) AS {ident(n)}" if n in present else f"CAST(NULL AS {t}) AS {ident(n)}")
            for n, t in spec.items())
        if source:
            con.execute(f"CREATE TEMP VIEW old AS SELECT {select} FROM {source}")
        else:
            con.execute("CREATE TEMP VIEW old AS SELECT " + ", ".join(
                f"CAST(NULL AS {t}) AS {ident(n)}" for n, t in spec.items()) + " WHERE false")
        con.execute("CREATE TABLE old_index AS SELECT _key, _source, _hash FROM old")
        old_rows = con.execute("SELECT count(*) FROM old_index").fetchone()[0]
    written = con.execute("SELECT count(*) FROM incoming i LEFT JOIN old_index o ON o._key = i._key "
                          "WHERE o._hash IS DISTINCT FROM i._hash").fetchone()[0]
    if complete:
        deleted = con.execute("SELECT count(*) FROM old_index WHERE _key NOT IN (SELECT _key FROM incoming)").fetchone()[0]
    else:
        deleted = con.execute("SELECT count(*) FROM old_index o WHERE o._source IN (SELECT src FROM replaced) "
                              "AND o._key NOT IN (SELECT _key FROM incoming)").fetchone()[0]
    added = con.execute("SELECT count(*) FROM incoming WHERE _key NOT IN (SELECT _key FROM old_index)").fetchone()[0]
    layer_rows = sum(int(layer.get("rows", 0)) for layer in old.layers)
    incoming = con.execute("SELECT count(*) FROM incoming").fetchone()[0]
    grown = layer_rows + incoming + deleted
    as_layer = layerable and (grown <= COMPACT_MIN_ROWS or grown <= COMPACT_FRACTION * old.base_rows)
    if touched is not None and not as_layer:  # compacting after all: the whole old snapshot is needed
        con.execute("DROP TABLE replaced")
        con.execute("DROP TABLE old_index")
        return write_snapshot(region, workspace_id, dataset_id, sync_id, attempt, schema, stage, old_prefix=old_prefix,
                              complete=complete, replaced_sources=replaced_sources, compact=True)
    cols = ", ".join(ident(n) for n in spec)
    if as_layer:
        manifest, objects = _write_layer(con, region, tmp, prefix, old, cols, deleted)
        total = old_rows + added - deleted
        manifest.row_count = int(total)
    else:
        keep = ("false" if complete else
                "o._key NOT IN (SELECT _key FROM incoming) AND (o._source IS NULL OR o._source NOT IN (SELECT src FROM replaced))")
        kept_rows = 0 if complete else con.execute(f"SELECT count(*) FROM old o WHERE {keep}").fetchone()[0]
        total = kept_rows + incoming
        con.execute(f"CREATE TABLE merged AS SELECT {cols} FROM (SELECT {cols} FROM old o WHERE {keep} "
                    f"UNION ALL SELECT {cols} FROM incoming) ORDER BY _source NULLS FIRST, _key")
        con.execute("DROP TABLE incoming")
        keys = _upload_parts(con, region, tmp, prefix, "merged", total)
        parts = [{"lo": lo, "hi": hi, "sources": sorted(srcs)} for _, lo, hi, srcs in con.execute(
            f"SELECT rowid // {PART_ROWS} AS p, min(_key), max(_key), list(DISTINCT coalesce(_source, '')) "
            "FROM merged GROUP BY p ORDER BY p").fetchall()]
        manifest = Manifest(base=keys, row_count=int(total), base_rows=int(total),
                            parts=parts if len(parts) == len(keys) else None)
        objects = len(keys)
    put_manifest(region, prefix, manifest)
    return SnapshotResult(prefix=prefix, row_count=int(total), rows_written=int(written), rows_deleted=int(deleted),
                          parts=objects + 1, compacted=not as_layer)


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
    ranges = [[i, part["lo"], part["hi"]] for i, part in enumerate(old.parts) if i not in touched]
    if ranges:
        con.execute("CREATE TABLE part_ranges (part INTEGER, lo VARCHAR, hi VARCHAR)")
        con.executemany("INSERT INTO part_ranges VALUES (?, ?, ?)", ranges)
        touched.update(r[0] for r in con.execute("SELECT DISTINCT r.part FROM part_ranges r JOIN incoming i "
                                                 "ON i._key BETWEEN r.lo AND r.hi").fetchall())
        con.execute("DROP TABLE part_ranges")
    return sorted(touched)


def _write_layer(con: Any, region: str, tmp: str, prefix: str, old: Manifest, cols: str,
                 deleted: int) -> tuple[Manifest, int]:
    """The new layer: incoming rows not already current with the same hash and source, and deletes of
    old keys from replaced sources that did not arrive again."""
    n = len(old.layers) + 1
    layer: dict[str, Any] = {"upserts": None, "deletes": None, "rows": 0}
    con.execute(f"CREATE TABLE upserts AS SELECT {cols} FROM incoming i WHERE NOT EXISTS (SELECT 1 FROM old_index o "
                "WHERE o._key = i._key AND o._hash = i._hash AND o._source IS NOT DISTINCT FROM i._source) ORDER BY _key")
    upserts = con.execute("SELECT count(*) FROM upserts").fetchone()[0]
    written = 0
    for kind, count, sql in (("upserts", upserts, "SELECT * FROM upserts"),
                             ("deletes", deleted, "SELECT o._key FROM old_index o WHERE o._source IN "
                              "(SELECT src FROM replaced) AND o._key NOT IN (SELECT _key FROM incoming) ORDER BY 1")):
        if not count:
            continue
        path = os.path.join(tmp, f"layer-{kind}.parquet")
        con.execute(f"COPY ({sql}) TO '{path}' (FORMAT PARQUET, COMPRESSION ZSTD)")
        key = f"{prefix}/layer-{n:03d}-{kind}.parquet"
        upload(region, path, key)
        layer[kind] = key
        layer["rows"] += int(count)
        written += 1
    layers = old.layers + ([layer] if written else [])
    return Manifest(base=list(old.base), layers=layers, base_rows=old.base_rows, parts=old.parts), written


def _upload_parts(con: Any, region: str, tmp: str, prefix: str, table: str, total: int) -> list[str]:
    """Rows of ``table`` (in its order, a table held in DuckDB's limited memory or spilled) uploaded as
    Parquet parts of ``PART_ROWS``; their keys."""
    parts = max(1, -(-total // PART_ROWS))
    keys = []
    for p in range(parts):
        path = os.path.join(tmp, f"part-{p:05d}.parquet")
        con.execute(f"COPY (SELECT * FROM {table} WHERE rowid >= {p * PART_ROWS} AND rowid < {(p + 1) * PART_ROWS}) "
                    f"TO '{path}' (FORMAT PARQUET, COMPRESSION ZSTD)")
        key = f"{prefix}/part-{p:05d}.parquet"
        upload(region, path, key)
        keys.append(key)
    return keys
