"""Where indexes live and how a container keeps them: files in the region's ``knowledge`` bucket under
``indexes/<workspace>/<dataset>/<build>/`` (``chunks.json.gz`` plus the ``bm25s`` files), a manifest
item per dataset in the ``knowledge`` table, and a per-process cache keyed by build, so a new snapshot's
index replaces the old one at the next search after its manifest changes: the manifests are read again
when the workspace's ``knowledge`` version moved (``published`` bumps it after every manifest write;
``core.store.scope_versions``), and otherwise kept however old."""
from __future__ import annotations

import gzip
import io
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import bm25s
import numpy as np

from chalicelib.core import aws, clock, process_state
from chalicelib.core.config import settings
from chalicelib.core.store import scope_versions
from chalicelib.knowledge import lexical
from chalicelib.knowledge.chunking import Chunk
from chalicelib.knowledge.models import KIND_INDEX, KnowledgeAttrs, knowledge

BUCKET = "knowledge"
CHUNKS = "chunks.json.gz"
VECTORS = "vectors.npy"
MAX_CACHED = 64


@dataclass
class Loaded:
    """One dataset's index in memory."""

    prefix: str
    chunks: list[Chunk]
    model: bm25s.BM25
    by_doc: dict[str, list[int]]
    vectors: np.ndarray | None = None  # unit vectors, one row per chunk (hybrid retrieval)
    by_fields: dict[tuple[str, ...], np.ndarray] | None = None  # chunk indices per set of source fields
    # readable-chunk masks per (ALLOW fields, hidden documents, stale) of the callers so far (knowledge/service)
    masks: dict[tuple[frozenset[str], frozenset[str], bool], np.ndarray | None] = field(default_factory=dict)


@dataclass
class Manifests:
    loaded_at: float
    indexes: dict[str, KnowledgeAttrs]  # dataset id -> manifest


_lock = threading.Lock()
_indexes: dict[str, Loaded] = {}
_manifests: scope_versions.VersionedCache[Manifests] = scope_versions.VersionedCache(
    "knowledge.store.manifests", scope_versions.KNOWLEDGE)


def _ttl() -> float:
    return settings().knowledge_cache_seconds


def trust_seconds() -> float:
    """How long a search trusts the catalog version it checked (``catalog.snapshot(...,
    trust_seconds=...)``; docs/decisions.md). The manifests ride on the workspace's scope version."""
    return _ttl()


def invalidate(workspace_id: str | None = None) -> None:
    """Forget this container's manifests (all of them: a later read finds the current ones) and, with no
    workspace named, its loaded indexes."""
    _manifests.clear()
    if workspace_id is None:
        with _lock:
            _indexes.clear()


process_state.enrol("knowledge.store", invalidate)


def published(workspace_id: str) -> None:
    """After a manifest write or delete: every container reads the manifests again from its next search."""
    invalidate(workspace_id)
    scope_versions.bump(workspace_id, scope_versions.KNOWLEDGE)


def manifests(region: str, workspace_id: str) -> Manifests:
    """The workspace's index manifests, read again when its ``knowledge`` version moved."""
    def read() -> Manifests:
        cls = knowledge(region)
        items = cls.query(workspace_id, cls.key.startswith(KIND_INDEX), consistent_read=True)
        return Manifests(clock.now(), {item.dataset_id: item for item in items})
    return _manifests.get(workspace_id, read)


def write(region: str, workspace_id: str, dataset_id: str, build: str, chunks: list[Chunk],
          model: bm25s.BM25, vectors: np.ndarray | None = None) -> str:
    """Upload an index build; returns its prefix (the manifest is written by the caller)."""
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    prefix = f"indexes/{workspace_id}/{dataset_id}/{build}/"
    body = gzip.compress(json.dumps([c.to_json() for c in chunks], separators=(",", ":")).encode(), compresslevel=5)
    s3.put_object(Bucket=bucket, Key=prefix + CHUNKS, Body=body, ServerSideEncryption="aws:kms",
                  SSEKMSKeyId=aws.key_alias("data"))
    if vectors is not None:
        buf = io.BytesIO()
        np.save(buf, vectors.astype(np.float32), allow_pickle=False)
        s3.put_object(Bucket=bucket, Key=prefix + VECTORS, Body=buf.getvalue(), ServerSideEncryption="aws:kms",
                      SSEKMSKeyId=aws.key_alias("data"))
    for name, data in lexical.dump(model).items():
        s3.put_object(Bucket=bucket, Key=prefix + "bm25/" + name, Body=data, ServerSideEncryption="aws:kms",
                      SSEKMSKeyId=aws.key_alias("data"))
    return prefix


def delete_prefix(region: str, prefix: str) -> None:
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        objs = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if objs:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": objs, "Quiet": True})


def load(region: str, prefix: str) -> Loaded:
    """The index at ``prefix``, from this container's cache or S3."""
    with _lock:
        hit = _indexes.get(prefix)
    if hit is not None:
        return hit
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    raw = json.loads(gzip.decompress(s3.get_object(Bucket=bucket, Key=prefix + CHUNKS)["Body"].read()))
    chunks = [Chunk.from_json(d) for d in raw]
    files: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "bm25/"):
        for obj in page.get("Contents", []):
            files[obj["Key"].rsplit("/", 1)[-1]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    loaded = from_chunks(prefix, chunks, lexical.load(files))
    try:
        raw_vec = s3.get_object(Bucket=bucket, Key=prefix + VECTORS)["Body"].read()
        loaded.vectors = np.load(io.BytesIO(raw_vec), allow_pickle=False)
    except s3.exceptions.NoSuchKey:
        pass
    with _lock:
        if len(_indexes) >= MAX_CACHED:
            _indexes.pop(next(iter(_indexes)))
        _indexes[prefix] = loaded
    return loaded


def from_chunks(prefix: str, chunks: list[Chunk], model: bm25s.BM25) -> Loaded:
    by_doc: dict[str, list[int]] = {}
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c.doc, []).append(i)
        groups.setdefault(c.fields, []).append(i)
    return Loaded(prefix, chunks, model, by_doc, None, {f: np.array(ix, dtype=np.int64) for f, ix in groups.items()})


def chunk_text(region: str, workspace_id: str, dataset_id: str, chunk: str) -> Any:
    """The stored chunk with id ``chunk`` of a dataset's current index, or None."""
    m = manifests(region, workspace_id).indexes.get(dataset_id)
    if m is None or not m.prefix:
        return None
    idx = load(region, m.prefix)
    return next((c for c in idx.chunks if c.id == chunk), None)
