"""Dataset data in the region's ``data`` bucket, as Parquet snapshots.

Layout: ``datasets/<workspace>/<dataset>/<sync id>-a<attempt>/part-NNNNN.parquet``. Every successful sync
writes a complete new snapshot (the previous rows merged with the changes by row key) under a prefix of
its own, and the commit switches ``DatasetAttrs.data_prefix`` to it. Readers therefore always see one
whole snapshot: all ``*.parquet`` under ``data_prefix``, the schema's columns plus internal ``_key``,
``_source``, ``_hash`` (readers drop columns starting with ``_``), and no duplicate keys.
A crashed attempt leaves an orphan prefix that is never referenced and is removed by a later commit;
the previous snapshot is kept (in-flight queries may still read it), older ones are deleted.

DuckDB is imported inside the functions: the workers entry must not load it at import time.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chalicelib.core import aws
from chalicelib.gateway.vocabulary import DUCKDB_TYPES

BUCKET = "data"
PART_ROWS = 250_000  # rows per Parquet part
INTERNAL = ("_key", "_source", "_hash")


def connect(workdir: str) -> Any:
    """An in-memory DuckDB whose spill and home directories are ``workdir`` (Lambda: only /tmp is
    writable and HOME may be unset)."""
    import duckdb  # noqa: PLC0415

    return duckdb.connect(config={"temp_directory": workdir, "home_directory": workdir})


def _part_written(key: str) -> None:
    """Called after each part is uploaded (a seam for crash tests; does nothing)."""


@dataclass
class SnapshotResult:
    prefix: str
    row_count: int
    rows_written: int  # new or changed rows
    rows_deleted: int
    parts: int


def dataset_root(workspace_id: str, dataset_id: str) -> str:
    return f"datasets/{workspace_id}/{dataset_id}/"


def snapshot_prefix(workspace_id: str, dataset_id: str, sync_id: str, attempt: int) -> str:
    return f"{dataset_root(workspace_id, dataset_id)}{sync_id}-a{attempt}"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _list_keys(region: str, prefix: str) -> list[str]:
    s3 = aws.client("s3", region)
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=aws.bucket_name(BUCKET, region), Prefix=prefix):
        keys.extend(o["Key"] for o in page.get("Contents", []))
    return keys


def _delete_keys(region: str, keys: list[str]) -> None:
    s3 = aws.client("s3", region)
    for i in range(0, len(keys), 1000):
        s3.delete_objects(Bucket=aws.bucket_name(BUCKET, region),
                          Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})


def write_snapshot(region: str, workspace_id: str, dataset_id: str, sync_id: str, attempt: int,
                   schema: list[dict[str, Any]], rows: Iterable[tuple[str, str | None, dict[str, Any]]],
                   *, old_prefix: str | None, complete: bool, replaced_sources: set[str]) -> SnapshotResult:
    """Write the new snapshot: ``rows`` are ``(key, source, {column: coerced value})`` (unique
    keys); unless ``complete``, old rows are kept except those with a changed key or a replaced source."""
    columns = [(f["name"], DUCKDB_TYPES[f["type"]]) for f in schema]
    spec = {"_key": "VARCHAR", "_source": "VARCHAR", "_hash": "VARCHAR", **dict(columns)}
    prefix = snapshot_prefix(workspace_id, dataset_id, sync_id, attempt)
    stale = _list_keys(region, prefix + "/")
    if stale:  # parts of an earlier try of this very attempt
        _delete_keys(region, stale)
    with tempfile.TemporaryDirectory(prefix="gwsync-") as tmp:
        incoming, n_in = _spool_rows(tmp, rows)
        con = connect(tmp)
        try:
            _load_incoming(con, incoming, n_in, columns, spec)
            _load_old(con, region, tmp, old_prefix, spec)
            _keep_old_rows(con, complete=complete, replaced_sources=replaced_sources)
            written, deleted = _count_changes(con)
            total, parts = _upload_merged(con, region, tmp, prefix, spec)
        finally:
            con.close()
    return SnapshotResult(prefix=prefix, row_count=int(total), rows_written=int(written), rows_deleted=int(deleted),
                          parts=parts)


def _spool_rows(tmp: str, rows: Iterable[tuple[str, str | None, dict[str, Any]]]) -> tuple[str, int]:
    """The incoming rows as JSON lines in ``tmp`` (with their ``_key`` and ``_source``); path and count."""
    path = os.path.join(tmp, "incoming.jsonl")
    count = 0
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
    with open(path, "w", encoding="utf-8") as fh:
        for key, source, values in rows:
            values["_key"], values["_source"] = key, source
            fh.write(encode(values))
            fh.write("\n")
            count += 1
    return path, count


def _load_incoming(con: Any, path: str, count: int, columns: list[tuple[str, str]], spec: dict[str, str]) -> None:
    """Table ``incoming``: the spooled rows typed by the schema, with each row's change hash."""
    loaded = {"_key": "VARCHAR", "_source": "VARCHAR", **dict(columns)}
    struct = "{" + ", ".join(f"'{n.replace(chr(39), chr(39) * 2)}': '{t}'" for n, t in loaded.items()) + "}"
    # the change hash of a row: over its typed values, computed by DuckDB
    digest = (f"md5(CAST(struct_pack({', '.join(_ident(n) for n, _ in columns)}) AS VARCHAR))"
              if columns else "md5('')")
    select = ", ".join(f"{_ident(n)}" if n != "_hash" else f"{digest} AS _hash" for n in spec)
    if count:
        con.execute(f"CREATE TABLE incoming AS SELECT {select} FROM read_json(?, format='newline_delimited', "
                    f"columns={struct}, maximum_object_size=67108864)", [path])
    else:
        cols_sql = ", ".join(f"{_ident(n)} {t}" for n, t in spec.items())
        con.execute(f"CREATE TABLE incoming ({cols_sql})")


