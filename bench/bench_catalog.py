"""Catalog at 1k / 10k / 50k datasets: warm search from the snapshot's inverted index over 240 distinct
queries (text terms, names, owners, numbers, with and without a classification filter; default settings,
so each checks the catalog version), interleaved with a reference that runs the same filter over the same
memoised readable list in plain Python, the same with a new text term every call (the index's term memo missed), the "changed?"
check, a one-dataset change reloaded by version beside a full reload, with the DynamoDB calls each costs
(moto), and the index's build time and memory."""
from __future__ import annotations

import json
import os
import random
import time
import tracemalloc
from typing import Any

from bench.common import AwsCalls, Measure, measure, measure_pair, quiet, table, use_emulator

SIZES = tuple(int(s) for s in os.environ.get("BENCH_CATALOG_SIZES", "1000,10000,50000").split(","))
WORDS = ["orders", "customers", "tickets", "invoices", "events", "sessions", "leads", "payments", "churn", "usage"]


def _env() -> None:
    use_emulator()


def seed(ws: str, region: str, n: int, connector_id: str | None = None) -> list[str]:
    """``n`` synthetic datasets (8 fields, mixed policies, a quarter Admin-only) in one workspace."""
    from chalicelib.core import clock
    from chalicelib.core.ids import new_id
    from chalicelib.gateway import models

    cls = models.datasets(region)
    rnd = random.Random(5)
    ids, now = [], clock.iso()
    with cls.batch_write() as batch:
        for i in range(n):
            ds_id = new_id("ds")
            ids.append(ds_id)
            fields = [{"name": f"{rnd.choice(WORDS)}_{j}", "type": "STRING", "nullable": True,
                       "classification": rnd.choice(["PUBLIC", "INTERNAL", "CONFIDENTIAL", "PII"]),
                       "policy": rnd.choice(["ALLOW", "MASK", "HASH"]), "description": ""} for j in range(8)]
            acl = [{"type": "role", "id": "member"}] if i % 4 else [{"type": "role", "id": "admin"}]
            batch.save(cls(ws, ds_id, name=f"{WORDS[i % len(WORDS)]}_{i:05d}", connector_id=connector_id,
                           owner=f"team{i % 20}@example.com", description=f"{WORDS[(i * 7) % len(WORDS)]} table {i}",
                           classification="PII", schema=json.dumps(fields), acl=json.dumps(acl), data_prefix=None,
                           row_count=0, last_synced_at=clock.iso(clock.now() - rnd.randint(60, 86400 * 3)),
                           created_at=now, updated_at=now))
    return ids


def _varied_filters(catalog: Any, n: int) -> list[Any]:
    """240 distinct searches as users type them: words, prefixes, inner substrings, dataset names, owners,
    numbers, one and two letters; a third also filtered by classification."""
    rnd = random.Random(17)
    out: list[Any] = []
    seen: set[tuple[str, str | None]] = set()
    while len(out) < 240:
        word = rnd.choice(WORDS)
        i = rnd.randrange(n)
        text = rnd.choice([word, word[:rnd.randint(2, 5)], word[1:rnd.randint(3, 6)], f"{WORDS[i % len(WORDS)]}_{i:05d}",
                           f"table {i}", f"team{rnd.randrange(20)}", str(rnd.randrange(10_000)), f"{word} table",
                           rnd.choice("abcdefghijklmnopqrstuvwxyz_0123456789")])
        cls = rnd.choice([None, None, "PII", "CONFIDENTIAL"])
        if (text, cls) in seen:
            continue
        seen.add((text, cls))
        out.append(catalog.SearchFilters(text=text, classification=cls))
    return out


