"""Permission-aware retrieval, the knowledge service other contexts call:

    hits = service.search(scope, "refund policy", k=5, filters={"kinds": ["document"]})

Order of work (permissions before ranking), each rule from the policy-enforcing reader
(``gateway/reader.py``):
1. only datasets the caller may read (dataset ACL) are considered; the index of any other dataset is not
   even loaded;
2. inside each index, chunks of documents whose per-document ACL excludes the caller (the dataset's
   row-level policy), and chunks holding a field whose policy is not ALLOW for the caller, are masked out
   before any score is computed;
3. BM25 scores the remaining chunks; the best ``k`` over all datasets are returned, best first.
A search only reads. An index built under other field policies, another snapshot or another embedding model
than the dataset's current ones is stale: it is served as it is, masked by the caller's CURRENT view (rule 2
with today's policies and ACLs, documents matched under both of their possible names), scored lexically
when its vectors come from another model, and its rebuild is queued (``indexer.request_rebuild``). An index
written under another identity format (``reader.index_format``), or of a dataset that has no data now, is
not served until rebuilt.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from chalicelib.core.authz import require
from chalicelib.core.http.errors import validation_error
from chalicelib.core.telemetry import tracing
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import reader
from chalicelib.gateway.catalog import service as catalog
from chalicelib.knowledge import dense, indexer, lexical, store
from chalicelib.knowledge.chunking import DATASET, DOCUMENT, Chunk

MAX_K = 50
MAX_QUERY_CHARS = 2000
FILTER_KEYS = ("kinds", "dataset_ids")


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    source_name: str  # the dataset's name

    def citation(self) -> dict[str, Any]:
        """The citation of the whole chunk (the chat service narrows ``span``/``quote`` to a verified quote)."""
        c = self.chunk
        return {"source": {"kind": c.kind, "id": c.doc if c.kind == DOCUMENT else c.dataset_id,
                           "dataset_id": c.dataset_id, "dataset_name": self.source_name},
                "version": c.version, "chunk_id": c.id, "span": {"start": c.start, "end": c.end},
                "title": c.title, "quote": c.text}

    def as_dict(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk.id, "score": round(self.score, 6), "text": self.chunk.text,
                "citation": self.citation()}


def _check(query: Any, k: Any, filters: Any) -> dict[str, Any]:
    errors = []
    if not isinstance(query, str) or not query.strip() or len(query) > MAX_QUERY_CHARS:
        errors.append({"field": "q", "message": f"must be 1 to {MAX_QUERY_CHARS} characters"})
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        errors.append({"field": "k", "message": f"must be between 1 and {MAX_K}"})
    filters = filters or {}
    if not isinstance(filters, dict) or set(filters) - set(FILTER_KEYS):
        errors.append({"field": "filters", "message": "may hold only " + ", ".join(FILTER_KEYS)})
    else:
        kinds = filters.get("kinds")
        if kinds is not None and (not isinstance(kinds, list) or set(kinds) - {DOCUMENT, DATASET}):
            errors.append({"field": "kinds", "message": "must list document and/or dataset"})
        ids = filters.get("dataset_ids")
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
            errors.append({"field": "dataset_ids", "message": "must be a list of dataset ids"})
    if errors:
        raise validation_error(errors)
    return filters


MAX_MASKS = 32  # per loaded index


def _allowed(idx: store.Loaded, view: reader.View, stale: bool = False) -> np.ndarray | None:
    """The mask of chunks the caller may read (None: all of them), kept on the index per distinct
    (ALLOW fields, hidden documents, stale): callers with the same view share it. ``stale``: the index was
    built under other field policies, so a hidden document is matched under both of its names."""
    allow_fields = frozenset(f["name"] for f in view.fields if f["policy"] == "ALLOW")
    key = (allow_fields, view.hidden, stale)
    if key in idx.masks:
        return idx.masks[key]
    mask = _mask(idx, view, allow_fields, stale)
    if mask is not None:
        mask.flags.writeable = False  # shared by every caller with this view
    if len(idx.masks) >= MAX_MASKS:
        idx.masks.clear()
    idx.masks[key] = mask
    return mask


def _doc_names(rec: catalog.DatasetRecord, doc: str, stale: bool) -> tuple[str, ...]:
    """How chunks may name document ``doc``: as today's policy names it, or (``stale``) as either policy
    of ``document_id`` would have (its id, or its opaque ``docref_``)."""
    if not stale:
        return (reader.document_ref(rec, doc),)
    return doc, "docref_" + reader.opaque_ref(rec, "document", doc)


def _mask(idx: store.Loaded, view: reader.View, allow_fields: frozenset[str], stale: bool) -> np.ndarray | None:
    mask: np.ndarray | None = None
    for fields, rows in (idx.by_fields or {}).items():
        if not allow_fields.issuperset(fields):
            mask = np.ones(len(idx.chunks), dtype=bool) if mask is None else mask
            mask[rows] = False
    hidden = [i for doc in view.hidden for name in _doc_names(view.rec, doc, stale)
              for i in idx.by_doc.get(name, ())]
    if hidden:
        mask = np.ones(len(idx.chunks), dtype=bool) if mask is None else mask
        mask[np.array(hidden, dtype=np.int64)] = False
    return mask


@tracing.traced("retrieval", lambda p, *_, **__: tracing.retrieval_attrs(p.workspace_id))
def search(scope: RequestScope, query: str, k: int = 5, filters: dict[str, Any] | None = None, *,
           mode: str = "auto") -> list[Hit]:
    """The ``k`` best chunks the caller may read, best first. ``mode``: ``auto`` (hybrid when the index
    has dense vectors of the configured embedding model, else lexical) or ``lexical``."""
    principal = scope.principal
    require(principal, "knowledge.read")
    filters = _check(query, k, filters)
    ws = principal.workspace_id
    region = scope.home
    snap = catalog.snapshot_of(scope, store.trust_seconds())
    manifests = store.manifests(region, ws)
    wanted_ids = set(filters["dataset_ids"]) if filters.get("dataset_ids") is not None else None
    kinds = set(filters.get("kinds") or (DOCUMENT, DATASET))
    embedder = dense.model_for(region)
    query_vec: np.ndarray | None = None
    found: list[Hit] = []
    for rec in catalog.readable(scope, snap):
        if wanted_ids is not None and rec.id not in wanted_ids:
            continue
        m = manifests.indexes.get(rec.id)
        if m is None or m.source_kind not in kinds:
            continue
        wanted = indexer.target(rec, embedder)
        if indexer.built_for(m) != wanted or m.index_format != reader.index_format():
            indexer.request_rebuild(region, ws, rec.id, wanted)  # served as it is meanwhile, masked below
            if m.index_format != reader.index_format() or not rec.data_prefix:
                continue
        if not m.prefix:
            continue
        idx = store.load(region, m.prefix)
        stale_policies = m.policy_fingerprint != indexer.policy_fingerprint(rec)
        allowed = _allowed(idx, reader.view(principal, rec), stale_policies)
        scored = lexical.score(idx.model, lexical.query_ids(idx.model, query), allowed)
        if mode == "lexical" or idx.vectors is None or embedder is None or m.embedding_model != embedder:
            for i, s in lexical.top(*scored, k):
                found.append(Hit(idx.chunks[i], s, rec.name))
            continue
        if query_vec is None:
            query_vec = dense.embed(embedder, region, [query])[0]
        depth = max(4 * k, 20)
        lex = [i for i, _ in lexical.top(*scored, depth)]
        vec = [i for i, _ in lexical.top(*dense.score(idx.vectors, query_vec, allowed), depth)]
        for i, s in dense.fuse([lex, vec], k):
            found.append(Hit(idx.chunks[i], s, rec.name))
    found.sort(key=lambda h: (-h.score, h.chunk.id))
    return found[:k]