def _load_old(con: Any, region: str, tmp: str, old_prefix: str | None, spec: dict[str, str]) -> None:
    """Table ``old``: the current snapshot's rows cast to the new schema (columns it lacks are null)."""
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    old_files: list[str] = []
    if old_prefix:
        for i, k in enumerate(sorted(k for k in _list_keys(region, old_prefix + "/") if k.endswith(".parquet"))):
            path = os.path.join(tmp, f"old-{i:05d}.parquet")
            s3.download_file(bucket, k, path)
            old_files.append(path)
    if not old_files:
        con.execute("CREATE TABLE old AS SELECT * FROM incoming LIMIT 0")
        return
    present = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?, union_by_name=true)",
                                         [old_files]).fetchall()}
    select = ", ".join(
        (f"CAST({_ident(n)} AS {t}) AS {_ident(n)}" if n in present else f"CAST(NULL AS {t}) AS {_ident(n)}")
        for n, t in spec.items())
    con.execute(f"CREATE TABLE old AS SELECT {select} FROM read_parquet(?, union_by_name=true)", [old_files])


def _keep_old_rows(con: Any, *, complete: bool, replaced_sources: set[str]) -> None:
    """Table ``kept``: old rows that stay (none for a complete read; otherwise those whose key did not
    arrive again and whose source object was not replaced)."""
    con.execute("CREATE TABLE replaced (src VARCHAR)")
    if replaced_sources:
        con.executemany("INSERT INTO replaced VALUES (?)", [[s] for s in sorted(replaced_sources)])
    if complete:
        con.execute("CREATE TABLE kept AS SELECT * FROM old LIMIT 0")
    else:
        con.execute("CREATE TABLE kept AS SELECT o.* FROM old o WHERE o._key NOT IN (SELECT _key FROM incoming) "
                    "AND (o._source IS NULL OR o._source NOT IN (SELECT src FROM replaced))")


