"""Region move, dry run: everything that would move for one workspace, and how long the window would be.

``python -m chalicelib.residency.planner <workspace_id> --to <residency> [--json] [--items-per-second N]
[--mb-per-second N]`` reads (never writes) the workspace's regional content the way a backup does
(``content.py``), and lists: tables with item counts and bytes, objects and bytes per bucket, the indexes
to rebuild in the new region (knowledge index builds, the catalog and lineage, DynamoDB secondary
indexes), the API tokens to re-issue (tokens name the workspace, whose region changes), what stays behind
(audit archive and digests under Object Lock, backups, the DR copy), and a maintenance-window estimate.

The estimate divides the counts by copy rates: by default those ``python -m bench residency`` measured for
a restore (``DEFAULT_ITEMS_PER_SECOND``, ``DEFAULT_MB_PER_SECOND``; the figures and where they come from
are printed with the plan); measure the target environment and pass its rates for a real window. The
supervised migration itself is documented in ``docs/residency.md`` ("Region move").
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from chalicelib.core import aws, clock
from chalicelib.core.http.errors import ApiError
from chalicelib.core.ids import is_id
from chalicelib.core.regions import RESIDENCIES, region_for
from chalicelib.core.store.tables import global_model
from chalicelib.core.tenancy import workspaces
from chalicelib.identity.models import ApiTokenAttrs
from chalicelib.residency import content

# Restore throughput measured by ``python -m bench residency`` (docs/benchmarks.md, "Backup and restore"):
# the write side of a move is a restore into the new region. Measured against moto in process on a shared
# 2-core machine (10k items in 173 s, 100 MB in 8.3 s): far slower than DynamoDB and S3, so an estimate
# from these defaults is an upper bound; pass the target environment's rates.
DEFAULT_ITEMS_PER_SECOND = 58.0
DEFAULT_MB_PER_SECOND = 12.0
RATES_SOURCE = ("restore throughput measured by `python -m bench residency` against the emulator (moto, "
                "in process): an upper bound for AWS")
FIXED_MINUTES = 30  # freeze, final delta copy check, directory switch, smoke test, unfreeze (runbook steps)
INDEX_ITEMS_PER_SECOND = 50.0  # re-embedding: knowledge index chunks rebuilt per second (see the plan's note)
SECONDARY_INDEXES = {"audit_events": ["by_time"], "lineage_edges": ["by_target"],
                     "agent_runs": ["by_agent", "by_active"], "memberships": ["by_user"]}


class PlanError(ValueError):
    """Bad input: the message says why (exit status 2)."""


def _workspace(workspace_id: str) -> Any:
    if not is_id(workspace_id, "ws"):
        raise PlanError(f"'{workspace_id}' is not a workspace id (ws_...)")
    try:
        return workspaces().get(workspace_id, consistent_read=True)
    except Exception:  # noqa: BLE001 DoesNotExist, or a malformed key
        raise PlanError(f"workspace {workspace_id} does not exist") from None


def _tables(region: str, workspace_id: str) -> list[dict[str, Any]]:
    out = []
    for table in content.backed_up_tables():
        n = size = 0
        for item in content.items(region, table, workspace_id):
            n += 1
            size += len(content.canonical(item))
        out.append({"table": table.name, "items": n, "bytes": size})
    return out


def _buckets(region: str, workspace_id: str) -> list[dict[str, Any]]:
    s3 = aws.client("s3", region)
    out = []
    for bucket, prefix in content.prefixes(workspace_id).items():
        n = size = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=aws.bucket_name(bucket, region), Prefix=prefix):
            for o in page.get("Contents", []):
                n += 1
                size += o["Size"]
        out.append({"bucket": bucket, "prefix": prefix, "objects": n, "bytes": size})
    return out


def _api_tokens(workspace_id: str) -> list[dict[str, Any]]:
    """Active API tokens naming the workspace (global directory; the JWT names the workspace, and clients
    must move to the new region's addresses, so each is re-issued)."""

    now = clock.now()
    model = global_model(ApiTokenAttrs)
    found = [t for t in model.scan(model.workspace_id == workspace_id)
             if not t.revoked_at and t.expires_at > now]
    return [{"id": t.id, "user_id": t.user_id, "name": t.name, "expires_at": clock.iso(t.expires_at)}
            for t in sorted(found, key=lambda t: t.id)]


def _indexes(tables: list[dict[str, Any]], buckets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts = {t["table"]: t["items"] for t in tables}
    knowledge = next(b for b in buckets if b["bucket"] == "knowledge")
    out = [
        {"index": "knowledge index", "what": "every dataset's index build (chunks, BM25 files, embeddings) "
         "rebuilt in the new region from the moved documents and datasets, by the new region's models",
         "manifests": counts.get("knowledge", 0), "objects": knowledge["objects"], "bytes": knowledge["bytes"]},
        {"index": "catalog", "what": "datasets (normalised schemas, field policies with the new region's "
         "field-hash key: hashed values change) and their lineage edges",
         "datasets": counts.get("datasets", 0), "lineage_edges": counts.get("lineage_edges", 0)},
    ]
    out += [{"index": f"{table}.{ix}", "what": "DynamoDB secondary index, rebuilt by DynamoDB as items are written",
             "items": counts.get(table, 0)} for table, names in SECONDARY_INDEXES.items() for ix in names]
    return out


def plan(workspace_id: str, to: str, *, items_per_second: float = DEFAULT_ITEMS_PER_SECOND,
         mb_per_second: float = DEFAULT_MB_PER_SECOND) -> dict[str, Any]:
    """The dry-run plan (reads only). ``PlanError`` for an unknown workspace or a target that is not
    another open residency."""
    ws = _workspace(workspace_id)
    if to not in RESIDENCIES:
        raise PlanError(f"unknown residency '{to}'; open ones: "
                        + ", ".join(r.code for r in RESIDENCIES.values() if r.region))
    try:
        target = region_for(to)
    except ApiError as err:
        raise PlanError(err.detail) from None
    if to == ws.residency:
        raise PlanError(f"workspace {workspace_id} is already in {to} ({ws.region})")
    if items_per_second <= 0 or mb_per_second <= 0:
        raise PlanError("rates must be positive")
    tables = _tables(ws.region, ws.id)
    buckets = _buckets(ws.region, ws.id)
    tokens = _api_tokens(ws.id)
    indexes = _indexes(tables, buckets)
    items = sum(t["items"] for t in tables)
    object_bytes = sum(b["bytes"] for b in buckets)
    knowledge_objects = next(b["objects"] for b in buckets if b["bucket"] == "knowledge")
    copy_items_s = items / items_per_second
    copy_objects_s = object_bytes / 1024 / 1024 / mb_per_second
    reindex_s = knowledge_objects / INDEX_ITEMS_PER_SECOND
    total_min = math.ceil((copy_items_s + copy_objects_s + reindex_s) / 60) + FIXED_MINUTES
    return {
        "dry_run": True,
        "workspace": {"id": ws.id, "name": ws.name, "residency": ws.residency, "region": ws.region,
                      "replication": ws.replication},
        "to": {"residency": to, "region": target},
        "tables": tables,
        "objects": buckets,
        "totals": {"items": items, "item_bytes": sum(t["bytes"] for t in tables),
                   "objects": sum(b["objects"] for b in buckets), "object_bytes": object_bytes},
        "indexes_to_rebuild": indexes,
        "api_tokens_to_reissue": tokens,
        "stays_behind": [
            {"what": "audit archive and signed digests", "why": "Object Lock (compliance, 7 years): kept and "
             "readable in the old region until they expire; the moved chain continues from the same head"},
            {"what": "backups", "why": "kept in the old region for their 35 days; the first backup in the new "
             "region is taken right after the move"},
            {"what": "cross-region DR copy", "why": "deleted by turning DR off before the move; turned on again "
             "afterwards with the new residency's secondary"} if ws.replication == "cross-region-dr" else None,
        ],
        "maintenance_window": {
            "minutes": total_min,
            "items_copy_seconds": round(copy_items_s, 1),
            "objects_copy_seconds": round(copy_objects_s, 1),
            "reindex_seconds": round(reindex_s, 1),
            "fixed_minutes": FIXED_MINUTES,
            "rates": {"items_per_second": items_per_second, "mb_per_second": mb_per_second,
                      "index_objects_per_second": INDEX_ITEMS_PER_SECOND,
                      "source": RATES_SOURCE if (items_per_second, mb_per_second) == (
                          DEFAULT_ITEMS_PER_SECOND, DEFAULT_MB_PER_SECOND) else "given on the command line"},
        },
    }


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def render(p: dict[str, Any]) -> str:
    """The plan for a person."""
    ws, to, win = p["workspace"], p["to"], p["maintenance_window"]
    lines = [f"DRY RUN: move workspace {ws['id']} ({ws['name']}) from {ws['residency']} ({ws['region']}) "
             f"to {to['residency']} ({to['region']}). Nothing is changed.", "", "Tables (items, bytes):"]
    lines += [f"  {t['table']:<18} {t['items']:>9,}  {_size(t['bytes']):>10}" for t in p["tables"]]
    lines += ["", "Objects (count, bytes):"]
    lines += [f"  {b['bucket']:<10} {b['prefix']:<40} {b['objects']:>7,}  {_size(b['bytes']):>10}" for b in p["objects"]]
    tot = p["totals"]
    lines += [f"  total: {tot['items']:,} items ({_size(tot['item_bytes'])}), {tot['objects']:,} objects "
              f"({_size(tot['object_bytes'])})", "", "Indexes to rebuild:"]
    for ix in p["indexes_to_rebuild"]:
        extra = ", ".join(f"{k} {v:,}" for k, v in ix.items() if isinstance(v, int))
        lines.append(f"  {ix['index']}: {extra}" + (f" ({ix['what']})" if not ix["index"].count(".") else ""))
    lines += ["", f"API tokens to re-issue: {len(p['api_tokens_to_reissue'])}"]
    lines += [f"  {t['id']}  {t['name']}  (user {t['user_id']}, expires {t['expires_at']})"
              for t in p["api_tokens_to_reissue"]]
    lines += ["", "Stays behind:"] + [f"  {s['what']}: {s['why']}" for s in p["stays_behind"] if s]
    r = win["rates"]
    lines += ["", f"Maintenance window estimate: {win['minutes']} minutes = items {win['items_copy_seconds']} s "
              f"+ objects {win['objects_copy_seconds']} s + re-index {win['reindex_seconds']} s + "
              f"{win['fixed_minutes']} min fixed steps",
              f"  at {r['items_per_second']:,.0f} items/s, {r['mb_per_second']:,.0f} MB/s, "
              f"{r['index_objects_per_second']:,.0f} index objects/s ({r['source']}).",
              "  Measure the target environment and pass --items-per-second / --mb-per-second for a real window."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chalicelib.residency.planner",
                                     description="Dry-run plan of moving one workspace to another residency.")
    parser.add_argument("workspace_id")
    parser.add_argument("--to", required=True, help="target residency (us-east, eu-central)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--items-per-second", type=float, default=DEFAULT_ITEMS_PER_SECOND)
    parser.add_argument("--mb-per-second", type=float, default=DEFAULT_MB_PER_SECOND)
    args = parser.parse_args(argv)
    try:
        p = plan(args.workspace_id, args.to, items_per_second=args.items_per_second, mb_per_second=args.mb_per_second)
    except PlanError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(p, indent=2) + "\n" if args.json else render(p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
