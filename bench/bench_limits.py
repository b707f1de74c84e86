"""Limits of one function: the federated query, knowledge search and the catalog grown until each meets a
deployed limit (function memory and timeout from `.chalice/config.json`, API Gateway's 29 s integration
timeout, Lambda's 15-minute maximum, the default 512 MB of /tmp), beside bare DuckDB and bare bm25s.

Each engine runs, per size, in a new Python process as a new container would (AWS in a moto server process
of its own, over loopback, so the emulator's memory is not counted): the first call (loading from storage)
and the warm calls are timed in it, and its peak memory is the RSS high-water mark the kernel reports for
that child when it is reaped (``os.wait4``: the child's own ``ru_maxrss``, what ``RUSAGE_CHILDREN`` reports
for a single child). The process includes the interpreter and the imports, as a function's memory does.
The data is laid out by this process first, untimed: the query's Parquet snapshots as
``bench_gateway_query`` writes them; the knowledge corpus as ``bench_chat`` builds it (the index build is
timed in a child, as the indexing worker runs it); the catalog's stored snapshot written directly through
the catalog's snapshot writer (``catalog/snapshots.write``, what a full load stores), because seeding
500k datasets item by item through the emulator would take longer than this whole module. A size whose
peak memory, extrapolated linearly from the size before, would pass ``BENCH_LIMITS_MAX_MIB`` (6 GiB) is
not run and is reported as the limit. Sizes: ``BENCH_LIMITS_QUERY_ROWS``, ``BENCH_LIMITS_CHUNKS``,
``BENCH_LIMITS_DATASETS`` (comma-separated; ``k`` and ``M`` suffixes allowed); ``BENCH_LIMITS_SECTIONS`` picks
some of ``query,knowledge,catalog``. By default each engine grows one size past the first limit it meets
(query to 10M rows, knowledge to 300k chunks, the catalog to 100k datasets), so ``make bench`` stays
bounded; ``BENCH_LIMITS_CHUNKS=100k,300k,1M BENCH_LIMITS_DATASETS=100k,500k`` grows them further (about
half an hour more here).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / ".chalice" / "config.json"
API_GATEWAY_SECONDS = 29.0  # API Gateway's integration timeout (REST APIs, not raisable by default)
LAMBDA_MAX_SECONDS = 900.0  # Lambda's maximum timeout
TMP_MB = 512  # Lambda's default ephemeral storage (/tmp); the config sets none larger
RESULT = "RESULT "  # the child's one result line


@dataclass(frozen=True)
class Function:
    """One deployed function group's limits."""

    group: str
    memory_mb: int
    timeout_s: float


