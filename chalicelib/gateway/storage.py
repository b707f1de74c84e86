"""Dataset data in the region's ``data`` bucket, as Parquet snapshots.

Layout: ``datasets/<workspace>/<dataset>/<sync id>-a<attempt>/``. Each successful sync writes under a
prefix of its own and the commit switches ``DatasetAttrs.data_prefix`` to it, so every content change
changes ``data_prefix``. A prefix holds ``manifest.json`` naming the snapshot's files:

- ``base``: Parquet parts, each sorted by ``_source`` then ``_key`` (about ``base.PART_ROWS`` rows each), possibly under an
  older prefix, and ``parts``: each part's digest (key range and sources) for change detection;
- ``layers``: in order, each an upsert file (new or changed rows) and/or a delete file (``_key`` only).

A row of the base or of layer *i* is current unless its key appears in a later layer (upserted again or
deleted): ``snapshot_source`` merges this on read. An incremental sync therefore writes only its layer
(O(changed rows)); a full refresh, a type change, or layers grown past ``layers.MAX_LAYERS`` or
``COMPACT_FRACTION`` of the base compact everything into a new base. A prefix without a manifest (written
before manifests existed) is a base of all its ``*.parquet``. Every file holds the schema's columns plus
internal ``_key``, ``_source``, ``_hash`` (readers drop columns starting with ``_``). ``_hash`` is a
``UBIGINT``; files written before it was held it as its decimal text, which every comparison casts back
(``sql.HASH``), so old and new files mix in one snapshot.
A crashed attempt leaves an orphan prefix that is never referenced and is removed by a later commit;
the previous snapshot's files are kept (in-flight queries may still read them), other unreferenced
files are deleted.

This module is the public face; the work is done in ``gateway/snapshots/`` (its ``__init__`` says what goes
where). DuckDB is imported inside the functions: the workers entry must not load it at import time.
"""
from __future__ import annotations

from chalicelib.gateway.snapshots.manifests import (
    MANIFEST,
    Manifest,
    SnapshotResult,
    dataset_root,
    read_manifest,
    remember_committed,
    snapshot_prefix,
)
from chalicelib.gateway.snapshots.pruning import delete_dataset_data, prune
from chalicelib.gateway.snapshots.reading import merged_source, read_rows, snapshot_source
from chalicelib.gateway.snapshots.sql import connect, sql_literal
from chalicelib.gateway.snapshots.transfer import BUCKET
from chalicelib.gateway.snapshots.writing import write_snapshot

__all__ = ["BUCKET", "MANIFEST", "Manifest", "SnapshotResult", "connect", "dataset_root", "delete_dataset_data",
           "merged_source", "prune", "read_manifest", "read_rows", "remember_committed", "snapshot_prefix",
           "snapshot_source", "sql_literal", "write_snapshot"]
