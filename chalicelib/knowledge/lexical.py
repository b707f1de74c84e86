"""Lexical BM25 over a chunk list with ``bm25s`` (its eager sparse score matrix), and scoring that
applies the caller's permissions *before* ranking: only the postings of chunks the caller may read are
summed, so an unreadable chunk is never given a score at all (``score``).

Scores are accumulated densely: one ``np.bincount`` over the query tokens' postings into an array of one
slot per chunk (no sort of the postings), and ``top`` selects with ``np.argpartition``, ordering the
selected by score, then by chunk index (lower first) - also among ties at the k-th place."""
from __future__ import annotations

import os
import tempfile
from typing import Any

import bm25s
import numpy as np

STOPWORDS = "en"


def tokenize(texts: list[str]) -> Any:
    return bm25s.tokenize(texts, stopwords=STOPWORDS, show_progress=False)


def build(texts: list[str]) -> bm25s.BM25:
    model = bm25s.BM25()
    with np.errstate(divide="ignore", invalid="ignore"):  # a corpus without any token divides by zero
        model.index(tokenize(texts), show_progress=False)
    model.scores["data"] = np.nan_to_num(model.scores["data"], copy=False)
    return model


def query_ids(model: bm25s.BM25, query: str) -> list[int]:
    tokens = bm25s.tokenize([query], stopwords=STOPWORDS, return_ids=False, show_progress=False)[0]
    vocab = model.vocab_dict
    return sorted({vocab[t] for t in tokens if t in vocab})


def score(model: bm25s.BM25, ids: list[int], allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(chunk indices, scores)`` of the allowed chunks that match any query token, indices ascending."""
    data, indices, indptr = model.scores["data"], model.scores["indices"], model.scores["indptr"]
    if not ids:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    if len(ids) == 1:
        rows, vals = indices[indptr[ids[0]]:indptr[ids[0] + 1]], data[indptr[ids[0]]:indptr[ids[0] + 1]]
    else:
        rows = np.concatenate([indices[indptr[t]:indptr[t + 1]] for t in ids])
        vals = np.concatenate([data[indptr[t]:indptr[t + 1]] for t in ids])
    if allowed is not None:
        keep = allowed[rows]
        rows, vals = rows[keep], vals[keep]
    if rows.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    size = int(rows.max()) + 1
    sums = np.bincount(rows, weights=vals, minlength=size)  # float64, summed in postings order
    matched = np.zeros(size, dtype=bool)
    matched[rows] = True
    hits = np.flatnonzero(matched)
    return hits, sums[hits].astype(np.float32)


def top(indices: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best ``(index, score)``, best first; ties: lower index first, also at the k-th place."""
    if indices.size == 0 or k <= 0:
        return []
    if indices.size > k:
        part = np.argpartition(-scores, k - 1)[:k]
        kth = scores[part].min()
        above = np.flatnonzero(scores > kth)
        tied = np.flatnonzero(scores == kth)
        if tied.size > k - above.size:  # several candidates share the k-th score: the lowest indices win
            tied = tied[np.argsort(indices[tied], kind="stable")[:k - above.size]]
        part = np.concatenate([above, tied])
        indices, scores = indices[part], scores[part]
    order = np.lexsort((indices, -scores))
    return [(int(indices[i]), float(scores[i])) for i in order[:k]]


def dump(model: bm25s.BM25) -> dict[str, bytes]:
    """The model's files (``bm25s`` save format) as bytes by name."""
    with tempfile.TemporaryDirectory(prefix="bm25-") as tmp:
        model.save(tmp, show_progress=False)
        return {name: open(os.path.join(tmp, name), "rb").read() for name in os.listdir(tmp)}


def load(files: dict[str, bytes]) -> bm25s.BM25:
    with tempfile.TemporaryDirectory(prefix="bm25-") as tmp:
        for name, body in files.items():
            with open(os.path.join(tmp, os.path.basename(name)), "wb") as fh:
                fh.write(body)
        return bm25s.BM25.load(tmp, show_progress=False, verbosity=0)
