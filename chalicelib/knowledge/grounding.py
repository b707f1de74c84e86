"""Grounding of every answer, computed by the service (a model need not write citation markers).

Each answer sentence that makes a statement is checked against the passages retrieved for the answer by
the rule-based entailment check (``knowledge/entailment.py``): it is ``supported`` only when one passage
entails it (its figures, names, dates and negations stand in one sentence of the passage with the same
role, and most of its words are there). A sentence backed by a verified ``[n: "quote"]`` marker is checked
against the passage it cites first; a marker proves the quote exists, not that the sentence follows from
it; a passage whose document has a newer version among the retrieved ones supports nothing
(``superseded_version``). ``partial``: some of its words are missing but nothing contradicts; ``unsupported``: a key term is
absent, a figure belongs to another statement, negation differs, or little of it is there. Every entry
says which check decided it (``decided_by``: ``rules``, or ``model`` where a generative model confirmed or
refused a statement the rules support, ``knowledge/entailment_model.py``).

A supported sentence cites the passage's sentence(s) that entail it, located verbatim in the stored
chunk. ``ratio`` is the share of statements supported, ``score`` their mean support; ``low`` is set under
``LOW_RATIO`` (the chat service then says so and shows the best quotes, ``docs/api/chat.md``). A ratio says
the statements stand in the sources, not that they answer the question: ``answers_question`` is false (and
``question_terms_not_quoted`` names them) when the passages the supported statements quote miss some of the
question's key terms.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from chalicelib.knowledge import answer_links, citations, entailment
from chalicelib.knowledge.citations import Verified
from chalicelib.knowledge.entailment_model import Checker
from chalicelib.knowledge.service import Hit
from chalicelib.llm.prompt import CITE_RE, Passage, analyse, sentences
from chalicelib.llm.providers import extractive
from chalicelib.llm.providers.extractive import candidates, words
from chalicelib.llm.wording import same_stem, stem, stems

LOW_RATIO = 0.5
_WORD = re.compile(r"\w+", re.U)


@dataclass
class Attribution:
    ref: int  # 1-based passage number
    verdict: entailment.Verdict
    quote: str  # the passage's sentence(s) that the statement was checked against, verbatim
    quote_start: int  # in the chunk

    @property
    def status(self) -> str:
        return entailment.status(self.verdict)

    @property
    def support(self) -> float:
        v = self.verdict
        return round(v.coverage if v.entailed or self.status == "partial" else min(v.coverage, 0.29), 4)


def longest_shared_words(sentence: str, passage: str) -> tuple[str | None, int, int]:
    """The longest shared run of whole words: ``(quote as stored in the passage, start, word count)``."""
    s_words = [m.group(0).lower() for m in _WORD.finditer(sentence)]
    p_matches = list(_WORD.finditer(passage))
    p_words = [m.group(0).lower() for m in p_matches]
    if not s_words or not p_words:
        return None, -1, 0
    match = difflib.SequenceMatcher(None, s_words, p_words, autojunk=False).find_longest_match(
        0, len(s_words), 0, len(p_words))
    if match.size == 0:
        return None, -1, 0
    first, last = p_matches[match.b], p_matches[match.b + match.size - 1]
    return passage[first.start():last.end()], first.start(), match.size


def superseded(hits: list[Hit]) -> set[int]:
    """Refs of retrieved passages whose document has a newer version among the hits (as the extractive
    provider decides it): they support nothing."""
    return extractive.superseded([Passage(i + 1, h.chunk.title, h.chunk.text) for i, h in enumerate(hits)])


_LIST_SYNTAX = re.compile(r"^\s*(?:[-*\u2022]|\d{1,3}[.)])\s+")
_QUOTES = " \t\"'\u201c\u201d\u2018\u2019"


def verbatim(sentence: str, hit: Hit) -> tuple[int, str]:
    """Where ``sentence`` (three words or more) stands verbatim in the passage from the start of one of
    its sentences, as a quote of it (a list item, the passage's title and a colon before it, and quotation
    marks around it aside): ``(start in the chunk, quote)``, or ``(-1, "")``. Such a quote is entailed by
    its passage."""
    core = _LIST_SYNTAX.sub("", sentence)
    title = hit.chunk.title.strip()
    if title and core.startswith(title + ":"):
        core = core[len(title) + 1:]
    core = core.strip(_QUOTES)
    if len(_WORD.findall(core)) < 3:  # a word or two is checked by the rules, and quoted with its sentence
        return -1, ""
    text = hit.chunk.text
    at = text.find(core)
    while at >= 0 and text[:at].rstrip() and text[:at].rstrip()[-1] not in ".!?:;\n":
        at = text.find(core, at + 1)  # only from the start of one of its sentences ("not ..." stays out)
    return at, core


def attribute(sentence: str, hits: list[Hit], prefer: set[int] | None = None,
              old: set[int] | None = None) -> Attribution | None:
    """The passage that best entails ``sentence``; the passages of ``prefer`` (1-based refs, those its
    verified markers cite) are taken when one of them entails it; those of ``old`` (superseded versions)
    entail nothing."""
    if not hits or not sentence.strip():
        return None
    best: Attribution | None = None
    for i, hit in enumerate(hits):
        at, core = verbatim(sentence, hit)
        v = entailment.check(sentence, hit.chunk.text, hit.chunk.title) if at < 0 else \
            entailment.Verdict(True, 1.0, (at, at + len(core)))
        if v.entailed and old and i + 1 in old:
            v.entailed, v.reasons = False, ["superseded_version"]
        s, e = v.window
        cand = Attribution(i + 1, v, hit.chunk.text[s:e], s)
        key = (cand.ref in (prefer or set()) and v.entailed, v.rank)
        if best is None or key > (best.ref in (prefer or set()) and best.verdict.entailed, best.verdict.rank):
            best = cand
    return best


def assess(content: str, hits: list[Hit], cited: dict[int, set[int]] | set[int], checker: Checker | None = None
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(grounding, attributed citations)`` for the rendered answer ``content``.

    ``cited``: sentences (indexes in ``content``) backed by a verified marker, with the passages cited;
    ``checker``: the model that confirms each statement the rules support (``knowledge/entailment_model.py``).
    """
    refs = cited if isinstance(cited, dict) else {i: set() for i in cited}
    _, counts = analyse(content)
    spans = sentences(content)
    statements = [(i, s, e) for i, ((s, e), c) in enumerate(zip(spans, counts, strict=False)) if c]
    per: list[dict[str, Any]] = []
    attributed: list[dict[str, Any]] = []
    seen: set[tuple[str, int, int]] = set()
    old = superseded(hits)
    for i, s, e in statements:
        text = CITE_RE.sub("", content[s:e]).strip()
        lost = answer_links.carries_marker(text)  # a sentence that lost a link or an image is never grounded
        found = None if lost else attribute(text, hits, refs.get(i), old)
        status = found.status if found else "unsupported"
        entry: dict[str, Any] = {"index": i, "start": s, "end": e, "status": status,
                                 "support": found.support if found else 0.0, "cited": i in refs and not lost,
                                 "decided_by": "rules", **({"link_removed": True} if lost else {})}
        if found is not None:
            status = _checked(entry, found, text, checker)
            if status == "supported":
                entry["quote"] = found.quote
                cit = _attributed(hits[found.ref - 1], found, seen) if i not in refs else None
                if cit is not None:
                    attributed.append(cit)
        per.append(entry)
    return _summary(per, checker), attributed


