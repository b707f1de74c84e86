"""Parquet snapshots of dataset rows in the region's ``data`` bucket (``gateway.storage`` is the public face
and describes the layout). What goes where:

- ``manifests.py``: the bookkeeping: a snapshot's ``Manifest`` (base parts, layers, part digests, the snapshot
  it replaced), where a snapshot lives (``dataset_root``, ``snapshot_prefix``), reading and writing manifests,
  the manifests this process committed, and ``SnapshotResult``.
- ``writing.py``: ``write_snapshot``, which writes a sync's rows as a layer (``layers.py``) or a new base
  (``base.py``).
- ``digests.py``: each base part's digest (key range, sources, rows, hash sum) and what digests decide: the
  parts a layer must read, the parts a full refresh left unchanged, the columns holding nulls.
- ``reading.py``: a snapshot's current rows (layers merged): ``snapshot_source``, ``read_rows``, and the old
  snapshot as the writers see it (``old_view``).
- ``transfer.py``: files to and from S3 (one streamed GET or PUT each, the container's ``local_parts``),
  listing and deleting; ``pruning.py``: deleting what no kept snapshot references.
- ``sql.py``: DuckDB connections and SQL text helpers shared by the above.

DuckDB is imported inside functions: the workers entry must not load it at import time.
"""
