"""The dense scorer against the scorer it replaced (kept here as the oracle): on random corpora, queries
and permission masks, the same chunks with the same scores, and the same top-k in the same order,
ties included (score, then lower chunk index)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from chalicelib.knowledge import lexical

WORDS = [f"w{i}" for i in range(40)] + ["refund", "policy", "order", "ship", "return", "customer"]


def _oracle_score(model, ids, allowed):  # type: ignore[no-untyped-def]
    """The previous scorer: concatenate the postings, ``np.unique`` them, sum by group."""
    data, indices, indptr = model.scores["data"], model.scores["indices"], model.scores["indptr"]
    if not ids:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    rows = np.concatenate([indices[indptr[t]:indptr[t + 1]] for t in ids])
    vals = np.concatenate([data[indptr[t]:indptr[t + 1]] for t in ids])
    if allowed is not None:
        keep = allowed[rows]
        rows, vals = rows[keep], vals[keep]
    if rows.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    uniq, inv = np.unique(rows, return_inverse=True)
    return uniq, np.bincount(inv, weights=vals).astype(np.float32)


def _oracle_top(indices, scores, k):  # type: ignore[no-untyped-def]
    """The definition of the order: every candidate sorted by score (best first), then by chunk index."""
    order = np.lexsort((indices, -scores))
    return [(int(indices[i]), float(scores[i])) for i in order[:k]]


def _corpus(rng: random.Random, n: int, vocabulary: list[str]) -> list[str]:
    texts = []
    for _ in range(n):
        length = rng.choice([0, 1, 3, 8, 20])
        texts.append(" ".join(rng.choice(vocabulary) for _ in range(length)))
    texts[rng.randrange(n)] = rng.choice(vocabulary)  # bm25s cannot index a corpus without any token
    return texts


@pytest.mark.parametrize("seed", range(12))
def test_dense_scorer_equals_the_previous_one(seed: int) -> None:
    rng = random.Random(seed)
    vocabulary = WORDS[: rng.choice([3, 8, len(WORDS)])]  # small vocabularies make many equal scores
    texts = _corpus(rng, rng.choice([1, 5, 60, 400]), vocabulary)
    model = lexical.build(texts)
    n = len(texts)
    for _ in range(40):
        query = " ".join(rng.choice(vocabulary + ["absent", "the"]) for _ in range(rng.randint(1, 5)))
        ids = lexical.query_ids(model, query)
        mask = rng.choice([None, "random", "none", "all"])
        allowed = {None: None, "random": np.array([rng.random() < 0.5 for _ in range(n)], dtype=bool),
                   "none": np.zeros(n, dtype=bool), "all": np.ones(n, dtype=bool)}[mask]
        got_i, got_s = lexical.score(model, ids, allowed)
        want_i, want_s = _oracle_score(model, ids, allowed)
        assert got_i.tolist() == want_i.tolist()
        assert got_s.tolist() == want_s.tolist()  # bit for bit: the same sums in the same order
        for k in (1, 2, 5, 20, n + 3):
            assert lexical.top(got_i, got_s, k) == _oracle_top(want_i, want_s, k)


def test_ties_at_the_kth_place_keep_the_lowest_indices() -> None:
    indices = np.arange(50, dtype=np.int64)[::-1].copy()
    scores = np.array([1.0] * 50, dtype=np.float32)
    scores[7] = 2.0  # index 42 is the best; every other one ties
    assert lexical.top(indices, scores, 4) == [(42, 2.0), (0, 1.0), (1, 1.0), (2, 1.0)]


def test_no_query_token_and_no_readable_chunk_score_nothing() -> None:
    model = lexical.build(["refund policy", "order shipping"])
    assert lexical.score(model, [], None)[0].size == 0
    ids = lexical.query_ids(model, "refund")
    assert lexical.score(model, ids, np.zeros(2, dtype=bool))[0].size == 0
    assert lexical.top(*lexical.score(model, ids, None), 0) == []
