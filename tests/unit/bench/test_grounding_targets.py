"""The grounding targets on the project's labelled set (bench/data/grounding.json), so a change that makes
the `supported` label or the extractive declines less trustworthy fails the suite, not only the bench."""
from __future__ import annotations

from bench.bench_grounding import evaluate


def test_grounding_and_extractive_declines_meet_their_targets() -> None:
    r = evaluate(calibrate=False)
    assert r.statements >= 200 and r.unanswerable >= 20 and r.answerable >= 40
    assert r.precision >= 0.95, r.false
    assert r.recall >= 0.85, r.misses
    assert r.declined_share >= 0.90 and r.answered_share >= 0.80
    assert r.superseded_shown == 0 and r.current_quoted >= r.versioned - 1
    for kind in ("invented_person", "other_rule_figure", "invented_figure", "negation", "superseded"):
        assert r.supported_by_kind[kind] <= r.by_kind[kind] // 10, kind  # each failure kind is caught
