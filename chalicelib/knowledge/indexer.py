"""Building a dataset's index: after each successful sync that changed data (the composition root,
``workers/jobs.py``, hands ``on_sync`` to the sync worker), and again whenever its field policies differ from those the index was built under (a
search finds that and rebuilds before using it), so a value put under MASK/HASH/REDACT/DENY leaves the
index files at the latest at the next search."""
from __future__ import annotations

import functools
import hashlib
import json

from chalicelib.core import clock
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.gateway import reader, storage
from chalicelib.gateway.catalog import service as catalog
from chalicelib.knowledge import chunking, dense, lexical, store
from chalicelib.knowledge.chunking import Chunk
from chalicelib.knowledge.models import KIND_INDEX, knowledge

log = get_logger("knowledge.indexer")
MAX_ROWS = 200_000


def policy_fingerprint(rec: catalog.DatasetRecord) -> str:
    """The field policies (key columns included: every field) and the rule deriving row identities."""
    pairs = sorted((f["name"], f["policy"]) for f in rec.fields)
    return hashlib.sha256(json.dumps([reader.index_format(), pairs]).encode()).hexdigest()[:32]


def chunks_of(rec: catalog.DatasetRecord, region: str) -> list[Chunk]:
    if not rec.data_prefix:
        return []
    names, rows = storage.read_rows(region, rec.data_prefix, internal=True, limit=MAX_ROWS)
    ident = functools.partial(reader.opaque_ref, rec)
    doc_ref = functools.partial(reader.document_ref, rec)
    if chunking.is_documents(rec.fields):
        return chunking.document_chunks(rec.id, rec.data_prefix, rec.fields, names, rows, ident, doc_ref)
    return chunking.row_chunks(rec.id, rec.name, rec.data_prefix, rec.fields, names, rows, ident, doc_ref)


def index_dataset(region: str, workspace_id: str, dataset_id: str) -> int:
    """(Re)build and publish the dataset's index; returns its chunk count (0: no index)."""
    catalog.invalidate(workspace_id)
    rec = catalog.snapshot(workspace_id).datasets.get(dataset_id)
    cls = knowledge(region)
    old = store.manifests(region, workspace_id).indexes.get(dataset_id)
    chunks = chunks_of(rec, region) if rec is not None else []
    if not chunks:
        if old is not None:
            old.delete()
            if old.prefix:
                store.delete_prefix(region, old.prefix)
        store.invalidate(workspace_id)
        return 0
    texts = [c.text for c in chunks]
    model = lexical.build(texts)
    embedder = dense.model_for(region)
    vectors = dense.embed(embedder, region, texts) if embedder else None
    prefix = store.write(region, workspace_id, dataset_id, new_id("sync").split("_", 1)[1].lower(), chunks, model,
                         vectors)
    cls(workspace_id, KIND_INDEX + dataset_id, dataset_id=dataset_id, version=rec.data_prefix, prefix=prefix,
        source_kind=chunks[0].kind, policy_fingerprint=policy_fingerprint(rec), chunk_count=len(chunks), embedding_model=embedder,
        updated_at=clock.iso()).save()
    if old is not None and old.prefix and old.prefix != prefix:
        store.delete_prefix(region, old.prefix)
    store.invalidate(workspace_id)
    log.info("knowledge index built", extra={"dataset_id": dataset_id, "chunks": len(chunks)})
    return len(chunks)


def on_sync(region: str, workspace_id: str, dataset_id: str) -> None:
    """Sync hook: never fails the sync (a failed build keeps the previous index and is logged)."""
    try:
        index_dataset(region, workspace_id, dataset_id)
    except Exception:  # noqa: BLE001
        log.exception("knowledge indexing failed", extra={"dataset_id": dataset_id})
