"""Grounding of generative answers, computed by the service (a model need not write citation markers).

Each answer sentence that makes a statement is compared with every passage retrieved for the answer:

- **quote**: the longest run of words the sentence shares verbatim (case-insensitive) with the passage,
  located in the stored chunk, so it can be shown and cited with its exact span;
- **lexical**: the share of the sentence's content words found in the passage;
- **semantic**: the best cosine similarity between the sentence and the passage's sentences, with the
  region's embedding model or the offline ``builtin/wordllama`` one when installed (else lexical only).

``support`` = max(quote coverage, 0.6 x lexical + 0.4 x semantic) (lexical alone without embeddings);
a number in the sentence that no passage holds cuts it to a third (an invented figure is the typical
hallucination). A sentence is ``supported`` at 0.55 or more, ``partial`` from 0.3, else ``unsupported``;
one backed by a verified ``[n: "quote"]`` marker is ``supported``. The figure ``ratio`` is the share of
statements supported, ``score`` their mean support; ``low`` is set under ``LOW_RATIO`` (the chat service
then says so and shows the best quotes, ``docs/api/chat.md``).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from chalicelib.knowledge import answer_links, citations, dense
from chalicelib.knowledge.citations import Verified
from chalicelib.knowledge.service import Hit
from chalicelib.llm.prompt import CITE_RE, Passage, analyse, sentences
from chalicelib.llm.providers.extractive import candidates, words

SUPPORTED = 0.55
PARTIAL = 0.3
LOW_RATIO = 0.5
MIN_QUOTE_WORDS = 4
NUMBER_PENALTY = 1 / 3
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"\w+", re.U)


@dataclass
class Attribution:
    ref: int  # 1-based passage number
    support: float
    lexical: float
    semantic: float | None
    quote: str | None
    quote_start: int  # in the chunk (-1: no quote)
    numbers_missing: list[str]


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


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


class Embedder:
    """Sentence vectors for the semantic score (None when no embedding model is available)."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.model: str | None = dense.model_for(region)
        if self.model is None:
            try:
                dense.embed(dense.WORDLLAMA, region, ["probe"])  # loads the optional package once
                self.model = dense.WORDLLAMA
            except ImportError:
                self.model = None

    def vectors(self, texts: list[str]) -> Any:
        assert self.model is not None
        return dense.embed(self.model, self.region, texts)


def attribute(sentence: str, hits: list[Hit], sims: list[float | None]) -> Attribution | None:
    """The passage that best supports ``sentence`` (``sims``: its semantic similarity to each passage)."""
    content = words(sentence)
    if not content or not hits:
        return None
    nums = _numbers(sentence)
    best: Attribution | None = None
    total_words = max(1, len(_WORD.findall(sentence)))
    for i, hit in enumerate(hits):
        text = hit.chunk.text
        lexical = len(content & words(text)) / len(content)
        quote, start, size = longest_shared_words(sentence, text)
        coverage = size / total_words if size >= MIN_QUOTE_WORDS or size == total_words else 0.0
        semantic = sims[i]
        blended = lexical if semantic is None else 0.6 * lexical + 0.4 * max(0.0, semantic)
        support = max(coverage, blended)
        missing = sorted(nums - _numbers(text))
        if missing:
            support *= NUMBER_PENALTY
        cand = Attribution(i + 1, round(support, 4), round(lexical, 4),
                           None if semantic is None else round(float(semantic), 4),
                           quote if size >= MIN_QUOTE_WORDS else None, start if size >= MIN_QUOTE_WORDS else -1,
                           missing)
        if best is None or cand.support > best.support:
            best = cand
    return best


def status_of(support: float) -> str:
    return "supported" if support >= SUPPORTED else "partial" if support >= PARTIAL else "unsupported"


