"""Reading a snapshot: its current rows with the layers merged (``merged_source``), for the query engine
(``snapshot_source``), small tools (``read_rows``) and the writers (``old_view``)."""
from __future__ import annotations

import os
import tempfile
from typing import Any

from chalicelib.gateway.snapshots import transfer
from chalicelib.gateway.snapshots.manifests import Manifest, read_manifest
from chalicelib.gateway.snapshots.sql import connect, files_sql, ident, no_rows


def merged_source(manifest: Manifest, local: dict[str, str]) -> str | None:
    """A DuckDB table expression yielding the snapshot's current rows (files already downloaded to
    ``local``), or None when it has no files."""
    base = [local[k] for k in manifest.base]
    layers = [(i, layer) for i, layer in enumerate(manifest.layers, start=1)
              if layer.get("upserts") or layer.get("deletes")]
    if not layers:
        return f"read_parquet({files_sql(base)}, union_by_name = true)" if base else None
    rows = [f"SELECT *, 0 AS _layer FROM read_parquet({files_sql(base)}, union_by_name = true)"] if base else []
    keys = []
    for i, layer in layers:
        if layer.get("upserts"):
            rows.append(f"SELECT *, {i} AS _layer FROM read_parquet({files_sql([local[layer['upserts']]])})")
            keys.append(f"SELECT _key, {i} AS _layer FROM read_parquet({files_sql([local[layer['upserts']]])})")
        if layer.get("deletes"):
            keys.append(f"SELECT _key, {i} AS _layer FROM read_parquet({files_sql([local[layer['deletes']]])})")
    if not rows:
        return None
    return (f"(SELECT r.* EXCLUDE (_layer) FROM ({' UNION ALL BY NAME '.join(rows)}) r "
            f"LEFT JOIN (SELECT _key, max(_layer) AS _top FROM ({' UNION ALL '.join(keys)}) GROUP BY _key) s "
            f"ON s._key = r._key WHERE s._top IS NULL OR r._layer >= s._top)")


def snapshot_source(region: str, data_prefix: str, into: str) -> str | None:
    """Download what the snapshot under ``data_prefix`` needs into the local directory ``into`` and return a
    DuckDB table expression yielding its current rows (layers merged; None when it has no files).

    The query engine calls this while it builds a policy-projected table; the files are deleted before any
    caller's SQL runs. One GET per file, streamed to disk (no transfer thread pool), but none for a file
    this container holds a copy of (``local_parts``; a read here does not add one).
    """
    manifest = read_manifest(region, data_prefix.rstrip("/"))
    return merged_source(manifest, transfer.download(region, manifest.keys(), into, keep=False))


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


def old_view(con: Any, region: str, tmp: str, old: Manifest, spec: dict[str, str],
              local: dict[str, str] | None = None) -> None:
    """View ``old``: the old snapshot's current rows in the new schema's types (files in ``local`` are not
    downloaded again)."""
    local = dict(local or {})
    local.update(transfer.download(region, [k for k in old.keys() if k not in local], os.path.join(tmp, "old-all")))
    source = merged_source(old, local)
    present = ({r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()} if source else set())
    select = ", ".join(
        (f"CAST({ident(n)} AS {t}) AS {ident(n)}" if n in present else f"CAST(NULL AS {t}) AS {ident(n)}")
        for n, t in spec.items())
    if source:
        con.execute(f"CREATE OR REPLACE TEMP VIEW old AS SELECT {select} FROM {source}")
    else:
        con.execute(f"CREATE OR REPLACE TEMP VIEW old AS {no_rows(spec)}")
