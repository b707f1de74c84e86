"""An incremental sync as a layer on the old snapshot: upserts of new or changed rows and deletes of keys
gone from replaced sources, or None when the layers would grow too big (the caller compacts)."""
from __future__ import annotations

import os
from typing import Any

from chalicelib.gateway.snapshots import reading, transfer
from chalicelib.gateway.snapshots.digests import touched_parts
from chalicelib.gateway.snapshots.manifests import Manifest, SnapshotResult, put_manifest, replaced_files
from chalicelib.gateway.snapshots.reading import merged_source
from chalicelib.gateway.snapshots.sql import HASH, column_types, ident, sql_literal
from chalicelib.gateway.snapshots.transfer import upload

MAX_LAYERS = 8  # an incremental sync that would add a ninth layer compacts instead
COMPACT_FRACTION = 0.25  # ... as does one whose layers would hold more rows than this share of the base
COMPACT_MIN_ROWS = 1_000  # ... unless they hold fewer rows than this (small data: layers are cheap)
LITERAL_SOURCES = 1_000  # replaced sources written into a layer's lookup as constants (more: a table)


def try_layer(region: str, prefix: str, schema: list[dict[str, Any]], stage: Any, old: Manifest,
               replaced_sources: set[str]) -> SnapshotResult | None:
    """The sync as a layer on ``old``, or None when the layers would grow too big (compact instead)."""
    con, tmp = stage.con, stage.workdir
    incoming = stage.materialize()
    touched = touched_parts(con, old, replaced_sources)
    if touched is not None:  # the touched base parts and the layers only: their current rows' keys and hashes
        part = Manifest(base=[old.base[i] for i in touched], layers=old.layers)
        source = merged_source(part, transfer.download(region, part.keys(), os.path.join(tmp, "old")))
        if source is None:
            con.execute("CREATE TABLE old_index (_key VARCHAR, _source VARCHAR, _hash UBIGINT)")
        else:  # only the rows the comparison uses: those of replaced sources and those of incoming keys
            con.execute(f"CREATE TABLE old_index AS {old_rows_used(con, source, replaced_sources)}")
        old_rows = old.row_count
    else:
        reading.old_view(con, region, tmp, old, column_types(schema))
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
    cols = ", ".join(ident(n) for n in column_types(schema))
    manifest, objects = write_layer(con, region, tmp, prefix, old, cols, deleted)
    total = old_rows + added - deleted
    manifest.row_count = int(total)
    put_manifest(region, prefix, manifest.replacing(old))
    return SnapshotResult(prefix=prefix, row_count=int(total), rows_written=int(written), rows_deleted=int(deleted),
                          parts=objects + 1, compacted=False, layer_added=objects > 0, incoming_rows=incoming,
                          keys=manifest.keys(), old_keys=old.keys(), older_files=replaced_files(old),
                          manifest=manifest)


def old_rows_used(con: Any, source: str, replaced: set[str]) -> str:
    """SQL: the ``_key``, ``_source`` and ``_hash`` of the rows of ``source`` that are of a replaced source or
    have an incoming key. Constants (the sources, the incoming keys' range) let the scans skip the other
    rows, often whole parts, before the lookup: parts are sorted by key and their statistics hold their
    sources' and keys' ranges."""
    among = ("FALSE" if not replaced else f"_source IN ({', '.join(map(sql_literal, sorted(replaced)))})"
             if len(replaced) <= LITERAL_SOURCES else "_source IN (SELECT src FROM replaced)")
    rows = f"SELECT _key, _source, {HASH} FROM {source} WHERE {among}"
    lo, hi = con.execute("SELECT min(_key), max(_key) FROM incoming").fetchone()
    if lo is None:  # no incoming row
        return rows
    return (f"{rows} UNION ALL SELECT _key, _source, {HASH} FROM {source} WHERE _key BETWEEN {sql_literal(lo)} "
            f"AND {sql_literal(hi)} AND _key IN (SELECT _key FROM incoming) AND NOT coalesce({among}, false)")


def write_layer(con: Any, region: str, tmp: str, prefix: str, old: Manifest, cols: str,
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
        upload(region, path, key)
        layer[kind] = key
        layer["rows"] += int(count)
        written += 1
    layers = old.layers + ([layer] if written else [])
    return Manifest(base=list(old.base), layers=layers, base_rows=old.base_rows, parts=old.parts), written