def _similarities(embedder: Embedder | None, statements: list[str], hits: list[Hit]) -> list[list[float | None]]:
    if embedder is None or embedder.model is None or not statements or not hits:
        return [[None] * len(hits) for _ in statements]
    pieces: list[tuple[int, str]] = []
    for i, hit in enumerate(hits):
        for s, e in sentences(hit.chunk.text) or [(0, len(hit.chunk.text))]:
            pieces.append((i, hit.chunk.text[s:e]))
    vecs = embedder.vectors(statements + [p for _, p in pieces])
    out: list[list[float | None]] = []
    for n in range(len(statements)):
        row: list[float | None] = [None] * len(hits)
        for k, (i, _) in enumerate(pieces):
            sim = float(vecs[n] @ vecs[len(statements) + k])
            row[i] = sim if row[i] is None else max(row[i] or 0.0, sim)
        out.append(row)
    return out


def assess(content: str, hits: list[Hit], cited_sentences: set[int], embedder: Embedder | None
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(grounding, attributed citations)`` for the rendered answer ``content``.

    ``cited_sentences``: indexes of sentences (of ``content``) already backed by a verified marker.
    """
    _, counts = analyse(content)
    spans = sentences(content)
    statements = [(i, s, e) for i, ((s, e), c) in enumerate(zip(spans, counts, strict=False)) if c]
    texts = [CITE_RE.sub("", content[s:e]).strip() for _, s, e in statements]
    sims = _similarities(embedder, texts, hits)
    per: list[dict[str, Any]] = []
    citations: list[dict[str, Any]] = []
    seen: set[tuple[str, int, int]] = set()
    for (i, s, e), text, row in zip(statements, texts, sims, strict=True):
        lost = answer_links.carries_marker(text)  # a sentence that lost a link or an image is never grounded
        found = None if lost else attribute(text, hits, row)
        support = found.support if found else 0.0
        cited = i in cited_sentences and not lost
        status = "supported" if cited else status_of(support)
        entry: dict[str, Any] = {"index": i, "start": s, "end": e, "status": status, "support": 1.0 if cited else support,
                                 "cited": cited, **({"link_removed": True} if lost else {})}
        if found is not None:
            entry.update({"passage": found.ref, "lexical": found.lexical, "semantic": found.semantic})
            if found.numbers_missing:
                entry["numbers_not_in_sources"] = found.numbers_missing
            if found.quote is not None and status != "unsupported":
                hit = hits[found.ref - 1]
                end = found.quote_start + len(found.quote)
                entry["quote"] = found.quote
                key = (hit.chunk.id, found.quote_start, end)
                if key not in seen and not cited:
                    seen.add(key)
                    cit = hit.citation()
                    cit.update({"ref": found.ref, "quote": found.quote,
                                "span": {"start": hit.chunk.start + found.quote_start, "end": hit.chunk.start + end},
                                "chunk_span": {"start": found.quote_start, "end": end}, "verified": True,
                                "attributed": True})
                    citations.append(cit)
        per.append(entry)
    total = len(per)
    grounded = sum(1 for p in per if p["status"] == "supported")
    ratio = round(grounded / total, 4) if total else 0.0
    grounding = {"sentences": total, "grounded_sentences": grounded, "ratio": ratio,
                 "partial_sentences": sum(1 for p in per if p["status"] == "partial"),
                 "unsupported_sentences": sum(1 for p in per if p["status"] == "unsupported"),
                 "score": round(sum(p["support"] for p in per) / total, 4) if total else 0.0,
                 "low": ratio < LOW_RATIO, "per_sentence": per,
                 "method": {"quote": True, "lexical": True,
                            "embedding": embedder.model if embedder is not None and embedder.model else None}}
    return grounding, citations


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


def ground(text: str, hits: list[Hit], region: str, *, generative: bool, question: str) -> Verified:
    """Verify the model's markers, attribute every sentence, and say so when grounding is low.

    A low-grounded answer keeps its text after a note and before the best quotes; an answer with no
    supported sentence is replaced by the note and the best quotes (the text moves to ``unverified``).
    """
    checked = citations.verify(text, hits)
    embedder = Embedder(region) if generative and hits else None
    grounding, attributed = assess(checked.content, hits, checked.backed, embedder)
    out = Verified(checked.content, checked.citations + attributed, grounding, checked.dropped)
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
