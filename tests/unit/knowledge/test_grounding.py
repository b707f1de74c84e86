"""Sentence attribution without a store: the shared-words quote is located verbatim in the passage, a
number no passage holds is flagged, and the thresholds map support to the marks."""
from __future__ import annotations

from chalicelib.knowledge.chunking import DOCUMENT, Chunk
from chalicelib.knowledge.grounding import attribute, longest_shared_words, status_of
from chalicelib.knowledge.service import Hit

PASSAGE = "Employees get thirty vacation days per year. Unused days expire in March."


def hit(text: str = PASSAGE) -> Hit:
    return Hit(Chunk("chk_1", DOCUMENT, "ds_1", "doc_1", "v1", "handbook.md", 100, 100 + len(text), text, ("text",)),
               1.0, "handbook")


def test_the_quote_is_the_longest_shared_run_of_words_as_stored() -> None:
    quote, start, size = longest_shared_words("So employees GET thirty vacation days, it seems.", PASSAGE)
    assert (quote, size) == ("Employees get thirty vacation days", 5)
    assert PASSAGE[start:start + len(quote)] == quote


def test_a_figure_absent_from_the_sources_is_flagged_and_cuts_support() -> None:
    same = attribute("Employees get thirty vacation days per year.", [hit()], [None])
    invented = attribute("Employees get 45 vacation days per year.", [hit()], [None])
    assert same is not None and invented is not None
    assert status_of(same.support) == "supported" and same.numbers_missing == []
    assert invented.numbers_missing == ["45"] and status_of(invented.support) == "unsupported"


def test_unrelated_text_is_unsupported_and_thresholds_hold() -> None:
    found = attribute("The cafeteria serves sushi on Fridays.", [hit()], [None])
    assert found is not None and status_of(found.support) == "unsupported" and found.quote is None
    assert [status_of(x) for x in (0.55, 0.549, 0.3, 0.299)] == ["supported", "partial", "partial", "unsupported"]
