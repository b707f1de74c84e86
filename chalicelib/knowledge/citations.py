"""Verified citations. A provider's answer cites passages as ``[n: "quote"]`` (``models/prompt.py``);
each claim is kept only when ``n`` names a passage retrieved for this answer and the quote appears
verbatim in that stored chunk. The citation then carries the quote's exact span, both in its source
(``span``) and in the chunk (``chunk_span``). Markers of dropped claims are removed from the answer: a bare
``[n]`` (no quote) or a quote without a content word never becomes a verified citation. A verified marker
proves the quote exists; whether the sentence follows from it is ``knowledge/grounding.py``'s check.
``grounding`` is the share of answer sentences backed by at least one verified quote (a line ending in
``:`` introduces and asserts nothing, so it is not counted).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.knowledge.service import Hit
from chalicelib.llm.prompt import CITE_RE, analyse
from chalicelib.llm.wording import words


@dataclass
class Verified:
    content: str
    citations: list[dict[str, Any]]
    grounding: dict[str, Any]
    dropped: list[dict[str, Any]] = field(default_factory=list)
    backed: set[int] = field(default_factory=set)  # sentences backed by a verified marker
    backed_refs: dict[int, set[int]] = field(default_factory=dict)  # sentence -> passages its markers cite
    unverified: str | None = None  # the model's text when no sentence was supported (knowledge/grounding.py)
    notice: str | None = None  # low_grounding | unsupported


def locate(chunk_text: str, quote: str) -> int:
    """Where ``quote`` starts in the chunk (-1: not verbatim there, or nothing to verify: no quote, or
    one without a content word, such as ``"the"``, which any passage holds)."""
    if not quote or not quote.strip() or not words(quote):
        return -1
    return chunk_text.find(quote)


def verify(text: str, hits: list[Hit]) -> Verified:
    found, counts = analyse(text)
    citations: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    backed: set[int] = set()
    refs: dict[int, set[int]] = {}
    keep_markers: set[int] = set()
    seen: set[tuple[str, int, int]] = set()
    for n, claim in enumerate(found):
        if not 1 <= claim.ref <= len(hits):
            dropped.append({"ref": claim.ref, "reason": "not a passage retrieved for this answer"})
            continue
        hit = hits[claim.ref - 1]
        pos = locate(hit.chunk.text, claim.quote or "")
        if pos < 0:
            dropped.append({"ref": claim.ref, "reason": "quote missing or not verbatim in the cited passage"})
            continue
        keep_markers.add(n)
        backed.add(claim.sentence)
        refs.setdefault(claim.sentence, set()).add(claim.ref)
        key = (hit.chunk.id, pos, len(claim.quote or ""))
        if key in seen:
            continue
        seen.add(key)
        cit = hit.citation()
        end = pos + len(claim.quote or "")
        cit.update({"ref": claim.ref, "quote": claim.quote, "span": {"start": hit.chunk.start + pos,
                                                                      "end": hit.chunk.start + end},
                    "chunk_span": {"start": pos, "end": end}, "verified": True})
        citations.append(cit)
    counter = iter(range(len(found)))

    def keep(m: Any) -> str:
        return f"[{m.group(1)}]" if next(counter) in keep_markers else ""

    content = CITE_RE.sub(keep, text)
    total = sum(counts)
    grounded = sum(1 for i in backed if i < len(counts) and counts[i])
    return Verified(content.strip(), citations, {"sentences": total, "grounded_sentences": grounded,
                                                 "ratio": round(grounded / total, 4) if total else 0.0}, dropped,
                    {i for i in backed if i < len(counts) and counts[i]}, refs)
