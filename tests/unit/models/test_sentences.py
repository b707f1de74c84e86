"""Sentence splitting of answers, for every citation style the providers and the prompt produce: a
sentence ends at its punctuation, with the closing quote and the markers that follow it."""
from __future__ import annotations

import pytest

from chalicelib.llm.prompt import analyse, sentences


def split(text: str) -> list[str]:
    return [text[s:e] for s, e in sentences(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("Returns take 30 days.[1] The fee is 40 EUR.", ["Returns take 30 days.[1]", "The fee is 40 EUR."]),
    ("Returns take 30 days. [1] The fee is 40 EUR.", ["Returns take 30 days. [1]", "The fee is 40 EUR."]),
    ("Returns take 30 days [1]. The fee is 40 EUR.", ["Returns take 30 days [1].", "The fee is 40 EUR."]),
    ('Returns take 30 days.[1][2] The fee is 40 EUR.', ["Returns take 30 days.[1][2]", "The fee is 40 EUR."]),
    ('It says "return within 30 days." [2] Then refunds follow.',
     ['It says "return within 30 days." [2]', "Then refunds follow."]),
    ('Returns take 30 days [1: "Returns. Within 30 days."]. Fees apply.',
     ['Returns take 30 days [1: "Returns. Within 30 days."].', "Fees apply."]),
    ('Returns take 30 days.[1: "Within 30 days."] Fees apply.', ['Returns take 30 days.[1: "Within 30 days."]',
                                                                 "Fees apply."]),
    ("Options:\n- Returns within 30 days [1]\n- Refunds in 5 days [2]\n\n1. First. 2. Second.",
     ["Options:", "- Returns within 30 days [1]", "- Refunds in 5 days [2]", "1. First.", "2. Second."]),
    ("Pi is 3.14 here, e.g. this stays. Next one! Really? Yes.", ["Pi is 3.14 here, e.g. this stays.", "Next one!",
                                                                 "Really?", "Yes."]),
    ("Costs are 1,500 EUR.\nNo line is lost", ["Costs are 1,500 EUR.", "No line is lost"]),
])
def test_sentences_end_where_they_end(text: str, expected: list[str]) -> None:
    assert split(text) == expected


def test_markers_belong_to_the_sentence_they_follow() -> None:
    found, counts = analyse('Returns take 30 days.[1: "Within 30 days."] The fee is 40 EUR. [2] Done [3].')
    assert [(c.ref, c.sentence) for c in found] == [(1, 0), (2, 1), (3, 2)]
    assert counts == [True, True, True]
