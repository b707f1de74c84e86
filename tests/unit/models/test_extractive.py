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