def _size(n: int, calls: AwsCalls) -> tuple[list[tuple[Measure, Measure | None, str]], str]:
    from chalicelib.core import clock
    from chalicelib.core.tenancy import scope_of
    from chalicelib.core.tokens import verifier
    from chalicelib.gateway.catalog import index as catalog_index
    from chalicelib.gateway.catalog import service as catalog
    from chalicelib.gateway.catalog import versions as catalog_versions
    from tests.functional.conftest import make_tenant
    from tests.functional.gateway.data import token_for

    t = make_tenant(f"bench{n}@example.com", name=f"Bench {n}")
    ws, region = t.workspace_id, t.region
    t0 = time.perf_counter()
    ids = seed(ws, region, n)
    seeded = time.perf_counter() - t0
    scope = scope_of(verifier().principal(token_for(ws, "member").token))
    catalog.invalidate()
    filters = catalog.SearchFilters(text="orders table", classification="PII")
    first = calls.of(lambda: catalog.search(scope, filters))
    snap = catalog.snapshot(region, ws)
    readable = catalog.readable(scope, snap)  # the memoised list both sides use

    varied = _varied_filters(catalog, n)
    at = [0, 0]

    def ours_varied() -> object:
        at[0] += 1
        return catalog.search(scope, varied[at[0] % len(varied)])

    def reference_varied() -> object:  # the same filter over the same memoised list, paged like ours
        at[1] += 1
        criteria = catalog._Criteria.of(varied[at[1] % len(varied)])
        found = criteria.select(readable, admin=False, now=clock.now())
        return [catalog.view(scope, r, snap) for r in found[:catalog.DEFAULT_PAGE]], len(found)

    ours, ref = measure_pair(f"search, {len(varied)} distinct queries, {n:,} datasets (member)", ours_varied,
                             "same filter + page over the memoised list", reference_varied,
                             n=len(varied) // 2, repeat=2, warmup=0)
    warm_calls = calls.of(lambda: catalog.search(scope, filters))
    terms = [  # distinct terms as users type them: words, prefixes, inner substrings, numbers, 2 and 1 letters
        "orders", "customers", "invoices", "payments", "table", "churn", "sessions", "usage",
        "ord", "cust", "pay", "tick", "inv", "sess", "lea",
        "ssion", "voice", "ers_0", "usage_3", "churn_7", "leads_01", "zzz", "12", "4711",
        "or", "us", "ch", "_1", "s", "e", "7", "q",
    ]
    turn = [0]

    def linear_new_term() -> object:  # the linear filter (the index's definition) for the next term
        turn[0] += 1
        criteria = catalog._Criteria.of(catalog.SearchFilters(text=terms[turn[0] % len(terms)]))
        found = criteria.select(readable, admin=False, now=clock.now())
        return [catalog.view(scope, r, snap) for r in found[:catalog.DEFAULT_PAGE]], len(found)

    tracemalloc.start()
    t0 = time.perf_counter()
    built = catalog_index.CatalogIndex.build(snap.ordered)
    build_s = time.perf_counter() - t0
    index_mib = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    del built
    t0 = time.perf_counter()
    catalog_index.CatalogIndex.build(snap.ordered)
    build_s = min(build_s, time.perf_counter() - t0)  # without tracemalloc's overhead

    from chalicelib.core.config import settings

    os.environ["CATALOG_CACHE_SECONDS"] = "3600"  # the same search with the version check trusted: in memory only
    settings.cache_clear()
    catalog.snapshot(region, ws)
    try:
        in_memory, ref2 = measure_pair(f"the same {len(varied)} searches, version check skipped ({n:,})",
                                       ours_varied, "same filter + page over the memoised list", reference_varied,
                                       n=len(varied) // 2, repeat=2, warmup=0)

        def ours_new_term() -> object:  # the same term, the index's term memo emptied first
            snap.index.terms.clear()
            return catalog.search(scope, catalog.SearchFilters(text=terms[turn[0] % len(terms)]))

        cold_term, ref_term = measure_pair(f"search, a term not seen before ({n:,}; memo emptied each call)",
                                           ours_new_term, "the linear filter for the same term", linear_new_term,
                                           n=len(terms), repeat=1, warmup=0)
    finally:
        os.environ.pop("CATALOG_CACHE_SECONDS")
        settings.cache_clear()
    check = measure(f"version check alone ({n:,})", lambda: catalog_versions.current(region, ws), n=50, repeat=3,
                    warmup=3)

    def one_change() -> None:
        catalog.changed(region, ws, datasets=[ids[len(ids) // 2]])
        catalog.snapshot(region, ws)

    def full() -> None:
        catalog.invalidate(ws)
        catalog.snapshot(region, ws)

    delta = measure(f"one dataset changed elsewhere: bump + reload by version ({n:,})", one_change, n=5, repeat=3,
                    warmup=1)
    reload = measure(f"full reload from DynamoDB ({n:,}; also writes the stored snapshot)", full, n=1, repeat=3,
                     warmup=0)

    def first_search_new_container() -> None:  # a new container: nothing in memory, the stored object in S3
        catalog.invalidate(ws, keep_stored=True)
        catalog.search(scope, filters)

    def bare_snapshot_read() -> None:  # the same object read and parsed, nothing else
        from chalicelib.gateway.catalog import snapshots

        snapshots.read(region, ws)

    first_new, bare_read = measure_pair(f"first search of a new container ({n:,}, from the stored snapshot)",
                                        first_search_new_container, "bare read + parse of the same snapshot object",
                                        bare_snapshot_read, n=1, repeat=5, warmup=1)
    notes = {
        "delta": calls.of(one_change), "full": calls.of(full), "first_new": calls.of(first_search_new_container),
    }
    rows: list[tuple[Measure, Measure | None, str]] = [
        (ours, ref, f"p99 <= 20 ms at 50k; AWS calls of a warm search: {warm_calls}"),
        (in_memory, ref2, "the same work as the reference (filter + page of views)"),
        (cold_term, ref_term, f"p99 <= 20 ms; {len(terms)} distinct terms (words, prefixes, 2 and 1 letters), "
                                "version check skipped on both sides"),
        (check, None, "one consistent GetItem of the version item"),
        (delta, reload, f"calls: {notes['delta']}"),
        (reload, None, f"calls: {notes['full']}; first search of this bench's first container: {first}"),
        (first_new, bare_read, f"<= 2 s at 50k beside the bare read; DynamoDB calls: {notes['first_new']}"),
    ]
    growth = (f"| {n:,} | {seeded:.1f} | {ours.per_op_us / 1000:.2f} | {ours.p99_us / 1000:.2f} | "
              f"{in_memory.per_op_us / 1000:.2f} | {ref.per_op_us / 1000:.2f} | {check.per_op_us / 1000:.2f} | {delta.per_op_us / 1000:.1f} | "
              f"{reload.per_op_us / 1e6:.2f} | {first_new.per_op_us / 1e6:.2f} | {bare_read.per_op_us / 1e6:.2f} | "
              f"{cold_term.per_op_us / 1000:.2f} | {build_s * 1000:.0f} | "
              f"{index_mib:.1f} | {index_mib * 10_000 / n:.1f} |")
    return rows, growth


def main() -> None:
    _env()
    from moto import mock_aws

    from infra.bootstrap import bootstrap_all

    growth = []
    with mock_aws(), quiet():
        bootstrap_all()
        calls = AwsCalls("dynamodb")
        try:
            for n in SIZES:
                rows, line = _size(n, calls)
                table(f"Catalog, {n:,} datasets", rows)
                growth.append(line)
        finally:
            calls.close()
    print("### Catalog growth (milliseconds unless marked; moto in process)\n")
    print("| datasets | seed s | search median | search p99 | search without the check | reference median "
          "| version check | one change, reload by version | full reload s | new container's first search s "
          "| bare snapshot read s | search, new term | index build | index MiB | index MiB per 10k |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(growth) + "\n", flush=True)
