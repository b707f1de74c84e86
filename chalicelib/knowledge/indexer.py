"""Building a dataset's index: after each successful sync that changed data (the composition root,
``workers/jobs.py``, hands ``on_sync`` to the sync worker), and again whenever a search finds the index
stale (field policies, snapshot or embedding model differ from those it was built under). A search never
builds: it asks for a rebuild (``request_rebuild``: one conditional write of a ``rebuild#`` marker per
dataset and target, then one message on the ``knowledge-index`` queue), and the queue's worker
(``handle``) builds, so a value put under MASK/HASH/REDACT/DENY leaves the index files once that message
is worked; until then searches mask it out (``knowledge/service``)."""
from __future__ import annotations

import functools
import hashlib
import json
import threading
from typing import Any

from pynamodb.exceptions import DeleteError, PutError

from chalicelib.core import clock, process_state
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.store import queues
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.tenancy import workspace_scope
from chalicelib.gateway import reader, storage
from chalicelib.gateway.catalog import service as catalog
from chalicelib.knowledge import chunking, dense, lexical, store
from chalicelib.knowledge.chunking import Chunk
from chalicelib.knowledge.models import KIND_INDEX, KIND_REBUILD, KnowledgeAttrs, knowledge

log = get_logger("knowledge.indexer")
MAX_ROWS = 200_000
QUEUE = "knowledge-index"
REQUEST_RETRY_S = 900  # a rebuild request older than this (its message dead-lettered or lost) may be made again
SEEN_S = 60.0  # how long a container skips the marker write for a rebuild it already requested or saw requested


def policy_fingerprint(rec: catalog.DatasetRecord) -> str:
    """The field policies (key columns included: every field) and the rule deriving row identities."""
    pairs = sorted((f["name"], f["policy"]) for f in rec.fields)
    return hashlib.sha256(json.dumps([reader.index_format(), pairs]).encode()).hexdigest()[:32]


def target(rec: catalog.DatasetRecord, embedder: str | None) -> str:
    """What an index of ``rec`` built now would be built from: field policies, snapshot, embedding model."""
    raw = json.dumps([policy_fingerprint(rec), rec.data_prefix, embedder])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def built_for(m: KnowledgeAttrs) -> str:
    """The ``target`` an index manifest was built for."""
    return hashlib.sha256(json.dumps([m.policy_fingerprint, m.version, m.embedding_model]).encode()).hexdigest()[:32]


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
    rec = catalog.snapshot(region, workspace_id).datasets.get(dataset_id)
    cls = knowledge(region)
    old = store.manifests(region, workspace_id).indexes.get(dataset_id)
    chunks = chunks_of(rec, region) if rec is not None else []
    if rec is None or not chunks:
        if old is not None:
            old.delete()
            if old.prefix:
                store.delete_prefix(region, old.prefix)
        store.published(workspace_id)
        return 0
    texts = [c.text for c in chunks]
    model = lexical.build(texts)
    embedder = dense.model_for(region)
    vectors = dense.embed(embedder, region, texts) if embedder else None
    prefix = store.write(region, workspace_id, dataset_id, new_id("sync").split("_", 1)[1].lower(), chunks, model,
                         vectors)
    cls(workspace_id, KIND_INDEX + dataset_id, dataset_id=dataset_id, version=rec.data_prefix, prefix=prefix,
        source_kind=chunks[0].kind, policy_fingerprint=policy_fingerprint(rec), chunk_count=len(chunks),
        embedding_model=embedder, index_format=reader.index_format(), updated_at=clock.iso()).save()
    if old is not None and old.prefix and old.prefix != prefix:
        store.delete_prefix(region, old.prefix)
    store.published(workspace_id)
    log.info("knowledge index built", extra={"dataset_id": dataset_id, "chunks": len(chunks)})
    return len(chunks)


