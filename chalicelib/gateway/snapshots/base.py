"""A new base: the kept old rows and the incoming ones, sorted by ``_source`` then ``_key`` in one COPY into
Parquet parts of about ``PART_ROWS`` rows, uploaded while DuckDB counts what changed."""
from __future__ import annotations

import contextvars
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chalicelib.gateway import local_parts
from chalicelib.gateway.snapshots import reading
from chalicelib.gateway.snapshots.digests import null_columns, part_digests, same_parts
from chalicelib.gateway.snapshots.manifests import Manifest, SnapshotResult, put_manifest, replaced_files
from chalicelib.gateway.snapshots.sql import column_types, files_sql, ident, no_rows, ranges_sql
from chalicelib.gateway.snapshots.transfer import part_keys, upload_all

PART_ROWS = 250_000  # rows per Parquet part (rounded up to DuckDB's 2,048-row chunks)


def copy_sorted(con: Any, body: str, out: str, *, one_source: bool = False) -> list[str]:
    """ONE ``COPY (body ORDER BY _source, _key)`` (``_key`` alone for the rows of ``one_source``) into Parquet
    parts of one row group each under ``out``: about ``PART_ROWS`` rows, cut where DuckDB's 2,048-row chunks
    pass it; the parts' paths in order (none when there are no rows)."""
    shutil.rmtree(out, ignore_errors=True)
    order = "_key" if one_source else "_source NULLS FIRST, _key"
    con.execute(f"COPY ({body} ORDER BY {order}) TO '{out}' (FORMAT PARQUET, COMPRESSION ZSTD, "
                f"ROW_GROUP_SIZE {PART_ROWS}, ROW_GROUPS_PER_FILE 1, FILENAME_PATTERN 'part-{{i}}')")
    files = sorted(os.listdir(out) if os.path.isdir(out) else [], key=lambda n: int(n[5:].split(".")[0]))
    return [os.path.join(out, n) for n in files]


def part_runs(parts: list[tuple[str, int]]) -> list[list[str]]:
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


def write_base(region: str, prefix: str, schema: list[dict[str, Any]], stage: Any, old: Manifest,
                complete: bool) -> SnapshotResult:
    """A new base: the kept old rows (none when ``complete``) and the incoming ones, sorted, in one COPY."""
    con, tmp = stage.con, stage.workdir
    spec = column_types(schema)
    cols = ", ".join(ident(n) for n in spec)
    if not complete:  # its rows are kept
        reading.old_view(con, region, tmp, old, spec)
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
            paths = copy_sorted(con, body(), out)
        else:  # straight from the objects, in runs (one COPY each): parts sorted within, by source across
            paths = []
            os.makedirs(out, exist_ok=True)
            for g, sqls in enumerate(part_runs(stage.incoming_parts)):
                rows = " UNION ALL ".join(f"SELECT {cols} FROM ({sql})" for sql in sqls)
                if len(sqls) > 1:  # a run of small objects: staged first, so the sort is fed by one scan
                    con.execute(f"CREATE OR REPLACE TABLE run_rows AS {rows}")
                    rows = "SELECT * FROM run_rows"
                paths += copy_sorted(con, rows, os.path.join(out, f"g{g:05d}"), one_source=len(sqls) == 1)
                con.execute("DROP TABLE IF EXISTS run_rows")
        if not paths:  # no rows: one empty part holds the schema
            os.makedirs(out, exist_ok=True)
            paths = [os.path.join(out, "empty.parquet")]
            con.execute(f"COPY ({no_rows(spec)}) TO '{paths[0]}' (FORMAT PARQUET, COMPRESSION ZSTD)")
        return paths

    def counts(paths: list[str], digests: dict[str, dict[str, Any]]) -> tuple[int, int, int, int]:
        """(rows, distinct keys, rows new or changed against the old snapshot, old keys gone): one join of
        the parts' keys and hashes with the old snapshot's. A complete sync leaves out of it the parts equal
        to an old part (``same_parts``), and that part: nothing in them was written or deleted."""
        same: dict[str, int] = {}
        if complete:
            same, local = same_parts(con, region, tmp, old, digests)
            rest = Manifest(base=[k for j, k in enumerate(old.base) if j not in set(same.values())],
                            layers=old.layers)
            reading.old_view(con, region, tmp, rest, spec, local)
        others = [p for p in paths if p not in same]
        new = (f"SELECT _key, _hash FROM read_parquet({files_sql(others)})" if others else
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
                f"{ranges_sql([(i, digests[p]['lo'], digests[p]['hi']) for i, p in enumerate(ranged)])} r "
                "ON n._key BETWEEN r.lo AND r.hi").fetchall()} if others and same else set()
            counted = others + sorted(near)
            distinct = same_rows - sum(digests[p]["rows"] for p in near) + (con.execute(
                f"SELECT count(DISTINCT hash(_key)) FROM read_parquet({files_sql(counted)})").fetchone()[0]
                if counted else 0)
        return total, distinct, written, deleted

    paths = write()
    keys = part_keys(prefix, paths)
    with ThreadPoolExecutor(max_workers=1) as pool:  # the parts go up while DuckDB reads them for the counts
        uploads = pool.submit(contextvars.copy_context().run, upload_all, region, paths, keys)
        digests, by_source = part_digests(con, paths)
        total, distinct, written, deleted = counts(paths, digests)
        nulls = null_columns(con, paths) if complete else set()
        if total != distinct:
            uploads.result()
            direct = False  # the same key in several rows: the last one wins (``Stage.materialize``), written again
            shutil.rmtree(out, ignore_errors=True)
            paths = write()
            keys = part_keys(prefix, paths)
            uploads = pool.submit(contextvars.copy_context().run, upload_all, region, paths, keys)
            digests = part_digests(con, paths)[0]
            total, _, written, deleted = counts(paths, digests)
        uploads.result()
    parts = [digests[path] for path in paths if path in digests]
    for path, key in zip(paths, keys, strict=True):
        local_parts.keep(region, key, path, move=True)
    manifest = Manifest(base=keys, row_count=int(total), base_rows=int(total),
                        parts=parts if len(parts) == len(keys) else None)
    put_manifest(region, prefix, manifest.replacing(old))
    return SnapshotResult(prefix=prefix, row_count=int(total), rows_written=int(written), rows_deleted=int(deleted),
                          parts=len(keys) + 1, incoming_rows=int(total) if complete else stage.incoming_rows,
                          keys=manifest.keys(), old_keys=old.keys(), older_files=replaced_files(old),
                          rows_by_source=by_source if complete else {}, null_columns=nulls, manifest=manifest)
