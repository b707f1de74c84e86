"""Grounding: how far the `supported` label can be trusted, measured on the project's own labelled set
(bench/data/grounding.json: 17 documents of a fictional company, scripted answers whose every statement is
labelled by hand as supported by the current sources or not, and questions for the extractive path,
answerable or not). Each question retrieves its 5 best documents with the platform's BM25
(`knowledge/lexical.py`), the answer is graded by the service's grounding (`knowledge/grounding.assess`,
rule-based check only, no model) and the extractive provider answers the questions. Pure Python, no AWS.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data") / "grounding.json"
K = 5
THRESHOLDS = (0.4, 0.5, 0.6, 0.65, 0.7, 0.8)


@dataclass
class Result:
    statements: int = 0
    labelled_supported: int = 0
    true_positive: int = 0
    false_positive: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)  # statements per kind
    supported_by_kind: Counter[str] = field(default_factory=Counter)  # of them labelled supported by the check
    misses: list[str] = field(default_factory=list)  # correct statements not supported
    false: list[str] = field(default_factory=list)  # wrong statements labelled supported
    correct_answers: int = 0  # answers whose every statement is correct
    hidden: int = 0  # ... whose text a reader would not see as the answer (no statement supported)
    low: int = 0  # ... shown with the low-grounding note
    unanswerable: int = 0
    declined: int = 0
    answerable: int = 0
    answered: int = 0
    answered_from_expected: int = 0
    versioned: int = 0
    current_quoted: int = 0
    superseded_shown: int = 0
    calibration: dict[float, tuple[float, float]] = field(default_factory=dict)  # threshold -> (declined, answered)
    seconds: float = 0.0
    held_out: Result | None = None  # the same measures on answers written after the rules were frozen

    @property
    def precision(self) -> float:
        return self.true_positive / max(1, self.true_positive + self.false_positive)

    @property
    def recall(self) -> float:
        return self.true_positive / max(1, self.labelled_supported)

    @property
    def declined_share(self) -> float:
        return self.declined / max(1, self.unanswerable)

    @property
    def answered_share(self) -> float:
        return self.answered / max(1, self.answerable)


def load() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def _corpus(data: dict[str, Any]) -> tuple[list[Any], Any]:
    from chalicelib.knowledge import lexical
    from chalicelib.knowledge.chunking import DOCUMENT, Chunk
    from chalicelib.knowledge.service import Hit

    hits = []
    for n, d in enumerate(data["documents"]):
        text = d["text"]
        chunk = Chunk(f"chk_{n}", DOCUMENT, "ds_bench", f"doc_{n}", "v1", d["title"], 0, len(text), text, ("text",))
        hits.append(Hit(chunk, 0.0, "handbook"))
    model = lexical.build([h.chunk.title + "\n" + h.chunk.text for h in hits])
    return hits, model


def _retrieve(hits: list[Any], model: Any, question: str) -> list[Any]:
    from chalicelib.knowledge import lexical

    return [hits[i] for i, _ in lexical.top(*lexical.score(model, lexical.query_ids(model, question), None), K)]


def _grade(answers: list[dict[str, Any]], hits: list[Any], model: Any, r: Result) -> None:
    from chalicelib.knowledge.grounding import assess

    for answer in answers:
        retrieved = _retrieve(hits, model, answer["question"])
        statements = answer["statements"]
        grounding, _ = assess(" ".join(s["text"] for s in statements), retrieved, {})
        per = grounding["per_sentence"]
        assert len(per) == len(statements), (answer["question"], [p["start"] for p in per])
        for s, p in zip(statements, per, strict=True):
            ok = p["status"] == "supported"
            r.statements += 1
            r.by_kind[s["kind"]] += 1
            r.supported_by_kind[s["kind"]] += ok
            if s["supported"]:
                r.labelled_supported += 1
                r.true_positive += ok
                if not ok:
                    r.misses.append(s["text"])
            elif ok:
                r.false_positive += 1
                r.false.append(s["text"])
        if all(s["supported"] for s in statements):
            r.correct_answers += 1
            r.hidden += grounding["grounded_sentences"] == 0
            r.low += grounding["low"] and grounding["grounded_sentences"] > 0


def evaluate(data: dict[str, Any] | None = None, *, calibrate: bool = True) -> Result:
    from chalicelib.llm.prompt import Passage, Prompt
    from chalicelib.llm.providers import extractive

    data = data or load()
    started = time.perf_counter()
    hits, model = _corpus(data)
    r = Result()
    _grade(data["answers"], hits, model, r)
    r.held_out = Result()
    _grade(data.get("held_out_answers", []), hits, model, r.held_out)
    keep = extractive.RELEVANT
    try:
        for threshold in THRESHOLDS if calibrate else (keep,):
            extractive.RELEVANT = threshold
            declined = answered = 0
            for q in data["questions"]:
                retrieved = _retrieve(hits, model, q["q"])
                passages = [Passage(i + 1, h.chunk.title, h.chunk.text) for i, h in enumerate(retrieved)]
                text = extractive.answer(Prompt([{"role": "user", "content": q["q"]}], passages))
                said = not extractive.declined(text)
                declined += not q["answerable"] and not said
                answered += q["answerable"] and said
                if threshold != keep:
                    continue
                if q["answerable"]:
                    r.answerable += 1
                    r.answered += said
                    r.answered_from_expected += said and f"- {q['document']}:" in text
                    if q["superseded"]:
                        r.versioned += 1
                        r.current_quoted += said and q["current"] in text
                        r.superseded_shown += q["superseded"] in text
                else:
                    r.unanswerable += 1
                    r.declined += not said
            unanswerable = sum(1 for q in data["questions"] if not q["answerable"])
            r.calibration[threshold] = (declined / unanswerable, answered / (len(data["questions"]) - unanswerable))
    finally:
        extractive.RELEVANT = keep
    r.seconds = time.perf_counter() - started
    return r


KINDS = ("verbatim", "paraphrase", "short", "invented_person", "other_rule_figure", "invented_figure", "negation",
         "invented_rule", "wrong_entity", "superseded")


def report(r: Result) -> str:
    from chalicelib.llm.providers import extractive

    lines = [f"### Statements labelled `supported` by the rule-based check ({r.statements} statements of "
             f"{sum(1 for _ in load()['answers'])} scripted answers, {r.labelled_supported} correct by hand)", "",
             "| Measure | Value | Target |", "|---|---|---|",
             f"| precision of `supported` | {r.precision:.3f} ({r.true_positive} of "
             f"{r.true_positive + r.false_positive}) | >= 0.95 |",
             f"| recall of `supported` | {r.recall:.3f} ({r.true_positive} of {r.labelled_supported}) | >= 0.85 |",
             *([f"| held out ({h.statements} statements written after the rules were frozen): precision, recall | "
                f"{h.precision:.3f} ({h.true_positive} of {h.true_positive + h.false_positive}), {h.recall:.3f} "
                f"({h.true_positive} of {h.labelled_supported}) | |"] if (h := r.held_out) and h.statements else []),
             f"| correct answers hidden (no statement supported: text replaced by the note and quotes) | "
             f"{r.hidden} of {r.correct_answers} | |",
             f"| correct answers shown with the low-grounding note | {r.low} of {r.correct_answers} | |",
             "", "### Share labelled `supported`, by kind of statement", "",
             "| Kind | Statements | Labelled supported | Correct by hand |", "|---|---|---|---|"]
    for kind in KINDS:
        n = r.by_kind[kind]
        correct = kind in ("verbatim", "paraphrase", "short")
        lines.append(f"| {kind} | {n} | {r.supported_by_kind[kind]} ({r.supported_by_kind[kind] / max(1, n):.0%}) | "
                     f"{'yes' if correct else 'no'} |")
    lines += ["", f"### Extractive answers ({r.answerable} answerable questions, {r.unanswerable} unanswerable; "
              f"relevance threshold {extractive.RELEVANT})", "",
              "| Measure | Value | Target |", "|---|---|---|",
              f"| unanswerable questions declined (`not_in_sources`) | {r.declined_share:.3f} ({r.declined} of "
              f"{r.unanswerable}) | >= 0.90 |",
              f"| answerable questions answered | {r.answered_share:.3f} ({r.answered} of {r.answerable}) | >= 0.80 |",
              f"| ... quoting the document that answers them | {r.answered_from_expected} of {r.answerable} | |",
              f"| superseded rules: current value quoted | {r.current_quoted} of {r.versioned} | |",
              f"| superseded rules: old value shown | {r.superseded_shown} of {r.versioned} | |",
              "", "### Calibration of the relevance threshold (share of the question's key terms in a passage)", "",
              "| Threshold | Unanswerable declined | Answerable answered |", "|---|---|---|"]
    for t, (dec, ans) in r.calibration.items():
        lines.append(f"| {t}{' (used)' if t == extractive.RELEVANT else ''} | {dec:.3f} | {ans:.3f} |")
    lines += ["", f"Whole evaluation: {r.seconds * 1000:.0f} ms in one process (retrieval, grading, extractive "
              "answers at every threshold)."]
    if r.false:
        lines += ["", "Wrong statements labelled `supported`: " + "; ".join(f"\"{t}\"" for t in r.false) + "."]
    if r.misses:
        lines += ["", "Correct statements not supported: " + "; ".join(f"\"{t}\"" for t in r.misses) + "."]
    if r.held_out and (r.held_out.false or r.held_out.misses):
        lines += ["", "Held out, wrong statements labelled `supported`: "
                  + ("; ".join(f"\"{t}\"" for t in r.held_out.false) or "none") + ". Correct ones not supported: "
                  + ("; ".join(f"\"{t}\"" for t in r.held_out.misses) or "none") + "."]
    return "\n".join(lines)


def main() -> None:
    print(report(evaluate()))


if __name__ == "__main__":
    main()
