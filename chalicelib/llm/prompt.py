"""What every provider receives and returns, and the one citation syntax models are asked to use.

Retrieved passages are numbered ``[1]..[n]`` in a system message; a model cites a passage by writing
``[n: "verbatim quote"]`` after the sentence it supports. ``claims`` parses those markers from any
provider's text and ``render`` turns them into plain ``[n]`` for the reader; the chat service then
verifies each claimed quote against the stored chunk (``chalicelib/knowledge/citations.py``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

CITE_RE = re.compile(r'\[(\d{1,3})(?::\s*"([^"\]]{1,2000})")?\]')
INSTRUCTIONS = (
    "Answer the user's question using only the numbered passages below. After each sentence that uses a "
    'passage, cite it as [n: "an exact quote copied from passage n"]. If the passages do not answer the '
    "question, say so.")


@dataclass(frozen=True)
class Passage:
    ref: int  # 1-based number shown to the model
    title: str
    text: str


@dataclass
class Prompt:
    messages: list[dict[str, str]]  # {role: system|user|assistant, content}
    passages: list[Passage] = field(default_factory=list)
    max_tokens: int = 1024

    def question(self) -> str:
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"), "")

    def with_passages(self) -> list[dict[str, str]]:
        """The messages with one system message carrying the instructions and passages first."""
        if not self.passages:
            return list(self.messages)
        body = "\n\n".join(f"[{p.ref}] {p.title}\n{p.text}" for p in self.passages)
        return [{"role": "system", "content": f"{INSTRUCTIONS}\n\nPassages:\n\n{body}"}, *self.messages]


@dataclass(frozen=True)
class Claim:
    ref: int
    quote: str | None
    sentence: int  # index of the answer sentence the marker belongs to


@dataclass
class Completion:
    text: str  # raw provider text (markers with quotes)
    input_tokens: int
    output_tokens: int


def estimate_tokens(text: str) -> int:
    """A provider-independent estimate (about four characters per token) when a provider reports none."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def prompt_tokens(prompt: Prompt) -> int:
    return sum(estimate_tokens(m["content"]) for m in prompt.with_passages())


SENTENCE_RE = re.compile(r"[^\n.!?]+(?:[.!?]+|$)|[^\n]+", re.M)


def sentences(text: str) -> list[tuple[int, int]]:
    """Spans of the sentences of ``text`` (a citation marker stays with the sentence before it)."""
    out: list[tuple[int, int]] = []
    pos = 0
    for m in re.finditer(r"(?<=[.!?])\s+(?=[\"'A-Z0-9\-\u201c])|\n+", text):
        if text[pos:m.start()].strip():
            out.append((pos, m.start()))
        pos = m.end()
    if text[pos:].strip():
        out.append((pos, len(text)))
    return out


def analyse(text: str) -> tuple[list[Claim], list[bool]]:
    """The citation markers in ``text`` and, per answer sentence, whether it counts as a statement
    (a fragment holding only markers, or a line ending in ``:`` that introduces a list, does not)."""
    blanked = CITE_RE.sub(lambda m: "[" + m.group(1) + "\x00" * (len(m.group(0)) - len(m.group(1)) - 2) + "]", text)
    spans = sentences(blanked)
    found = []
    for m in CITE_RE.finditer(text):
        idx = next((i for i, (s, e) in enumerate(spans) if s <= m.start() < e), max(0, len(spans) - 1))
        if idx > 0 and not CITE_RE.sub("", blanked[spans[idx][0]:m.start()].replace("\x00", "")).strip():
            idx -= 1  # a marker opening a sentence belongs to the sentence before it
        found.append(Claim(int(m.group(1)), m.group(2), idx))
    counts = [bool(CITE_RE.sub("", text[s:e]).strip(" .")) and not text[s:e].rstrip().endswith(":")
              for s, e in spans]
    return found, counts


def claims(text: str) -> tuple[list[Claim], int]:
    """The citation markers in ``text`` and the number of answer sentences that are statements."""
    found, counts = analyse(text)
    return found, sum(counts)


def render(text: str) -> str:
    """The answer as the reader sees it: ``[n: "quote"]`` becomes ``[n]``."""
    return CITE_RE.sub(lambda m: f"[{m.group(1)}]", text)
