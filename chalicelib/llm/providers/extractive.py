"""The built-in extractive provider: no network, no model weights, deterministic. It answers by quoting
the retrieved passages' sentences that share the most words with the question, each with its citation
marker, and says that it quotes rather than generates."""
from __future__ import annotations

import re
from collections.abc import Iterator

from chalicelib.llm.prompt import Completion, Passage, Prompt, estimate_tokens, prompt_tokens

PREFIX = "Extractive answer (quoted from your sources, not generated):"
NOTHING = "Extractive answer: nothing in the knowledge you may read matches this question."
MAX_QUOTES = 3
WORD_RE = re.compile(r"\w{2,}", re.U)
STOP = frozenset("the a an and or of to in on for with is are was were be by at as it its this that what which who "
                 "how when where why do does did from about me my our we you your their there any all".split())
SENT_RE = re.compile(r"[^.!?\n]*[^.!?\n\s][^.!?\n]*[.!?]?")


def words(text: str) -> set[str]:
    return {w for w in WORD_RE.findall(text.lower()) if w not in STOP}


def candidates(passages: list[Passage], query: set[str]) -> list[tuple[float, int, int, str, int]]:
    out = []
    for rank, p in enumerate(passages):
        for m in SENT_RE.finditer(p.text):
            sentence = m.group(0).strip()
            if len(sentence) < 3 or '"' in sentence or "]" in sentence:
                continue
            overlap = len(query & words(sentence))
            if overlap:
                out.append((-overlap, rank, m.start(), sentence, p.ref))
    out.sort()
    return out


def answer(prompt: Prompt) -> str:
    query = words(prompt.question())
    picked = candidates(prompt.passages, query)[:MAX_QUOTES]
    if not picked and prompt.passages:  # no shared word: the best-ranked passage's first sentence
        first = prompt.passages[0]
        m = SENT_RE.search(first.text)
        if m and '"' not in m.group(0) and "]" not in m.group(0):
            picked = [(0, 0, 0, m.group(0).strip(), first.ref)]
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