def parse_sizes(raw: str) -> tuple[int, ...]:
    """``"100k,1M,2500"`` -> ``(100000, 1000000, 2500)``; a bad entry raises ValueError."""
    out = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        scale = {"k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}.get(part[-1], 1)
        number = float(part[:-1] if scale != 1 else part)
        if number <= 0 or number * scale != int(number * scale):
            raise ValueError(f"not a positive whole size: {part!r}")
        out.append(int(number * scale))
    if not out:
        raise ValueError("no sizes given")
    return tuple(out)


def sizes(variable: str, default: str) -> tuple[int, ...]:
    return parse_sizes(os.environ.get(variable) or default)


def deployed(config: Path = CONFIG, stage: str = "prod") -> dict[str, Function]:
    """Memory and timeout per function group of ``stage`` (the first region's stage of each group)."""
    stages = json.loads(config.read_text())["stages"]
    out: dict[str, Function] = {}
    for name, conf in stages.items():
        if not name.endswith(f"-{stage}"):
            continue
        group = conf.get("environment_variables", {}).get("ROUTE_GROUP") or name.split("-", 1)[0]
        if group not in out:
            out[group] = Function(group, int(conf["lambda_memory_size"]), float(conf["lambda_timeout"]))
    return out


def verdict(*, memory_mb: int, peak_mib: float | None, seconds: float | None = None,
            time_limits: tuple[tuple[float, str], ...] = (), tmp_mib: float | None = None) -> str:
    """Which limits a measurement crosses ("exceeds 512 MB", "over 29 s", ...), or "within"."""
    crossed = []
    if peak_mib is not None and peak_mib > memory_mb:
        crossed.append(f"exceeds {memory_mb} MB")
    if seconds is not None:
        over = [label for limit, label in sorted(time_limits) if seconds > limit]
        if over:
            crossed.append(over[-1])  # the largest limit passed says the most
    if tmp_mib is not None and tmp_mib > TMP_MB:
        crossed.append(f"over {TMP_MB} MB /tmp")
    return "; ".join(crossed) or "within"


def projected_mib(previous: tuple[int, float] | None, size: int) -> float | None:
    """Peak memory at ``size`` extrapolated linearly from (size, peak MiB) of the size before, or None."""
    if previous is None:
        return None
    prev_size, prev_peak = previous
    return prev_peak * size / prev_size


def _max_mib() -> float:
    return float(os.environ.get("BENCH_LIMITS_MAX_MIB", str(6 * 1024)))


# --- children --------------------------------------------------------------------------------------------

def run_child(kind: str, spec: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Run ``kind`` in a new interpreter; returns its result and its peak RSS in MiB."""
    proc = subprocess.run([sys.executable, "-m", "bench.bench_limits", "--child", kind, json.dumps(spec)],
                          cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {kind} failed with status {proc.returncode}")
    line = next(x for x in proc.stdout.splitlines()[::-1] if x.startswith(RESULT))
    result = json.loads(line[len(RESULT):])
    return result, result.pop("peak_mib")


def peak_rss_mib() -> float:
    """This process's RSS high-water mark since its program started (``VmHWM``: the memory map's own mark,
    new at exec; ``getrusage``'s ``ru_maxrss`` keeps the forking parent's mark across exec on Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _first(fn: Callable[[], object]) -> tuple[float, str | None]:
    """The time of a first call and, when it failed, why (a limit met inside the engine is a result)."""
    t0 = time.perf_counter()
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - any refusal or failure ends the growth at this size
        return time.perf_counter() - t0, f"{type(err).__name__}: {str(err)[:160]}"
    return time.perf_counter() - t0, None


def _child(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    import logging

    logging.disable(logging.CRITICAL)  # no log record while timing, as ``bench.common.quiet``
    return CHILDREN[kind](spec)


def _principal(token: str) -> Any:
    from chalicelib.core.tokens import verifier

    return verifier().principal(token)


def child_idle(spec: dict[str, Any]) -> dict[str, Any]:
    """The imports every engine needs, nothing run."""
    import bm25s  # noqa: F401
    import duckdb  # noqa: F401

    from chalicelib.gateway.catalog import service as _catalog  # noqa: F401
    from chalicelib.gateway.query import service as _query  # noqa: F401
    from chalicelib.knowledge import service as _knowledge  # noqa: F401

    return {}


def child_query(spec: dict[str, Any]) -> dict[str, Any]:
    from chalicelib.core.tenancy import scope_of
    from chalicelib.gateway.query import service as query

    scope = scope_of(_principal(spec["token"]))
    first, error = _first(lambda: query.run(scope, spec["sql"]))
    if error:
        return {"first": first, "error": error}
    warm = [_timed(lambda: query.run(scope, spec["sql"])) for _ in range(spec["n"])]
    return {"first": first, "warm": statistics.median(warm)}


def child_query_ref(spec: dict[str, Any]) -> dict[str, Any]:
    import duckdb

    def first() -> None:
        con = duckdb.connect(config={"threads": 1})
        for name, path in spec["files"].items():
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
        con.execute(spec["sql"]).fetchall()
        held.append(con)

    held: list[Any] = []
    t_first = _timed(first)
    warm = [_timed(lambda: held[0].execute(spec["sql"]).fetchall()) for _ in range(spec["n"])]
    return {"first": t_first, "warm": statistics.median(warm)}


def child_knowledge_build(spec: dict[str, Any]) -> dict[str, Any]:
    """What the indexing worker does for a document dataset of ``texts``: chunk ids, BM25, upload."""
    import functools

    from chalicelib.gateway import reader
    from chalicelib.gateway.catalog import service as catalog
    from chalicelib.knowledge import chunking, indexer, lexical, store
    from chalicelib.knowledge.models import KIND_INDEX
    from chalicelib.knowledge.models import knowledge as knowledge_table

    ws, region, big = spec["ws"], spec["region"], spec["dataset"]
    texts = Path(spec["texts"]).read_text().split("\n")
    per_doc = spec["chunks_per_doc"]
    t0 = time.perf_counter()
    rec = catalog.snapshot(region, ws).datasets[big]
    ident = functools.partial(reader.opaque_ref, rec)
    chunks = [chunking.Chunk(chunking.chunk_id(ident, f"doc_{i // per_doc}", 0, len(x), x),
                             chunking.DOCUMENT, big, f"doc_{i // per_doc}", rec.data_prefix or "",
                             f"doc {i // per_doc}", 0, len(x), x, ("text",)) for i, x in enumerate(texts)]
    model = lexical.build(texts)
    prefix = store.write(region, ws, big, "limits", chunks, model)
    knowledge_table(region)(ws, KIND_INDEX + big, dataset_id=big, version=rec.data_prefix, prefix=prefix,
                            source_kind="document", policy_fingerprint=indexer.policy_fingerprint(rec),
                            chunk_count=len(chunks), index_format=reader.index_format(), updated_at="x").save()
    return {"build": time.perf_counter() - t0}


def child_knowledge_search(spec: dict[str, Any]) -> dict[str, Any]:
    from chalicelib.core.tenancy import scope_of
    from chalicelib.knowledge import service as knowledge

    scope = scope_of(_principal(spec["token"]))
    queries = json.loads(Path(spec["queries"]).read_text())
    only = {"dataset_ids": [spec["dataset"]]}
    hits: list[Any] = []
    first, error = _first(lambda: hits.extend(knowledge.search(scope, queries[0], 5, only)))
    if error:
        return {"first": first, "error": error}
    assert hits, "the first search found nothing"
    warm = [_timed(lambda q=q: knowledge.search(scope, q, 5, only)) for q in queries[1:spec["n"] + 1]]
    return {"first": first, "warm": statistics.median(warm)}


def child_knowledge_ref(spec: dict[str, Any]) -> dict[str, Any]:
    import bm25s

    texts = Path(spec["texts"]).read_text().split("\n")
    queries = json.loads(Path(spec["queries"]).read_text())
    t0 = time.perf_counter()
    bare = bm25s.BM25()
    bare.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    build = time.perf_counter() - t0
    del texts

    def search(q: str) -> None:
        bare.retrieve(bm25s.tokenize([q], stopwords="en", show_progress=False), k=5, show_progress=False,
                      n_threads=1)

    first = _timed(lambda: search(queries[0]))
    warm = [_timed(lambda q=q: search(q)) for q in queries[1:spec["n"] + 1]]
    return {"build": build, "first": first, "warm": statistics.median(warm)}


def child_catalog(spec: dict[str, Any]) -> dict[str, Any]:
    from bench.bench_catalog import _varied_filters
    from chalicelib.core.tenancy import scope_of
    from chalicelib.gateway.catalog import service as catalog

    scope = scope_of(_principal(spec["token"]))
    first_filter = catalog.SearchFilters(text="orders table", classification="PII")
    first, error = _first(lambda: catalog.search(scope, first_filter))
    if error:
        return {"first": first, "error": error}
    assert catalog.stats.snapshot_reads == 1 and catalog.stats.full_loads == 0, catalog.stats  # from the object
    varied = _varied_filters(catalog, spec["n_datasets"])
    warm = [_timed(lambda f=f: catalog.search(scope, f)) for f in varied[:spec["n"]]]
    return {"first": first, "warm": statistics.median(warm)}


def child_catalog_ref(spec: dict[str, Any]) -> dict[str, Any]:
    from chalicelib.gateway.catalog import snapshots

    held = []
    first = _timed(lambda: held.append(snapshots.read(spec["region"], spec["ws"])))
    return {"first": first}


CHILDREN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "idle": child_idle, "query": child_query, "query_ref": child_query_ref,
    "knowledge_build": child_knowledge_build, "knowledge_search": child_knowledge_search,
    "knowledge_ref": child_knowledge_ref, "catalog": child_catalog, "catalog_ref": child_catalog_ref,
}


# --- the parent: data laid out, children run, tables printed ---------------------------------------------

def _fmt_s(seconds: float) -> str:
    return f"{seconds:.2f}" if seconds < 100 else f"{seconds:.0f}"


def _token(ws: str, role: str) -> str:
    """A new access token of a ``role`` of the workspace, issued just before the child that uses it (a size
    can take longer than a token lives)."""
    from tests.functional.gateway.data import token_for

    return token_for(ws, role).token


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _guard(previous: tuple[int, float] | None, size: int, what: str) -> str | None:
    """The row saying a size is not run (its projected memory over the cap), or None to run it."""
    projected = projected_mib(previous, size)
    if projected is not None and projected > _max_mib():
        return (f"| {size:,} | not run: {what} projected at {projected:,.0f} MiB (linear from the size before), "
                f"over this machine's {_max_mib():,.0f} MiB cap: the limit |")
    return None


def _query_section(ws: str, region: str, fns: dict[str, Function], tmp: str) -> None:
    from bench.bench_gateway_query import QUERY_SQL, _query_tables
    from chalicelib.core.config import settings
    from chalicelib.gateway.catalog import service as catalog

    qs = settings()
    gw, wk = fns["gateway"], fns["workers"]
    rows: list[str] = []
    previous: tuple[int, float] | None = None
    for n in sizes("BENCH_LIMITS_QUERY_ROWS", "1M,3M,10M"):
        skip = _guard(previous, n, "ours")
        if skip:
            rows.append(skip)
            break
        _, files, keys = _query_tables(ws, region, tmp, n)
        # a change made elsewhere, as a sync records it: a new container reads the stored snapshot and then these
        catalog.changed(region, ws, datasets=[key.split("/")[2] for key in keys.values()])
        c, o = list(files)
        sql = QUERY_SQL.format(c=c, o=o)
        parquet_mib = sum(os.path.getsize(p) for p in files.values()) / 2**20
        warm_n = 5 if n <= 3_000_000 else 3
        ours, peak = run_child("query", {"token": _token(ws, "member"), "sql": sql, "n": warm_n})
        ref, ref_peak = run_child("query_ref", {"files": files, "sql": sql, "n": warm_n})
        for path in files.values():
            os.remove(path)
        if "error" in ours:
            rows.append(f"| {n:,} | {parquet_mib:,.0f} | fails after {_fmt_s(ours['first'])} s | | {peak:,.0f} "
                        f"| {_fmt_s(ref['first'])} | {_fmt_s(ref['warm'])} | {ref_peak:,.0f} "
                        f"| refused: {_cell(ours['error'])} | |")
            break
        as_gateway = verdict(memory_mb=gw.memory_mb, peak_mib=peak, seconds=ours["first"],
                             time_limits=((API_GATEWAY_SECONDS, f"over {API_GATEWAY_SECONDS:.0f} s"),),
                             tmp_mib=parquet_mib)
        as_worker = verdict(memory_mb=wk.memory_mb, peak_mib=peak, seconds=ours["first"],
                            time_limits=((wk.timeout_s, f"over the worker's {wk.timeout_s:.0f} s"),
                                         (LAMBDA_MAX_SECONDS, "over 15 min")), tmp_mib=parquet_mib)
        rows.append(f"| {n:,} | {parquet_mib:,.0f} | {_fmt_s(ours['first'])} | {_fmt_s(ours['warm'])} | {peak:,.0f} "
                    f"| {_fmt_s(ref['first'])} | {_fmt_s(ref['warm'])} | {ref_peak:,.0f} | {as_gateway} | {as_worker} |")
        print(rows[-1], file=sys.stderr, flush=True)
        previous = (n, peak)
    print(f"### Federated query by size: join of 2 x N rows, masked column read (one process per size)\n\n"
          f"Ours: `query.run` as `bench_gateway_query` drives it (member token; download of the raw Parquet to "
          f"/tmp, policy projection into a locked-down DuckDB, 1 thread); first = a new container's first query, "
          f"warm = median of the next {5} (3 at 10M). Reference: bare DuckDB (1 thread) over the same Parquet on "
          f"local disk, no policies. Limits: gateway function {gw.memory_mb} MB, API Gateway "
          f"{API_GATEWAY_SECONDS:.0f} s, /tmp {TMP_MB} MB (the raw Parquet is on /tmp while a sandbox is built); "
          f"as a worker {wk.memory_mb} MB, {wk.timeout_s:.0f} s configured, {LAMBDA_MAX_SECONDS / 60:.0f} min "
          f"at most. The engine's own bounds per query: `QUERY_MEMORY_LIMIT` {qs.query_memory_limit}, "
          f"`QUERY_SPILL_LIMIT` {qs.query_spill_limit} of /tmp; a query past them is refused (the row says "
          f"why) and the growth stops there.\n")
    print("| rows per side | Parquet MiB (both) | ours first s | ours warm s | ours peak MiB | bare DuckDB first s "
          "| bare warm s | bare peak MiB | as the gateway | as a worker |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    print("\n".join(rows) + "\n", flush=True)


def _knowledge_section(ws: str, region: str, fns: dict[str, Function], tmp: str) -> None:
    from bench.bench_chat import CHUNKS_PER_DOC, _corpus
    from chalicelib.gateway.catalog import service as catalog
    from tests.functional.gateway.data import field, put_dataset

    gw, wk, pf = fns["gateway"], fns["workers"], fns["platform"]
    rows: list[str] = []
    previous: tuple[int, float] | None = None
    for n in sizes("BENCH_LIMITS_CHUNKS", "100k,300k"):
        skip = _guard(previous, n, "the index build")
        if skip:
            rows.append(skip)
            break
        texts, queries = _corpus(n)
        texts_path, queries_path = os.path.join(tmp, "texts.txt"), os.path.join(tmp, "queries.json")
        Path(texts_path).write_text("\n".join(texts))
        Path(queries_path).write_text(json.dumps(queries))
        del texts
        big = put_dataset(ws, region, f"limits_docs_{n}", [field("document_id"), field("file_name"), field("text")],
                          [])
        catalog.changed(region, ws, datasets=[big])  # as the sync that made it records it
        spec = {"ws": ws, "region": region, "dataset": big, "texts": texts_path, "queries": queries_path,
                "n": 50,
                "chunks_per_doc": CHUNKS_PER_DOC}
        built, build_peak = run_child("knowledge_build", spec)
        found, peak = run_child("knowledge_search", {**spec, "token": _token(ws, "admin")})
        ref, ref_peak = run_child("knowledge_ref", spec)
        if "error" in found:
            rows.append(f"| {n:,} | {_fmt_s(built['build'])} | {build_peak:,.0f} | | fails after "
                        f"{_fmt_s(found['first'])} s | | {peak:,.0f} | refused: {_cell(found['error'])} | | "
                        f"{_fmt_s(ref['build'])} | {ref['warm'] * 1e3:.2f} | {ref_peak:,.0f} |")
            break
        as_worker = verdict(memory_mb=wk.memory_mb, peak_mib=build_peak, seconds=built["build"],
                            time_limits=((wk.timeout_s, f"over the worker's {wk.timeout_s:.0f} s"),
                                         (LAMBDA_MAX_SECONDS, "over 15 min")))
        as_gateway = verdict(memory_mb=gw.memory_mb, peak_mib=peak, seconds=found["first"],
                             time_limits=((API_GATEWAY_SECONDS, f"over {API_GATEWAY_SECONDS:.0f} s"),))
        in_chat = verdict(memory_mb=pf.memory_mb, peak_mib=peak, seconds=found["first"],
                          time_limits=((API_GATEWAY_SECONDS, f"over {API_GATEWAY_SECONDS:.0f} s"),))
        rows.append(f"| {n:,} | {_fmt_s(built['build'])} | {build_peak:,.0f} | {as_worker} | {_fmt_s(found['first'])} "
                    f"| {found['warm'] * 1e3:.2f} | {peak:,.0f} | {as_gateway} | {in_chat} | {_fmt_s(ref['build'])} "
                    f"| {ref['warm'] * 1e3:.2f} | {ref_peak:,.0f} |")
        print(rows[-1], file=sys.stderr, flush=True)
        previous = (n, max(peak, build_peak))
    print("### Knowledge search by corpus size (one process per step)\n\n"
          "Corpus as `bench_chat` builds it (30 pseudo-words per chunk, 10 chunks per document). Build: what the "
          "indexing worker does (chunk ids, bm25s index, upload to S3), in its own process with the corpus read "
          "from a file. Search: a new container's first `knowledge.search` (manifest, index load from S3, first "
          "query) and the median of the next 50 distinct queries (top 5, admin). Reference: bare bm25s tokenize + "
          "index and retrieve k=5 over the same corpus in a process of its own (its peak includes the corpus). "
          f"Limits: the worker {wk.memory_mb} MB / {wk.timeout_s:.0f} s (15 min at most); search behind the "
          f"gateway {gw.memory_mb} MB, and in a chat on the platform function {pf.memory_mb} MB; "
          f"{API_GATEWAY_SECONDS:.0f} s.\n")
    print("| chunks | build s | build peak MiB | build as the worker | first search s | warm p50 ms | search peak MiB "
          "| search in the gateway | search in a chat (platform) | bare bm25s index s | bare p50 ms | bare peak MiB |")
    print("|---:|---:|---:|---|---:|---:|---:|---|---|---:|---:|---:|")
    print("\n".join(rows) + "\n", flush=True)


def _catalog_records(ws: str, n: int) -> list[Any]:
    """``n`` dataset records as ``bench_catalog.seed`` makes them, normalised as a full load would."""
    import random
    from types import SimpleNamespace

    from bench.bench_catalog import WORDS
    from chalicelib.core import clock
    from chalicelib.core.ids import new_id
    from chalicelib.gateway.catalog import service as catalog

    rnd = random.Random(5)
    now = clock.iso()
    out = []
    for i in range(n):
        fields = [{"name": f"{rnd.choice(WORDS)}_{j}", "type": "STRING", "nullable": True,
                   "classification": rnd.choice(catalog.CLASSIFICATIONS),
                   "policy": rnd.choice(["ALLOW", "MASK", "HASH"]), "description": ""} for j in range(8)]
        acl = [{"type": "role", "id": "member"}] if i % 4 else [{"type": "role", "id": "admin"}]
        out.append(SimpleNamespace(
            id=new_id("ds"), workspace_id=ws, name=f"{WORDS[i % len(WORDS)]}_{i:06d}", connector_id=None,
            owner=f"team{i % 20}@example.com", description=f"{WORDS[(i * 7) % len(WORDS)]} table {i}", fields=fields,
            acl=acl, data_prefix=None, row_count=0, schema_version=0,
            last_synced_at=clock.iso(clock.now() - rnd.randint(60, 86400 * 3)), created_at=now, updated_at=now,
            classification=catalog.highest([f["classification"] for f in fields])))
    out.sort(key=lambda r: (r.name, r.id))
    return out


def _catalog_section(region: str, fns: dict[str, Function]) -> None:
    from chalicelib.core import aws, clock
    from chalicelib.gateway.catalog import snapshots
    from chalicelib.gateway.catalog import versions as catalog_versions
    from tests.functional.conftest import make_tenant

    gw = fns["gateway"]
    rows: list[str] = []
    previous: tuple[int, float] | None = None
    for n in sizes("BENCH_LIMITS_DATASETS", "50k,100k"):
        skip = _guard(previous, n, "the search")
        if skip:
            rows.append(skip)
            break
        t = make_tenant(f"limits-catalog-{n}@example.com", name=f"Limits catalog {n}")
        ws = t.workspace_id
        version = catalog_versions.current(region, ws).version
        snapshots.write(region, ws, version, clock.now(), _catalog_records(ws, n), {})
        stored_mib = aws.client("s3", region).head_object(
            Bucket=aws.bucket_name(snapshots.BUCKET, region), Key=snapshots.key_of(ws))["ContentLength"] / 2**20
        ours, peak = run_child("catalog", {"token": _token(ws, "member"), "n_datasets": n, "n": 100})
        ref, ref_peak = run_child("catalog_ref", {"region": region, "ws": ws})
        if "error" in ours:
            rows.append(f"| {n:,} | {stored_mib:.1f} | fails after {_fmt_s(ours['first'])} s | | {peak:,.0f} "
                        f"| refused: {_cell(ours['error'])} | {_fmt_s(ref['first'])} | {ref_peak:,.0f} |")
            break
        as_gateway = verdict(memory_mb=gw.memory_mb, peak_mib=peak, seconds=ours["first"],
                             time_limits=((API_GATEWAY_SECONDS, f"over {API_GATEWAY_SECONDS:.0f} s"),))
        rows.append(f"| {n:,} | {stored_mib:.1f} | {_fmt_s(ours['first'])} | {ours['warm'] * 1e3:.2f} | {peak:,.0f} "
                    f"| {as_gateway} | {_fmt_s(ref['first'])} | {ref_peak:,.0f} |")
        print(rows[-1], file=sys.stderr, flush=True)
        previous = (n, peak)
    print("### Catalog by size (one process per size)\n\n"
          "The stored snapshot written directly by the catalog's snapshot writer (datasets as `bench_catalog` seeds "
          "them). Ours: a new container's first `catalog.search` (version check, snapshot object read, records and "
          "search index built, first search) and the median of the next 100 distinct searches (member; default "
          "settings, each checks the version). Reference: bare read + gunzip + JSON parse of the same object, in a "
          f"process of its own. Limits: gateway function {gw.memory_mb} MB, API Gateway "
          f"{API_GATEWAY_SECONDS:.0f} s.\n")
    print("| datasets | snapshot object MiB (gzip) | first search s | warm p50 ms | peak MiB | as the gateway "
          "| bare read + parse s | bare peak MiB |")
    print("|---:|---:|---:|---:|---:|---|---:|---:|")
    print("\n".join(rows) + "\n", flush=True)


def main() -> None:
    from bench.common import quiet, use_emulator

    use_emulator()
    import bench.bench_chat  # noqa: F401 - both point this process at the in-process emulator on import:
    import bench.bench_gateway_query  # noqa: F401 - imported before the server's endpoint is set
    from chalicelib.core import process_state
    from chalicelib.core.config import settings
    from infra.bootstrap import bootstrap_all
    from infra.emulator.process import moto_process
    from tests.functional.conftest import make_tenant

    fns = deployed()
    _, idle_peak = run_child("idle", {})
    print("Deployed limits (`.chalice/config.json`, prod): "
          + ", ".join(f"{f.group} {f.memory_mb} MB / {f.timeout_s:.0f} s" for f in fns.values())
          + f"; API Gateway {API_GATEWAY_SECONDS:.0f} s; Lambda at most {LAMBDA_MAX_SECONDS / 60:.0f} min; /tmp "
          f"{TMP_MB} MB. A new process importing the three engines (DuckDB, bm25s, the services) peaks at "
          f"{idle_peak:,.0f} MiB before any work.\n", flush=True)
    tmp = tempfile.mkdtemp(prefix="bench-limits-")
    with moto_process(dict(os.environ)) as endpoint:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        try:
            settings.cache_clear()
            process_state.reset_all(derived=True)
            with quiet():
                bootstrap_all()
                t = make_tenant("limits@example.com", name="Limits")
                chosen = os.environ.get("BENCH_LIMITS_SECTIONS", "query,knowledge,catalog").split(",")
                if "query" in chosen:
                    _query_section(t.workspace_id, t.region, fns, tmp)
                if "knowledge" in chosen:
                    _knowledge_section(t.workspace_id, t.region, fns, tmp)
                if "catalog" in chosen:
                    _catalog_section(t.region, fns)
        finally:
            del os.environ["AWS_ENDPOINT_URL"]
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        outcome = _child(sys.argv[2], json.loads(sys.argv[3]))
        print(RESULT + json.dumps({**outcome, "peak_mib": peak_rss_mib()}), flush=True)
    else:
        main()
