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

import re
from collections.abc import Iterator

from chalicelib.llm.prompt import Completion, Passage, Prompt, estimate_tokens, prompt_tokens

PREFIX = "Extractive answer (quoted from your sources, not generated):"
NOTHING = "Extractive answer: nothing in the sources you may read answers this question."
MAX_QUOTES = 3
RELEVANT = 0.6  # share of the question's key terms a passage must hold to be quoted
WORD_RE = re.compile(r"\w{2,}", re.U)
STOP = frozenset("the a an and or of to in on for with is are was were be by at as it its this that what which who "
                 "how when where why do does did from about me my our we you your their there any all".split())
GENERIC = frozenset("policy policies rule rules long many much often get gets have has need can could may might must "
                    "should will would know tell please happen happens allowed there is anything something thing "
                    "things someone kind type what does say says said".split())
SENT_RE = re.compile(r"[^.!?\n]*[^.!?\n\s][^.!?\n]*[.!?]?")
_VERSION = re.compile(r"(?<![\d])(?:19|20)\d\d(?![\d])|\bv(?:ersion)?[\s_-]?\d+\b", re.I)
_SUPERSEDED = re.compile(r"\b(?:superseded|no longer (?:valid|applies|in force|in effect)|replaced by|obsolete)\b",
                         re.I)


def words(text: str) -> set[str]:
    return {w for w in WORD_RE.findall(text.lower()) if w not in STOP}


def _stem(word: str) -> str:
    for suf in ("ations", "ation", "ings", "ing", "ies", "ed", "es", "s"):
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            return word[:-len(suf)]
    return word


def key_terms(question: str) -> set[str]:
    """The question's content words that say what it is about (stems; all content words when every one
    is generic)."""
    content = words(question)
    keys = {_stem(w) for w in content - GENERIC}
    return keys or {_stem(w) for w in content}


def relevance(keys: set[str], passage: Passage) -> float:
    """The share of ``keys`` standing in the passage (its text or title)."""
    if not keys:
        return 0.0
    held = {_stem(w) for w in words(passage.text + " " + passage.title)}
    return sum(1 for k in keys if k in held) / len(keys)


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


def answerable(passages: list[Passage], question: str) -> list[Passage]:
    """The passages that may be quoted for ``question``: those holding ``RELEVANT`` of its key terms,
    without the superseded versions of a document whose current version is among them."""
    keys = key_terms(question)
    relevant = [p for p in passages if relevance(keys, p) >= RELEVANT]
    old = superseded(relevant)
    return [p for p in relevant if p.ref not in old]


def candidates(passages: list[Passage], query: set[str]) -> list[tuple[float, int, int, str, int]]:
    """Sentences sharing words (stems) with ``query``: ``(-shared, passage rank, start, sentence, ref)``, best first."""
    wanted = {_stem(w) for w in query}
    out = []
    for rank, p in enumerate(passages):
        for m in SENT_RE.finditer(p.text):
            sentence = m.group(0).strip()
            if len(sentence) < 3 or '"' in sentence or "]" in sentence:
                continue
            overlap = len(wanted & {_stem(w) for w in words(sentence)})
            if overlap:
                out.append((-overlap, rank, m.start(), sentence, p.ref))
    out.sort()
    return out


def declined(text: str) -> bool:
    return text.strip() == NOTHING


def answer(prompt: Prompt) -> str:
    question = prompt.question()
    picked = candidates(answerable(prompt.passages, question), words(question))[:MAX_QUOTES]
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