def on_sync(region: str, workspace_id: str, dataset_id: str) -> None:
    """Sync hook: never fails the sync (a failed build keeps the previous index and is logged)."""
    try:
        index_dataset(region, workspace_id, dataset_id)
    except Exception:  # noqa: BLE001
        log.exception("knowledge indexing failed", extra={"dataset_id": dataset_id})


# --- rebuilds asked for by searches ----------------------------------------------------------------------

_seen_lock = threading.Lock()
_seen: dict[tuple[str, str, str], float] = {}  # (workspace, dataset, target) -> when this container asked


def _forget_seen() -> None:
    with _seen_lock:
        _seen.clear()


process_state.enrol("knowledge.rebuild_requests", _forget_seen)


def request_rebuild(region: str, workspace_id: str, dataset_id: str, wanted: str) -> bool:
    """Queue one rebuild of the dataset's index towards ``wanted`` (its ``target``); True when this call
    queued it. At most one request per dataset and target is queued: the ``rebuild#`` marker is written
    only when absent, for another target, or older than ``REQUEST_RETRY_S``; a container that asked (or
    found it asked) skips even that write for ``SEEN_S``. Never raises: a search is served either way."""
    memo = (workspace_id, dataset_id, wanted)
    now = clock.now()
    with _seen_lock:
        if now - _seen.get(memo, -SEEN_S) < SEEN_S:
            return False
        if len(_seen) >= 1024:
            _seen.clear()
        _seen[memo] = now
    cls = knowledge(region)
    try:
        cls(workspace_id, KIND_REBUILD + dataset_id, dataset_id=dataset_id, version=wanted,
            updated_at=clock.iso()).save(
            condition=cls.key.does_not_exist() | (cls.version != wanted)
            | (cls.updated_at < clock.iso(now - REQUEST_RETRY_S)))
    except PutError as err:
        if condition_failed(err):
            return False
        log.exception("knowledge rebuild request failed", extra={"dataset_id": dataset_id})
        _forget(memo)
        return False
    try:
        queues.enqueue(QUEUE, region, {"workspace_id": workspace_id, "dataset_id": dataset_id, "target": wanted})
    except Exception:  # noqa: BLE001 - the marker goes, so the next search asks again
        log.exception("knowledge rebuild not queued", extra={"dataset_id": dataset_id})
        _clear_marker(region, workspace_id, dataset_id, wanted)
        _forget(memo)
        return False
    log.info("knowledge rebuild queued", extra={"dataset_id": dataset_id})
    return True


def _forget(memo: tuple[str, str, str]) -> None:
    with _seen_lock:
        _seen.pop(memo, None)


def _clear_marker(region: str, workspace_id: str, dataset_id: str, wanted: str) -> None:
    cls = knowledge(region)
    try:
        cls(workspace_id, KIND_REBUILD + dataset_id).delete(condition=cls.version == wanted)
    except DeleteError as err:
        if not condition_failed(err):
            raise


def handle(event: dict[str, Any]) -> dict[str, Any]:
    """The ``knowledge-index`` queue's worker: rebuild each requested index (unless a sync already
    brought it to its current target), then clear the request's marker. A failed build is redelivered."""
    return queues.handle_batch(event, _handle_record, what="knowledge index")


def _handle_record(record: dict[str, Any]) -> bool:
    body = queues.parse_body(record, workspace_id="ws", dataset_id="ds")
    if body is None or not isinstance(body.get("target"), str):
        log.warning("knowledge index message dropped: malformed", extra={"message_id": record.get("messageId")})
        return True
    ws, ds = body["workspace_id"], body["dataset_id"]
    region = workspace_scope(ws).home  # a job without a caller: the workspace's scope
    catalog.invalidate(ws)
    store.invalidate(ws)
    rec = catalog.snapshot(region, ws).datasets.get(ds)
    current = store.manifests(region, ws).indexes.get(ds)
    if rec is None or current is None or built_for(current) != target(rec, dense.model_for(region)) \
            or current.index_format != reader.index_format():
        index_dataset(region, ws, ds)
    _clear_marker(region, ws, ds, body["target"])
    return True