def _checked(entry: dict[str, Any], found: Any, text: str, checker: Checker | None) -> str:
    """The sentence's entry completed with its passage and the rules' verdict, the model's too when it
    checks a supported statement (it may overrule the rules); the sentence's status."""
    v = found.verdict
    status = found.status
    entry.update({"passage": found.ref, "coverage": v.coverage})
    if status == "supported" and checker is not None:
        verdict = checker.entails(text, found.quote)
        if verdict is None or verdict == "over_limit":
            entry["model_check"] = verdict or "no_verdict"
        else:
            entry["decided_by"] = "model"
        if verdict is False:
            status = entry["status"] = "unsupported"
            entry["support"] = 0.0
            entry["reasons"] = ["model_not_entailed"]
    if v.reasons:
        entry["reasons"] = v.reasons
    if v.missing:
        entry["terms_not_in_passage"] = v.missing
    if v.numbers_missing:
        entry["numbers_not_in_sources"] = v.numbers_missing
    return status


def _attributed(hit: Hit, found: Any, seen: set[tuple[str, int, int]]) -> dict[str, Any] | None:
    """The citation an uncited supported sentence is attributed to (None: that quote is cited already)."""
    end = found.quote_start + len(found.quote)
    key = (hit.chunk.id, found.quote_start, end)
    if key in seen:
        return None
    seen.add(key)
    cit = hit.citation()
    cit.update({"ref": found.ref, "quote": found.quote,
                "span": {"start": hit.chunk.start + found.quote_start, "end": hit.chunk.start + end},
                "chunk_span": {"start": found.quote_start, "end": end}, "verified": True,
                "attributed": True})
    return cit


def _summary(per: list[dict[str, Any]], checker: Checker | None) -> dict[str, Any]:
    """The answer's grounding from its sentences' entries."""
    total = len(per)
    grounded = sum(1 for p in per if p["status"] == "supported")
    ratio = round(grounded / total, 4) if total else 0.0
    grounding = {"sentences": total, "grounded_sentences": grounded, "ratio": ratio,
                 "partial_sentences": sum(1 for p in per if p["status"] == "partial"),
                 "unsupported_sentences": sum(1 for p in per if p["status"] == "unsupported"),
                 "score": round(sum(p["support"] for p in per) / total, 4) if total else 0.0,
                 "low": ratio < LOW_RATIO, "per_sentence": per,
                 "method": {"rules": True, "model": checker.model if checker is not None else None}}
    if checker is not None:
        grounding["model_check"] = checker.usage()
    return grounding


