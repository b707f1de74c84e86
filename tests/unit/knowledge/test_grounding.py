"""Sentence attribution without a store: support means the passage entails the statement (figures, names
and negation in one sentence with the same role), not that it is worded alike; the quote shown is the
passage's own sentence, located verbatim."""
from __future__ import annotations

from chalicelib.knowledge.chunking import DOCUMENT, Chunk
from chalicelib.knowledge.entailment import check, status, tokens
from chalicelib.knowledge.grounding import assess, attribute, longest_shared_words
from chalicelib.knowledge.service import Hit

PASSAGE = "Employees get thirty vacation days per year. Unused days expire in March."
FEES = ("Cancellations more than 48 hours ahead are free. Late cancellations cost 25 EUR. "
        "No-shows are charged 40 EUR.")
HOTEL = "Hotel costs are reimbursed up to 180 euros per night in capital cities and 120 euros elsewhere."
INCIDENT = "The March outage of the billing service was led by Tom Berg from the platform team."


def hit(text: str = PASSAGE, title: str = "handbook.md", n: int = 1) -> Hit:
    return Hit(Chunk(f"chk_{n}", DOCUMENT, "ds_1", f"doc_{n}", "v1", title, 100, 100 + len(text), text, ("text",)),
               1.0, "handbook")


def label(statement: str, passage: str, title: str = "") -> str:
    return status(check(statement, passage, title))


def test_the_quote_is_the_longest_shared_run_of_words_as_stored() -> None:
    quote, start, size = longest_shared_words("So employees GET thirty vacation days, it seems.", PASSAGE)
    assert (quote, size) == ("Employees get thirty vacation days", 5)
    assert PASSAGE[start:start + len(quote)] == quote


def test_figures_written_in_words_or_digits_are_the_same_figure() -> None:
    assert [t.number for t in tokens("thirty-five days, 1,500 euros, the first day") if t.number] == ["35", "1500", "1"]
    assert label("Employees get 30 vacation days per year.", PASSAGE) == "supported"
    assert label("Employees get thirty vacation days a year.", PASSAGE) == "supported"


def test_an_invented_figure_is_unsupported_and_flagged() -> None:
    v = check("Employees get 45 vacation days per year.", PASSAGE)
    assert status(v) == "unsupported" and v.numbers_missing == ["45"]


def test_a_real_figure_of_another_rule_does_not_count() -> None:
    assert label("A late cancellation costs 25 EUR.", FEES) == "supported"
    assert label("The fee for a late cancellation is 40 EUR.", FEES) == "unsupported"
    assert label("Hotels in capital cities are reimbursed up to 180 euros per night.", HOTEL) == "supported"
    assert label("Hotels in capital cities are reimbursed up to 120 euros per night.", HOTEL) == "unsupported"


def test_an_invented_person_is_unsupported_even_in_the_sources_wording() -> None:
    v = check("The March outage of the billing service was led by Maria Lopez.", INCIDENT)
    assert status(v) == "unsupported" and "Lopez" in v.missing
    assert label("Tom Berg led the March outage of the billing service.", INCIDENT) == "supported"


def test_negation_must_agree() -> None:
    assert label("Unused days do not expire.", PASSAGE) == "unsupported"
    assert label("Audit logs can be altered by administrators.",
                 "Audit logs cannot be altered or deleted by anyone, including administrators.") == "unsupported"


def test_a_short_correct_answer_is_supported_by_a_long_passage() -> None:
    long_passage = ("Our on-call engineers rotate weekly. " * 10) + "Incidents are paged through PagerDuty. " + \
        ("Post-mortems are written within five days. " * 10)
    found = attribute("PagerDuty.", [hit(long_passage, "oncall.md")])
    assert found is not None and found.status == "supported"
    assert found.quote == "Incidents are paged through PagerDuty."


def test_unrelated_text_is_unsupported_and_carries_no_quote() -> None:
    grounding, cites = assess("The cafeteria serves sushi on Fridays.", [hit()], {})
    entry = grounding["per_sentence"][0]
    assert entry["status"] == "unsupported" and entry["decided_by"] == "rules" and "quote" not in entry
    assert cites == []


def test_a_cited_sentence_must_still_be_entailed() -> None:
    grounding, _ = assess("Managers get 45 extra vacation days per year. [1]", [hit()], {0: {1}})
    entry = grounding["per_sentence"][0]
    assert entry["cited"] is True and entry["status"] == "unsupported"


def test_the_cited_passage_is_preferred_when_it_entails() -> None:
    other = hit("Employees get thirty vacation days per year, says the summary.", "summary.md", 2)
    grounding, _ = assess("Employees get thirty vacation days per year.", [other, hit(n=1)], {0: {2}})
    assert grounding["per_sentence"][0]["passage"] == 2


def test_a_verbatim_quote_is_entailed_only_from_the_start_of_a_sentence() -> None:
    passage = "It is not true that refunds are paid twice. Refunds are paid within 14 days."
    quoted = attribute('- refunds.md: "Refunds are paid within 14 days."', [hit(passage, "refunds.md")])
    assert quoted is not None and quoted.status == "supported" and quoted.quote == "Refunds are paid within 14 days."
    inner = attribute("refunds are paid twice.", [hit(passage, "refunds.md")])
    assert inner is not None and inner.status == "unsupported"


def test_the_model_check_asks_once_per_statement_and_passage_and_stops_at_its_limit() -> None:
    from chalicelib.knowledge import entailment_model
    from chalicelib.llm.prompt import Completion

    asked: list[str] = []

    def ask(prompt: object) -> Completion:
        asked.append("x")
        return Completion("Maybe.", 10, 1)

    checker = entailment_model.Checker("ws_unit", "m/unit", ask)
    text = " ".join(["Employees get thirty vacation days per year."] * 3)
    grounding, _ = assess(text, [hit()], {}, checker)
    assert len(asked) == 1 and [p["model_check"] for p in grounding["per_sentence"]] == ["no_verdict"] * 3
    assert [p["status"] for p in grounding["per_sentence"]] == ["supported"] * 3  # the rules' label stands
    checker.calls = entailment_model.MAX_CALLS
    grounding, _ = assess("Unused days expire in March.", [hit()], {}, checker)
    assert grounding["per_sentence"][0]["model_check"] == "over_limit" and len(asked) == 1
    assert [entailment_model.parse(t) for t in ("Yes.", " no", "**No**", "Perhaps")] == [True, False, False, None]


def test_a_failing_model_check_leaves_the_rules_label() -> None:
    from chalicelib.knowledge import entailment_model

    def ask(prompt: object) -> object:
        raise TimeoutError("the checking model is down")

    checker = entailment_model.Checker("ws_unit", "m/down", ask)  # type: ignore[arg-type]
    grounding, _ = assess("Employees get thirty vacation days per year.", [hit()], {}, checker)
    assert grounding["per_sentence"][0]["status"] == "supported"
    assert grounding["per_sentence"][0]["model_check"] == "no_verdict" and grounding["model_check"]["failed"] == 1
