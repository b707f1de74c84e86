"""Cutting what a reader may no longer read out of a stored answer's text: the spans (sentences and quotes)
to replace, and the text with each replaced by ``REDACTED`` (with a map of old offsets to new ones), shared by
stored chat answers (``chat/redaction.py``) and agent runs (``agents/run_redaction.py``)."""
from __future__ import annotations

import bisect
from typing import Any

REDACTED = "[redacted: its source is no longer readable by you]"
REASON = "source_no_longer_readable"


def ranges(text: str, sentences: list[tuple[int, int]], quotes: set[str]) -> list[tuple[int, int]]:
    found = [(s, e) for s, e in sentences if 0 <= s < e <= len(text)]
    for q in quotes:
        at = text.find(q)
        while q and at >= 0:
            found.append((at, at + len(q)))
            at = text.find(q, at + len(q))
    merged: list[tuple[int, int]] = []
    for s, e in sorted(found):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def cut(text: str, spans: list[tuple[int, int]]) -> tuple[str, Any]:
    """``text`` with each of the sorted, disjoint ``spans`` replaced by ``REDACTED``, and the map of old
    offsets to new ones."""
    starts = [s for s, _ in spans]
    shifts = []
    shift = 0
    for s, e in spans:
        shift += len(REDACTED) - (e - s)
        shifts.append(shift)
    out = text
    for s, e in reversed(spans):
        out = out[:s] + REDACTED + out[e:]

    def moved(offset: int) -> int:
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            return offset
        s, e = spans[i]
        if offset < e:  # inside a redacted range: its start (or its end for an end offset at it)
            return s + (shifts[i - 1] if i else 0) + (len(REDACTED) if offset > s else 0)
        return offset + shifts[i]

    return out, moved
