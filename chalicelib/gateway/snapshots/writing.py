"""Writing a sync's snapshot: a layer on the old one when possible, else a new base."""
from __future__ import annotations

from typing import Any

from chalicelib.gateway.snapshots import layers
from chalicelib.gateway.snapshots.base import write_base
from chalicelib.gateway.snapshots.layers import try_layer
from chalicelib.gateway.snapshots.manifests import Manifest, SnapshotResult, read_manifest, snapshot_prefix


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
                 and len(old.layers) < layers.MAX_LAYERS)
    if layerable:
        result = try_layer(region, prefix, schema, stage, old, replaced_sources)
        if result is not None:
            return result
    return write_base(region, prefix, schema, stage, old, complete)