LOW_NOTE = ("Only part of this answer is supported by the sources you may read (grounding {pct}%); sentences "
            "marked unsupported may be invented. Check the quotes below.")
NONE_NOTE = ("The sources you may read do not support the model's answer, so it is not shown as fact "
             "(it is kept as unverified_answer).")
NO_SOURCES_NOTE = "Nothing in the knowledge you may read matches this question, so the model's answer is not shown as fact."
QUOTES_HEADER = "Best matching quotes from your sources:"
MAX_BEST_QUOTES = 3


def best_quotes(question: str, hits: list[Hit]) -> tuple[list[str], list[dict[str, Any]]]:
    """The passages' sentences closest to the question (as the extractive provider picks them), cited."""
    passages = [Passage(i + 1, h.chunk.title, h.chunk.text) for i, h in enumerate(hits)]
    lines: list[str] = []
    cites: list[dict[str, Any]] = []
    for _, _, pos, sentence, ref in candidates(passages, words(question))[:MAX_BEST_QUOTES]:
        hit = hits[ref - 1]
        start = hit.chunk.text.find(sentence, pos)
        if start < 0:
            continue
        lines.append(f'- {hit.chunk.title}: "{sentence}" [{ref}]')
        cit = hit.citation()
        cit.update({"ref": ref, "quote": sentence, "verified": True, "best_quote": True,
                    "span": {"start": hit.chunk.start + start, "end": hit.chunk.start + start + len(sentence)},
                    "chunk_span": {"start": start, "end": start + len(sentence)}})
        cites.append(cit)
    return lines, cites


def terms_not_quoted(question: str, hits: list[Hit], grounding: dict[str, Any]) -> list[str]:
    """The question's key terms (as the extractive provider picks them) that none of the passages quoted by
    supported statements holds (text or title): quotes without them may be true and still not answer the
    question (a question about Berlin answered by a rule that does not name Berlin)."""
    held: set[str] = set()
    for ref in {e.get("passage", 0) for e in grounding["per_sentence"] if e["status"] == "supported"}:
        if 0 < ref <= len(hits):
            held |= stems(hits[ref - 1].chunk.text) | stems(hits[ref - 1].chunk.title)
    by_stem = {stem(w): w for w in sorted(words(question))}
    return sorted(by_stem.get(k, k) for k in extractive.key_terms(question) if not any(same_stem(k, h) for h in held))


def ground(text: str, hits: list[Hit], region: str, *, generative: bool, question: str,
           checker: Checker | None = None) -> Verified:
    """Verify the model's markers, attribute every sentence, and say so when grounding is low.

    A low-grounded answer keeps its text after a note and before the best quotes; an answer with no
    supported sentence is replaced by the note and the best quotes (the text moves to ``unverified``).
    """
    checked = citations.verify(text, hits)
    declined = not generative and extractive.declined(text)
    grounding, attributed = assess("" if declined else checked.content, hits, checked.backed_refs, checker)
    out = Verified(checked.content, checked.citations + attributed, grounding, checked.dropped)
    if declined:  # the answer asserts nothing: no statement to grade
        out.notice, grounding["low"] = "not_in_sources", False
    if grounding["grounded_sentences"]:  # a ratio says the quotes are true, not that they answer the question
        missing = terms_not_quoted(question, hits, grounding)
        grounding["answers_question"] = not missing
        if missing:
            grounding["question_terms_not_quoted"] = missing
    if not generative or not grounding["low"] or not grounding["sentences"]:
        grounding["spans_of"] = "content"
        return out
    lines, cites = best_quotes(question, hits)
    quotes = ("\n\n" + QUOTES_HEADER + "\n" + "\n".join(lines)) if lines else ""
    if grounding["grounded_sentences"] == 0:
        out.unverified = checked.content
        out.content = (NONE_NOTE if hits else NO_SOURCES_NOTE) + quotes
        grounding["spans_of"] = "unverified_answer"
        out.citations = cites
        out.notice = "unsupported"
    else:
        note = LOW_NOTE.format(pct=round(grounding["ratio"] * 100)) + "\n\n"
        for entry in grounding["per_sentence"]:
            entry["start"] += len(note)
            entry["end"] += len(note)
        out.content = note + checked.content + quotes
        grounding["spans_of"] = "content"
        out.citations = out.citations + cites
        out.notice = "low_grounding"
    grounding["fallback"] = "best_quotes"
    return out
