"""Citation verification: verbatim quotes only, from retrieved passages only; forged ones are dropped."""
from __future__ import annotations

from chalicelib.knowledge.chunking import DOCUMENT, Chunk, chunk_id
from chalicelib.knowledge.citations import verify
from chalicelib.knowledge.service import Hit

TEXT = "Refunds are paid within 14 days. Store credit never expires."


def _hit(text: str = TEXT, start: int = 100) -> Hit:
    c = Chunk(chunk_id(lambda *parts: "|".join(parts), "doc_1", start, start + len(text), text), DOCUMENT, "ds_1", "doc_1", "v1",
              "refunds.md", start, start + len(text), text, ("text",))
    return Hit(c, 1.0, "docs")


def test_verified_quote_carries_its_exact_spans() -> None:
    out = verify('Refunds take two weeks [1: "Refunds are paid within 14 days."].', [_hit()])
    assert len(out.citations) == 1
    cit = out.citations[0]
    assert cit["quote"] == "Refunds are paid within 14 days."
    assert cit["chunk_span"] == {"start": 0, "end": 32}
    assert cit["span"] == {"start": 100, "end": 132}
    assert TEXT[cit["chunk_span"]["start"]:cit["chunk_span"]["end"]] == cit["quote"]
    assert cit["source"] == {"kind": "document", "id": "doc_1", "dataset_id": "ds_1", "dataset_name": "docs"}
    assert out.content == "Refunds take two weeks [1]."
    assert out.grounding == {"sentences": 1, "grounded_sentences": 1, "ratio": 1.0}


def test_forged_citations_are_dropped_with_their_markers() -> None:
    text = ('Refunds are fast [1: "Refunds are paid within 14 days."]. '
            'Credit expires yearly [1: "Store credit expires every year."]. '
            'The CEO agrees [4: "The CEO agrees."]. Unsupported claim [2].')
    out = verify(text, [_hit()])
    assert [c["quote"] for c in out.citations] == ["Refunds are paid within 14 days."]
    assert [d["ref"] for d in out.dropped] == [1, 4, 2]
    assert "[4]" not in out.content
    assert "[2]" not in out.content
    assert out.content.count("[1]") == 1
    assert out.grounding["grounded_sentences"] == 1
    assert out.grounding["sentences"] == 4


def test_near_miss_quote_is_not_verbatim() -> None:
    for quote in ("refunds are paid within 14 days.", "Refunds are paid  within 14 days.", " ", ""):
        assert verify(f'X [1: "{quote}"].', [_hit()]).citations == []


def test_duplicate_quotes_are_cited_once() -> None:
    q = "Store credit never expires."
    out = verify(f'A [1: "{q}"]. B [1: "{q}"].', [_hit()])
    assert len(out.citations) == 1
    assert out.grounding["grounded_sentences"] == 2


def test_a_bare_marker_or_an_empty_quote_never_becomes_a_verified_citation() -> None:
    other = _hit("An unrelated paragraph about the canteen and its opening hours.", start=500)
    for text in ("Refunds take two weeks [2].", 'Refunds take two weeks [2: "the"].',
                 "Refunds take two weeks.[2] Credit never expires [2].", 'Refunds take two weeks [2: "  "].'):
        out = verify(text, [_hit(), other])
        assert out.citations == [] and "[2]" not in out.content, text
        assert out.backed == set() and out.backed_refs == {}


def test_a_marker_after_the_period_belongs_to_its_sentence_and_the_next_one_stands_alone() -> None:
    out = verify('Refunds take two weeks.[1: "Refunds are paid within 14 days."] The fee is 40 EUR.', [_hit()])
    assert out.grounding["sentences"] == 2 and out.grounding["grounded_sentences"] == 1
    assert out.backed_refs == {0: {1}}
