"""Base part digests (``Manifest.parts``) and what they decide without reading the whole snapshot: the parts
an incremental layer must read, the new parts equal to old ones, and the columns holding a null."""
from __future__ import annotations

import os
from typing import Any

from chalicelib.gateway.snapshots import transfer
from chalicelib.gateway.snapshots.manifests import Manifest
from chalicelib.gateway.snapshots.sql import files_sql, ident, ranges_sql

STATS_CUT = 256  # bytes: DuckDB's Parquet writer cuts string statistics there


def part_digests(con: Any, paths: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Per part (path) with rows, its manifest digest: lowest and highest ``_key``, its ``_source`` values ("" for
    none), its rows and the sum of its row hashes (as text); and the rows per source over all parts. From the
    parts' Parquet statistics where they decide (one source, no null, strings shorter than DuckDB's cut),
    with one read of the hashes; the other parts are scanned."""
    files = files_sql(paths)
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
        exact = all(exact_statistic(lo) and exact_statistic(hi) and nulls == 0 for _, lo, hi, nulls in keys + sources)
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
                f"FROM read_parquet({files_sql(scan)}, filename = true) GROUP BY ALL) GROUP BY filename").fetchall():
            digests[path] = {"lo": lo, "hi": hi, "sources": sorted(sources), "rows": int(sum(rows)), "hsum": str(hsum)}
            for src, n in zip(sources, rows, strict=True):
                by_source[src] = by_source.get(src, 0) + n
    return digests, by_source


def exact_statistic(value: str | None) -> bool:
    """Whether a string statistic may stand for a part's key range or source: DuckDB's Parquet writer keeps a
    string shorter than ``STATS_CUT`` bytes whole and cuts a longer one back to a character's start (a cut
    maximum is then raised, a bound rather than a key), or leaves it out. One as long as a cut may be one."""
    return value is not None and len(value.encode()) < STATS_CUT - 4


def same_parts(con: Any, region: str, tmp: str, old: Manifest, digests: dict[str, dict[str, Any]]
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
        index.setdefault(digest_key(part), j)
    same = {path: index[digest_key(d)] for path, d in digests.items() if digest_key(d) in index}
    local: dict[str, str] = {}
    if same and old.layers:
        layer_files = [k for layer in old.layers for k in (layer.get("upserts"), layer.get("deletes")) if k]
        local = transfer.download(region, layer_files, os.path.join(tmp, "old-layers"))
        ranges = ranges_sql([(j, parts[j]["lo"], parts[j]["hi"]) for j in sorted(set(same.values()))])
        layer_keys = " UNION ALL ".join(f"SELECT _key FROM read_parquet({files_sql([local[k]])})" for k in layer_files)
        in_range = [r[0] for r in con.execute(f"SELECT DISTINCT r.i FROM {ranges} r JOIN ({layer_keys}) k "
                                              "ON k._key BETWEEN r.lo AND r.hi ORDER BY 1").fetchall()]
        # a range only bounds a part's keys: a part a layer key falls in is read for the keys themselves
        local.update(transfer.download(region, [old.base[j] for j in in_range], os.path.join(tmp, "old-ranged")))
        overridden = {j for j in in_range if con.execute(
            f"SELECT count(*) FROM read_parquet({files_sql([local[old.base[j]]])}) "
            f"WHERE _key IN (SELECT _key FROM ({layer_keys}))").fetchone()[0]}
        same = {path: j for path, j in same.items() if j not in overridden}
    taken: set[int] = set()
    out = {}
    for path, j in same.items():  # one new part per old part
        if j not in taken:
            out[path] = j
            taken.add(j)
    return out, local


def digest_key(part: dict[str, Any]) -> tuple:
    return part["lo"], part["hi"], tuple(part["sources"]), part.get("rows"), part.get("hsum")


def null_columns(con: Any, paths: list[str]) -> set[str]:
    """The columns holding a null in the parts (from their Parquet statistics; counted where one lacks them)."""
    found = con.execute("SELECT path_in_schema, sum(stats_null_count), count(*) - count(stats_null_count) "
                        f"FROM parquet_metadata({files_sql(paths)}) GROUP BY ALL").fetchall()
    unknown = [name for name, _, missing in found if missing]
    nulls = {name for name, n, missing in found if n and not missing}
    if unknown:
        got = con.execute("SELECT " + ", ".join(f"bool_or({ident(n)} IS NULL)" for n in unknown)
                          + f" FROM read_parquet({files_sql(paths)})").fetchone()
        nulls.update(n for n, has in zip(unknown, got, strict=True) if has)
    return nulls


def touched_parts(con: Any, old: Manifest, replaced: set[str]) -> list[int] | None:
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
        touched.update(r[0] for r in con.execute(f"SELECT DISTINCT r.i FROM {ranges_sql(ranges)} r JOIN incoming i "
                                                 "ON i._key BETWEEN r.lo AND r.hi").fetchall())
    return sorted(touched)