def _count_changes(con: Any) -> tuple[int, int]:
    """Rows written (new, or changed by hash) and rows deleted (old rows neither kept nor re-sent)."""
    old_count = con.execute("SELECT count(*) FROM old").fetchone()[0]
    kept = con.execute("SELECT count(*) FROM kept").fetchone()[0]
    written = con.execute("SELECT count(*) FROM incoming i LEFT JOIN old o ON o._key = i._key "
                          "WHERE o._hash IS DISTINCT FROM i._hash").fetchone()[0]
    replaced_old = con.execute("SELECT count(*) FROM old WHERE _key IN (SELECT _key FROM incoming)").fetchone()[0]
    return written, old_count - kept - replaced_old


def _upload_merged(con: Any, region: str, tmp: str, prefix: str, spec: dict[str, str]) -> tuple[int, int]:
    """Kept and incoming rows, ordered by key, uploaded as Parquet parts of ``PART_ROWS``; total and parts."""
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    cast_all = ", ".join(f"{_ident(n)}" for n in spec)
    con.execute(f"CREATE TABLE merged AS SELECT {cast_all} FROM kept UNION ALL "
                f"SELECT {cast_all} FROM incoming ORDER BY _key")
    total = con.execute("SELECT count(*) FROM merged").fetchone()[0]
    parts = max(1, -(-total // PART_ROWS))
    for p in range(parts):
        path = os.path.join(tmp, f"part-{p:05d}.parquet")
        con.execute(f"COPY (SELECT * FROM merged ORDER BY _key LIMIT {PART_ROWS} OFFSET {p * PART_ROWS}) "
                    f"TO '{path}' (FORMAT PARQUET, COMPRESSION ZSTD)")
        key = f"{prefix}/part-{p:05d}.parquet"
        s3.upload_file(path, bucket, key)
        _part_written(key)
    return total, parts


def prune(region: str, workspace_id: str, dataset_id: str, keep: set[str]) -> int:
    """Delete every snapshot prefix of the dataset except ``keep``; returns objects removed."""
    root = dataset_root(workspace_id, dataset_id)
    doomed = [k for k in _list_keys(region, root) if k[len(root):].split("/", 1)[0] not in
              {p[len(root):] for p in keep if p}]
    if doomed:
        _delete_keys(region, doomed)
    return len(doomed)


def delete_dataset_data(region: str, workspace_id: str, dataset_id: str) -> int:
    return prune(region, workspace_id, dataset_id, set())


def read_rows(region: str, data_prefix: str, *, internal: bool = False) -> tuple[list[str], list[tuple]]:
    """All rows of a snapshot (tests, demo and small tools; the query side has its own reader)."""
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    with tempfile.TemporaryDirectory(prefix="gwread-") as tmp:
        files = []
        for i, k in enumerate(sorted(k for k in _list_keys(region, data_prefix + "/") if k.endswith(".parquet"))):
            path = os.path.join(tmp, f"{i:05d}.parquet")
            s3.download_file(bucket, k, path)
            files.append(path)
        if not files:
            return [], []
        con = connect(tmp)
        try:
            cur = con.execute("SELECT * FROM read_parquet(?, union_by_name=true) ORDER BY _key", [files])
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
    DuckDB table expression yielding its current rows (None when it holds no Parquet part).

    The query engine calls this while it builds a policy-projected table; the files are deleted before any
    caller's SQL runs. One GET per part, streamed to disk (no transfer thread pool).
    """
    import shutil  # noqa: PLC0415

    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    os.makedirs(into, exist_ok=True)
    paths: list[str] = []
    for key in _list_keys(region, data_prefix.rstrip("/") + "/"):
        if not key.endswith(".parquet"):
            continue
        path = os.path.join(into, f"{len(paths):05d}.parquet")
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        with open(path, "wb") as fh:
            shutil.copyfileobj(body, fh, 1 << 20)
        paths.append(path)
    if not paths:
        return None
    return "read_parquet([" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "], union_by_name=true)"
