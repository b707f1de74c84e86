"""Chat and knowledge: a chat round trip with the extractive provider split into retrieval, model and
storage (beside GET /v1/me through the same app); retrieval p50/p99 at 10k, 30k and 100k chunks (a growth
table) beside bare bm25s on the same corpus, 300 distinct queries, the two alternated and each going first
in turn, with AWS calls per search counted; indexing throughput beside bare bm25s indexing; retrieval
quality (recall@5, MRR) lexical vs hybrid on the labelled set in bench/data/knowledge_qa.json. Default
settings (``KNOWLEDGE_CACHE_SECONDS`` 2 s, ``CATALOG_CACHE_SECONDS`` 0). A chat steady and after 5 s and 60 s
of quiet, and a search in a container searching once per 10 s; a warm chat request's walk through chalicelib/
(the files on the way to storage, and every module its calls enter). In-process, moto."""
from __future__ import annotations

import functools
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import use_emulator

use_emulator()

SIZES = tuple(int(x) for x in os.environ.get("BENCH_KNOWLEDGE_CHUNKS", "10000,30000,100000").split(","))
CHUNKS_PER_DOC = 10
WORDS_PER_CHUNK = 30
VOCAB = 30_000
N_QUERIES = 300
N_CHATS = 40
QA = Path(__file__).with_name("data") / "knowledge_qa.json"


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def _corpus(n_chunks: int = 100_000) -> tuple[list[str], list[str]]:
    """``n_chunks`` chunk texts (Zipf-distributed pseudo-words) and 300 three-word queries drawn from them."""
    import numpy as np

    rng = np.random.default_rng(11)
    syll = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sa", "do", "fu", "gi", "ha", "be", "xo"]
    words = ["".join(syll[(i >> (4 * j)) % 16] for j in range(4)) + str(i % 7) for i in range(VOCAB)]
    p = 1.0 / np.arange(1, VOCAB + 1) ** 1.05
    p /= p.sum()
    ids = rng.choice(VOCAB, size=(n_chunks, WORDS_PER_CHUNK), p=p)
    texts = [" ".join(words[i] for i in row) for row in ids]
    qrows = rng.integers(0, len(texts), size=N_QUERIES)
    queries = [" ".join(texts[r].split()[j] for j in (3, 17, 29)) for r in qrows]
    return texts, queries


def main() -> None:
    from moto import mock_aws

    with mock_aws():
        _run()


