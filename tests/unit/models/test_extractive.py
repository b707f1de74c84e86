"""The extractive provider: deterministic, offline, quotes passages verbatim and says it is extractive."""
from __future__ import annotations

from chalicelib.llm.prompt import Passage, Prompt, analyse, render
from chalicelib.llm.providers import extractive


def _prompt(question: str) -> Prompt:
    return Prompt([{"role": "user", "content": question}], [
        Passage(1, "handbook", "Employees get thirty vacation days. Unused days expire in March."),
        Passage(2, "travel", "Travel is booked through the desk.")])


def test_quotes_the_best_sentences_with_markers_deterministically() -> None:
    a = extractive.complete(_prompt("When do unused vacation days expire?"))
    b = extractive.complete(_prompt("When do unused vacation days expire?"))
    assert a.text == b.text
    assert a.text.startswith(extractive.PREFIX)
    found, counts = analyse(a.text)
    assert found[0].ref == 1
    assert found[0].quote == "Unused days expire in March."
    assert all(c.quote and c.quote in "Employees get thirty vacation days. Unused days expire in March."
               for c in found if c.ref == 1)
    assert "[1]" in render(a.text)
    assert '"Unused days expire in March." [1]' in render(a.text)


def test_says_so_when_nothing_matches() -> None:
    empty = Prompt([{"role": "user", "content": "Anything?"}], [])
    assert extractive.complete(empty).text == extractive.NOTHING


def test_stream_yields_lines_then_the_completion() -> None:
    parts = list(extractive.stream(_prompt("How is travel booked?")))
    assert "".join(p for p in parts[:-1]) == parts[-1].text


def _ask(question: str, passages: list[Passage], **kw: bool) -> str:
    return extractive.complete(Prompt([{"role": "user", "content": question}], passages, **kw)).text


def test_declines_when_no_passage_holds_the_question_s_key_terms() -> None:
    travel = [Passage(1, "Travel expense policy 2026", "Hotel costs are reimbursed up to 180 euros per night. "
                      "This policy covers all business travel.")]
    assert _ask("What is the vacation policy?", travel) == extractive.NOTHING
    assert extractive.declined(_ask("What is the vacation policy?", travel))
    assert "180 euros" in _ask("How much is reimbursed for a hotel night?", travel)
    # an agent answering over its own step outputs quotes the closest ones instead
    rows = [Passage(1, "step revenue", "country DE, orders 12, revenue 1234.")]
    assert "country DE" in _ask("Which country brings the most paid revenue?", rows, may_decline=False)


def test_quotes_the_current_version_of_a_document() -> None:
    old = Passage(1, "remote-work-policy-v1.md", "Remote work is allowed up to two days per week.")
    new = Passage(2, "remote-work-policy-v2.md", "Remote work is allowed up to three days per week.")
    for passages in ([old, new], [new, old]):
        text = _ask("How many days per week is remote work allowed?", passages)
        assert "three days" in text and "two days" not in text
    stated = [Passage(1, "Expenses", "Meals are reimbursed up to 35 euros. This rule is superseded by the 2026 "
                      "policy."), Passage(2, "Expenses", "Meals are reimbursed up to 40 euros per day.")]
    assert extractive.superseded(stated) == {1}
    assert extractive.superseded([old]) == set()  # a version alone is current
