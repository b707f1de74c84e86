"""Dense vectors for hybrid retrieval, when the deployment configures an embedding model (the provider
file's ``"embeddings": {"model": ...}``, ``docs/api/models.md``): either an OpenAI-compatible
``/v1/embeddings`` model served in the workspace's region, or ``builtin/wordllama`` (the ``wordllama``
package's bundled 256-dimension weights, offline; an optional dependency).

Vectors are unit length, so cosine similarity is a dot product, computed only for the chunks the caller
may read (the same mask as lexical scoring). Lexical and dense rankings are fused by reciprocal rank
(``fuse``)."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from chalicelib.core.process_state import cached
from chalicelib.llm import service
from chalicelib.llm.registry import registry

WORDLLAMA = "builtin/wordllama"
RRF_K = 60
BATCH = 256


def model_for(region: str) -> str | None:
    """The embedding model configured for ``region`` (None: lexical retrieval only)."""
    model = registry().embedding_model
    if not model:
        return None
    if model == WORDLLAMA:
        return model
    spec = registry().get(model)
    return model if spec is not None and spec.embeddings and region in spec.regions else None


@cached(maxsize=1, derived=True)
def _wordllama() -> Any:
    import wordllama  # noqa: PLC0415 - optional dependency, loaded only when configured
    from wordllama import WordLlama  # noqa: PLC0415

    # the package ships its weights; its default loader looks elsewhere, so point it at the package
    return WordLlama.load(cache_dir=os.path.dirname(wordllama.__file__), disable_download=True, dim=256)


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def embed(model: str, region: str, texts: list[str]) -> np.ndarray:
    """Unit vectors of ``texts`` (one row each)."""
    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    if model == WORDLLAMA:
        return _unit(_wordllama().embed(texts))

    spec = registry().get(model)
    assert spec is not None
    rows: list[list[float]] = []
    for i in range(0, len(texts), BATCH):
        rows.extend(service.embed(spec, region, texts[i:i + BATCH]))
    return _unit(np.array(rows))


def score(vectors: np.ndarray, query: np.ndarray, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(chunk indices, cosine)`` over the allowed chunks only."""
    idx = np.arange(len(vectors)) if allowed is None else np.flatnonzero(allowed)
    return idx, vectors[idx] @ query


def fuse(rankings: list[list[int]], k: int) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of best-first index lists: ``sum 1 / (RRF_K + rank)``, best ``k`` first."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking, start=1):
            scores[i] = scores.get(i, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