def _run() -> None:
    import bm25s
    from chalice.test import Client

    from chalicelib.chat import service as chat
    from chalicelib.core.authz import Principal
    from chalicelib.core.config import settings
    from chalicelib.core.tenancy import scope_of
    from chalicelib.gateway import reader
    from chalicelib.gateway.catalog import service as catalog
    from chalicelib.groups import create_app
    from chalicelib.knowledge import chunking, indexer, lexical, store
    from chalicelib.knowledge import service as knowledge
    from chalicelib.knowledge.models import KIND_INDEX
    from chalicelib.knowledge.models import knowledge as knowledge_table
    from chalicelib.llm.registry import registry
    from infra.bootstrap import bootstrap_all
    from tests.functional.conftest import bearer, make_tenant
    from tests.functional.gateway.data import field, put_dataset

    bootstrap_all()
    t = make_tenant("bench@example.com", name="Bench")
    ws, region = t.workspace_id, t.region
    admin = Principal(user_id=t.user_id, workspace_id=ws, roles=("admin",), email=t.email, amr=("pwd",), token_id="b")
    scope = scope_of(admin)  # as a request's authorisation path resolves it

    def day_token() -> str:  # valid while the process clock moves on below
        from chalicelib.identity.oauth import signing
        return signing.issue_access_token(user_id=t.user_id, email=t.email, workspace_id=ws, roles=["admin"],
                                          amr=["pwd", "mfa"], ttl=24 * 3600)[0]

    # --- indexing throughput and retrieval at each size (growth table) --------------------------------
    from tests.functional.aws_calls import counting

    rows_search: list[str] = []
    rows_index: list[str] = []
    rows_sparse: list[str] = []
    for size in SIZES:
        texts, queries = _corpus(size)
        big = put_dataset(ws, region, f"bench_docs_{size}", [field("document_id"), field("file_name"), field("text")],
                          [])
        rec = catalog.snapshot(region, ws).datasets[big]
        t0 = time.perf_counter()
        ident = functools.partial(reader.opaque_ref, rec)
        chunks = [chunking.Chunk(chunking.chunk_id(ident, f"doc_{i // CHUNKS_PER_DOC}", 0, len(x), x),
                                 chunking.DOCUMENT, big, f"doc_{i // CHUNKS_PER_DOC}", rec.data_prefix or "",
                                 f"doc {i // CHUNKS_PER_DOC}", 0, len(x), x, ("text",)) for i, x in enumerate(texts)]
        model = lexical.build(texts)
        prefix = store.write(region, ws, big, "bench", chunks, model)
        knowledge_table(region)(ws, KIND_INDEX + big, dataset_id=big, version=rec.data_prefix, prefix=prefix,
                                source_kind="document", policy_fingerprint=indexer.policy_fingerprint(rec),
                                chunk_count=len(chunks), index_format=reader.index_format(), updated_at="x").save()
        ours_index_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        bare = bm25s.BM25()
        bare.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        bare_index_s = time.perf_counter() - t0
        only = {"dataset_ids": [big]}
        store.invalidate()
        knowledge.search(scope, queries[0], 5, only)  # loads the index into this container once

        def bare_search(q: str, bare: Any = bare) -> None:
            bare.retrieve(bm25s.tokenize([q], stopwords="en", show_progress=False), k=5, show_progress=False,
                          n_threads=1)

        def ours_search(q: str, only: dict[str, Any] = only) -> None:
            knowledge.search(scope, q, 5, only)

        if size == SIZES[0]:  # a container that searches once per 10 s (inside a request: its scope read first)
            rows_sparse += _once_per_10s(day_token(), queries, lambda s, q, only=only: knowledge.search(s, q, 5, only),
                                         bare_search)
        ours_ms: list[float] = []
        bare_ms: list[float] = []
        with counting() as calls:
            for i, q in enumerate(queries):  # alternating, each going first in turn
                pairs = [(bare_ms, bare_search), (ours_ms, ours_search)]
                for times, fn in (pairs if i % 2 == 0 else pairs[::-1]):
                    t0 = time.perf_counter()
                    fn(q)
                    times.append((time.perf_counter() - t0) * 1000)
        per_search = sum(calls.values()) / len(queries)
        rows_search.append(
            f"| {size:,} | {_pct(ours_ms, .5):.2f} [{min(ours_ms):.2f}-{max(ours_ms):.2f}] | {_pct(ours_ms, .99):.2f} | "
            f"{per_search:.2f} | {_pct(bare_ms, .5):.2f} [{min(bare_ms):.2f}-{max(bare_ms):.2f}] | "
            f"{_pct(bare_ms, .99):.2f} | {_pct(ours_ms, .5) / _pct(bare_ms, .5):.2f}x |")
        rows_index.append(f"| {size:,} | {ours_index_s:.1f} | {size / ours_index_s:,.0f} | {bare_index_s:.1f} | "
                          f"{size / bare_index_s:,.0f} | {ours_index_s / bare_index_s:.2f}x |")
        del bare, model, chunks, texts
        store.invalidate()

    print(f"### Knowledge search by corpus size ({len(queries)} distinct three-word queries, top 5, default "
          "settings; 30 words per chunk)\n")
    print("| chunks | ours p50 ms [min-max] | ours p99 ms | AWS calls per search | bare bm25s retrieve k=5 p50 ms "
          "[min-max] | bare p99 ms | ratio (p50) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows_search))
    print("\nOurs: knowledge.search (catalog ACL, policy mask, BM25, top 5, citations); the catalog version is "
          "trusted for KNOWLEDGE_CACHE_SECONDS (2 s), the manifests while the workspace's knowledge version "
          "stands (read with the request's scope), so a search reads AWS once per 2 s.\n")
    print("| indexing: chunks | ours s (chunk ids + bm25s + write to S3, moto) | chunks/s | bare bm25s tokenize + "
          "index s | ref chunks/s | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows_index) + "\n", flush=True)
    print("\n".join(rows_sparse), flush=True)

    # --- retrieval quality: lexical vs hybrid on the labelled set ------------------------------------
    qa = json.loads(QA.read_text())
    os.environ["MODEL_PROVIDERS"] = json.dumps({"embeddings": {"model": "builtin/wordllama"}})
    settings.cache_clear()
    registry.cache_clear()
    qa_ds = put_dataset(ws, region, "handbook_qa", [field("_key"), field("passage")],
                        [(p["id"], p["text"]) for p in qa["passages"]])
    indexer.index_dataset(region, ws, qa_ds)
    scores = {}
    # a row's chunk is named by an opaque hash of its key: the passage is known by the chunk's text
    passage_of = {f"passage: {p['text']}"[:chunking.MAX_ROW_CHARS]: p["id"] for p in qa["passages"]}
    for mode in ("lexical", "auto"):
        ranks = []
        for item in qa["questions"]:
            hits = knowledge.search(scope, item["q"], 5, {"dataset_ids": [qa_ds]}, mode=mode)
            docs = [passage_of.get(h.chunk.text) for h in hits]
            ranks.append(docs.index(item["answer"]) + 1 if item["answer"] in docs else None)
        scores[mode] = (sum(1 for r in ranks if r) / len(ranks), sum(1 / r for r in ranks if r) / len(ranks))
    print(f"### Retrieval quality on {len(qa['questions'])} labelled questions ({len(qa['passages'])} passages)\n")
    print("| retrieval | recall@5 | MRR |")
    print("|---|---:|---:|")
    print(f"| lexical (bm25s) | {scores['lexical'][0]:.3f} | {scores['lexical'][1]:.3f} |")
    print(f"| hybrid (bm25s + wordllama 256-d, reciprocal rank fusion) | {scores['auto'][0]:.3f} | "
          f"{scores['auto'][1]:.3f} |\n", flush=True)
    del os.environ["MODEL_PROVIDERS"]
    settings.cache_clear()
    registry.cache_clear()
    indexer.index_dataset(region, ws, qa_ds)  # back to lexical for the chat round trip

    # --- chat round trip with the extractive provider ------------------------------------------------
    questions = [q["q"] for q in qa["questions"]]
    split: dict[str, list[float]] = {"retrieval": [], "model": [], "storage": []}
    total: list[float] = []
    me: list[float] = []
    settings()
    with Client(create_app("platform")) as c:
        for i in range(N_CHATS):
            t0 = time.perf_counter()
            c.http.get("/v1/me", headers=bearer(t.token))
            me.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            r = c.http.post("/v1/chats", headers={**bearer(t.token), "Content-Type": "application/json"},
                            body=json.dumps({"model": "builtin/extractive",
                                             "messages": [{"role": "user", "content": questions[i % len(questions)]}]}))
            total.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 201, r.body
    for i in range(N_CHATS):  # the split, measured inside the service (same path, no HTTP layer)
        a = chat.answer(scope, {"model": "builtin/extractive",
                                "messages": [{"role": "user", "content": questions[i % len(questions)]}]})
        split["retrieval"].append(a.timings.retrieval_ms)
        split["model"].append(a.timings.model_ms)
        split["storage"].append(a.timings.storage_ms)
    print(f"### Chat round trip, extractive provider ({N_CHATS} questions; the workspace also holds the "
          "growth table's indexes)\n")
    print("| part | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    print(f"| POST /v1/chats, whole request (test client) | {_pct(total, .5):.1f} | {_pct(total, .99):.1f} |")
    for part, values in split.items():
        print(f"| of which {part} | {statistics.median(values):.1f} | {_pct(values, .99):.1f} |")
    print(f"| reference: GET /v1/me through the same app | {_pct(me, .5):.1f} | {_pct(me, .99):.1f} |\n", flush=True)

    # --- the chat after quiet: steady, after 5 s, after 60 s (the process clock moved on, not slept) -----
    from bench.common import after_quiet

    turn = iter(range(10**6))
    day = day_token()
    with Client(create_app("platform")) as c:
        def one_chat() -> None:
            q = questions[next(turn) % len(questions)]
            r = c.http.post("/v1/chats", headers={**bearer(day), "Content-Type": "application/json"},
                            body=json.dumps({"model": "builtin/extractive", "messages": [{"role": "user", "content": q}]}))
            assert r.status_code == 201, r.body

        print("\n".join(after_quiet(
            "Chat after quiet (the request's scope: one batch read whatever the quiet; AWS calls include the "
            "request limiter's write)", "POST /v1/chats", one_chat, "GET /v1/me through the same app",
            lambda: c.http.get("/v1/me", headers=bearer(day)))), flush=True)
        one_chat()
        print("\n".join(_walk(one_chat)), flush=True)


def _walk(request: Any) -> list[str]:
    """A warm chat request's walk through ``chalicelib/``, read two ways: the files on the way from its route to
    storage (every ``chalicelib`` frame on the stack at each AWS call it makes) and every module any of its
    function calls enters (``sys.setprofile``: retrieval, the model and the answer's checks included)."""
    import sys

    import botocore.client

    root = "/chalicelib/"
    to_storage: dict[str, None] = {}
    entered: dict[str, None] = {}
    calls: list[str] = []
    original = botocore.client.BaseClient._make_api_call

    def spy(client: Any, operation: str, params: dict[str, Any]) -> Any:
        calls.append(operation)
        frame = sys._getframe(1)
        while frame is not None:
            name = frame.f_code.co_filename
            if root in name:
                to_storage[name.split(root, 1)[1]] = None
            frame = frame.f_back
        return original(client, operation, params)

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and root in frame.f_code.co_filename:
            entered[frame.f_code.co_filename.split(root, 1)[1]] = None

    botocore.client.BaseClient._make_api_call = spy  # type: ignore[method-assign]
    sys.setprofile(profile)
    try:
        request()
    finally:
        sys.setprofile(None)
        botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]
    return [f"### A chat request's walk through chalicelib/ (a warm POST /v1/chats, extractive model; its AWS calls: "
            f"{', '.join(calls)})\n",
            "| reading | files | which |", "|---|---:|---|",
            f"| from the route to storage (each AWS call's stack) | {len(to_storage)} | {', '.join(sorted(to_storage))} |",
            f"| every module a call enters (retrieval, model, checks) | {len(entered)} | "
            f"{', '.join(sorted(entered))} |", "",
            "Target: at most 20 files of chalicelib/ from the route to storage. Every module a call enters is "
            "published beside it (docs/architecture.md, \"A chat request's walk\").", ""]


def _once_per_10s(token: str, queries: list[str], ours: Any, bare: Any, n: int = 30) -> list[str]:
    """Knowledge search in a container searching once per 10 s: each search inside a unit of work whose
    scope the authorization path resolved first (as ``GET /v1/knowledge/search`` does: its one batch read,
    the catalog version with it, not counted as the search's), the process clock moved 10 s before each."""
    from chalicelib.core import clock
    from chalicelib.core.http.api import resolve
    from chalicelib.core.store import scope_versions
    from tests.functional.aws_calls import counting

    ours_ms: list[float] = []
    bare_ms: list[float] = []
    calls: list[int] = []
    for i in range(n):
        clock.advance(10)
        q = queries[i % len(queries)]
        with scope_versions.unit():
            scope = resolve(f"Bearer {token}", "knowledge.read")  # the request's scope read, not the search's
            with counting() as seen:
                t0 = time.process_time()
                ours(scope, q)
                ours_ms.append((time.process_time() - t0) * 1000)
        calls.append(sum(seen.values()))
        t0 = time.process_time()
        bare(q)
        bare_ms.append((time.process_time() - t0) * 1000)
    med, ref = statistics.median(ours_ms), statistics.median(bare_ms)
    return [f"### Knowledge search once per 10 s ({SIZES[0]:,} chunks, {n} searches, CPU time)\n",
            "| measure | CPU ms median [min-max] | AWS calls per search |", "|---|---:|---:|",
            f"| ours (knowledge.search inside a request) | {med:.2f} [{min(ours_ms):.2f}-{max(ours_ms):.2f}] | "
            f"{statistics.median(calls):.0f} |",
            f"| reference: bare bm25s retrieve k=5 | {ref:.2f} [{min(bare_ms):.2f}-{max(bare_ms):.2f}] | 0 |",
            f"| ratio | {med / ref:.2f}x | |", ""]
