"""The built-in extractive provider: no network, no model weights, deterministic. It answers by quoting
the retrieved passages' sentences that share the most words with the question, each with its citation
marker, and says that it quotes rather than generates.

It declines rather than quote something beside the point: the question's key terms (its content words
without the generic ones of ``GENERIC``: "policy", "how long", ...) must mostly stand in a passage
(``RELEVANT`` of them, calibrated on ``bench/data/grounding.json``), else the answer is ``NOTHING`` and
the chat's notice is ``not_in_sources``. Of several versions of one document (titles equal but for a year
or version number, or a passage that says it is superseded), only the current one is quoted.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator

from chalicelib.llm.prompt import Completion, Passage, Prompt, estimate_tokens, prompt_tokens
from chalicelib.llm.wording import same_stem, stem, stems, words

PREFIX = "Extractive answer (quoted from your sources, not generated):"
NOTHING = "Extractive answer: nothing in the sources you may read answers this question."
MAX_QUOTES = 3
RELEVANT = 0.65  # weighted share of the question's key terms one sentence (with its title) must hold
GENERIC = frozenset("policy policies rule rules long many much often get gets have has need can could may might must "
                    "should will would know tell please happen happens allowed there is anything something thing "
                    "things someone kind type what does say says said large big fast quickly soon use used using "
                    "after before through per over into than also live lives located".split())
SENT_RE = re.compile(r"[^.!?\n]*[^.!?\n\s][^.!?\n]*[.!?]?")
_VERSION = re.compile(r"(?<![\d])(?:19|20)\d\d(?![\d])|\bv(?:ersion)?[\s_-]?\d+\b", re.I)
_SUPERSEDED = re.compile(r"\b(?:superseded|no longer (?:valid|applies|in force|in effect)|replaced by|obsolete)\b",
                         re.I)


def key_terms(question: str) -> set[str]:
    """The stems of the question's words that say what it is about (all its words when each is generic)."""
    content = words(question)
    return {stem(w) for w in content - GENERIC} or {stem(w) for w in content}


def _holds(held: set[str], key: str) -> bool:
    return any(same_stem(key, h) for h in held)


def relevance(question: str, passages: list[Passage]) -> list[tuple[float, int, int, str, int]]:
    """Each sentence of ``passages`` with the share of the question's key terms it holds (its title
    counts), each term weighted by how rare it is among the passages (a term none holds weighs most):
    ``(relevance, passage rank, start, sentence, ref)``, best first."""
    keys = key_terms(question)
    if not keys or not passages:
        return []
    bags = [stems(p.text + " " + p.title) for p in passages]
    weight = {k: 1 + math.log((len(passages) + 1) / (1 + sum(1 for b in bags if _holds(b, k)))) for k in keys}
    total = sum(weight.values())
    out = []
    for rank, p in enumerate(passages):
        title = stems(p.title)
        for m in SENT_RE.finditer(p.text):
            sentence = m.group(0).strip()
            if len(sentence) < 3 or '"' in sentence or "]" in sentence:
                continue
            held = stems(sentence) | title
            score = sum(w for k, w in weight.items() if _holds(held, k)) / total
            out.append((round(score, 4), rank, m.start(), sentence, p.ref))
    out.sort(key=lambda c: (-c[0], c[1], c[2]))
    return out


def _family(title: str) -> tuple[str, tuple[int, ...]]:
    """``(the title without its year or version, those numbers)``: versions of one document share it."""
    stem = re.sub(r"\.\w{1,5}$", "", title.lower())
    found = tuple(int(re.sub(r"\D", "", m)) for m in _VERSION.findall(stem))
    return re.sub(r"[\W_]+", " ", _VERSION.sub(" ", stem)).strip(), found


def superseded(passages: list[Passage]) -> set[int]:
    """Refs of passages that a current version among ``passages`` replaces."""
    fams = {p.ref: _family(p.title) for p in passages}
    out: set[int] = set()
    for p in passages:
        name, version = fams[p.ref]
        newer = [q for q in passages if q.ref != p.ref and fams[q.ref][0] == name and fams[q.ref][1] > version]
        if version and newer:
            out.add(p.ref)
        elif _SUPERSEDED.search(p.text) and any(q.ref != p.ref and not _SUPERSEDED.search(q.text)
                                                for q in passages if fams[q.ref][0] == name):
            out.add(p.ref)
    return out


def superseded_removed(passages: list[Passage]) -> list[Passage]:
    old = superseded(passages)
    return [p for p in passages if p.ref not in old]


def answerable(passages: list[Passage], question: str) -> list[tuple[float, int, int, str, int]]:
    """The sentences that may be quoted for ``question``, best first: those holding ``RELEVANT`` of its
    key terms, without those of a superseded version of a document whose current version is among them."""
    found = [c for c in relevance(question, passages) if c[0] >= RELEVANT]
    old = superseded([p for p in passages if any(c[4] == p.ref for c in found)])
    return [c for c in found if c[4] not in old]


def candidates(passages: list[Passage], query: set[str]) -> list[tuple[float, int, int, str, int]]:
    """Sentences sharing words (stems) with ``query``: ``(-shared, passage rank, start, sentence, ref)``, best first."""
    wanted = {stem(w) for w in query}
    out: list[tuple[float, int, int, str, int]] = []
    for rank, p in enumerate(passages):
        for m in SENT_RE.finditer(p.text):
            sentence = m.group(0).strip()
            if len(sentence) < 3 or '"' in sentence or "]" in sentence:
                continue
            overlap = len(wanted & stems(sentence))
            if overlap:
                out.append((-overlap, rank, m.start(), sentence, p.ref))
    out.sort()
    return out


def declined(text: str) -> bool:
    return text.strip() == NOTHING


def answer(prompt: Prompt) -> str:
    picked = answerable(prompt.passages, prompt.question())[:MAX_QUOTES]
    if not picked and not prompt.may_decline:
        current = superseded_removed(prompt.passages)
        picked = candidates(current, words(prompt.question()))[:MAX_QUOTES]
        if not picked and current:  # no shared word: the best-ranked passage's first sentence
            m = SENT_RE.search(current[0].text)
            if m and '"' not in m.group(0) and "]" not in m.group(0):
                picked = [(0, 0, 0, m.group(0).strip(), current[0].ref)]
    if not picked:
        return NOTHING
    titles = {p.ref: p.title for p in prompt.passages}
    lines = [PREFIX] + [f'- {titles[ref]}: "{sentence}" [{ref}: "{sentence}"]' for _, _, _, sentence, ref in picked]
    return "\n".join(lines)


def complete(prompt: Prompt) -> Completion:
    text = answer(prompt)
    return Completion(text, prompt_tokens(prompt), estimate_tokens(text))


def stream(prompt: Prompt) -> Iterator[str | Completion]:
    """Deltas (one per line), then the final ``Completion``."""
    done = complete(prompt)
    lines = done.text.split("\n")
    for i, line in enumerate(lines):
        yield line + ("\n" if i < len(lines) - 1 else "")
    yield done
