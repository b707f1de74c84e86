"""An agent run read again after a source narrowed: what the reader may no longer read is redacted.

Every read of a run (``GET .../runs/{id}``, the run list, a cancel's answer, an ``Idempotency-Key`` replay
of the start) asks the policy-enforcing reader (``gateway/reader.sources_readable``) about the sources the
run read, as the reader of the run now:

- a ``knowledge_search`` passage whose dataset or document is no longer readable shows ``REDACTED`` as its
  text, its citation's quote is null and it is marked ``redacted: true``;
- any other step that read a dataset no longer readable shows ``{"redacted": {...}}`` as its output;
- a sentence of the run's answer whose longest verbatim run of words (at least four) is with a redacted
  source, and not as long with a readable one, is replaced by ``REDACTED``; an extractive citation quoting
  a redacted source has ``quote: null``;
- the run says so: ``redacted: {"reason": "source_no_longer_readable", "sentences", "quotes", "steps"}``.
Nothing is rewritten in storage.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import reader
from chalicelib.knowledge.redaction_spans import REASON, REDACTED, cut, ranges
from chalicelib.llm.prompt import sentences

MIN_QUOTE_WORDS = 4


def _passage_source(p: dict[str, Any]) -> dict[str, Any]:
    src = (p.get("citation") or {}).get("source") or {}
    return {"dataset_id": src.get("dataset_id"), "doc": src.get("id") if src.get("kind") == "document" else None}


def _shared(sentence: str, texts: list[str]) -> int:
    from chalicelib.knowledge import grounding  # noqa: PLC0415 - knowledge loads NumPy and bm25s: at first use, not at cold start

    return max((grounding.longest_shared_words(sentence, t)[2] for t in texts), default=0)


def redact(scope: RequestScope, run: dict[str, Any]) -> dict[str, Any]:
    """``run`` (a view with its steps, each with ``_read``) as the scope's caller may read it now."""
    steps = [dict(s) for s in run.get("steps") or []]
    ok = _readable_sources(scope, steps)
    gone: list[str] = []
    kept: list[str] = []
    count = {"sentences": 0, "quotes": 0, "steps": 0}
    for s in steps:
        _redact_step(s, ok, gone, kept, count)
    result = {**run, "steps": steps}
    output = run.get("output")
    if not gone or not isinstance(output, dict):
        return result if not gone else {**result, "redacted": {"reason": REASON, **count}}
    return {**result, "output": _redact_output(dict(output), gone, kept, count),
            "redacted": {"reason": REASON, **count}}


def _readable_sources(scope: RequestScope, steps: list[dict[str, Any]]) -> Callable[[dict[str, Any]], bool]:
    """Whether the scope's caller may read a source the steps read (one ``sources_readable`` call for them all)."""
    asks: list[dict[str, Any]] = []
    for s in steps:
        out = s.get("output")
        if s.get("tool") == "knowledge_search" and isinstance(out, dict):
            asks += [_passage_source(p) for p in out.get("passages") or [] if isinstance(p, dict)]
        else:
            asks += [{"dataset_id": d} for d in s.get("_read") or []]
    keys = sorted({json.dumps(a, sort_keys=True) for a in asks})
    verdict = dict(zip(keys, reader.sources_readable(scope, [json.loads(k) for k in keys]), strict=True))

    def ok(src: dict[str, Any]) -> bool:
        return verdict.get(json.dumps(src, sort_keys=True), False)

    return ok


def _redact_step(s: dict[str, Any], ok: Callable[[dict[str, Any]], bool], gone: list[str], kept: list[str],
                 count: dict[str, int]) -> None:
    """The step's output as the reader may see it (in place); what it hides joins ``gone``, the rest ``kept``."""
    read = s.pop("_read", [])
    out = s.get("output")
    if s.get("tool") == "knowledge_search" and isinstance(out, dict):
        passages = []
        for p in out.get("passages") or []:
            if isinstance(p, dict) and not ok(_passage_source(p)):
                gone.append(str(p.get("text") or ""))
                p = {**p, "text": REDACTED, "redacted": True,
                     "citation": {**(p.get("citation") or {}), "quote": None}}
            elif isinstance(p, dict):
                kept.append(str(p.get("text") or ""))
            passages.append(p)
        if any(isinstance(p, dict) and p.get("redacted") for p in passages):
            s["output"] = {**out, "passages": passages}
            count["steps"] += 1
    elif out is not None and not all(ok({"dataset_id": d}) for d in read):
        gone.append(json.dumps(out, default=str))
        s["output"] = {"redacted": {"reason": REASON}}
        count["steps"] += 1
    elif out is not None:
        kept.append(json.dumps(out, default=str))


def _redact_output(output: dict[str, Any], gone: list[str], kept: list[str], count: dict[str, int]) -> dict[str, Any]:
    """The run's answer without the sentences that quote hidden outputs (more than visible ones), and its
    citations without the quotes taken from them."""
    answer = output.get("answer")
    if isinstance(answer, str):
        spans = [(a, b) for a, b in sentences(answer)
                 if (n := _shared(answer[a:b], gone)) >= MIN_QUOTE_WORDS and n > _shared(answer[a:b], kept)]
        count["sentences"] = len(spans)
        output["answer"] = cut(answer, ranges(answer, spans, set()))[0]
    cites = []
    for c in output.get("citations") or []:
        if isinstance(c, dict) and c.get("quote") and any(c["quote"] in g for g in gone):
            c = {**c, "quote": None, "redacted": True}
            count["quotes"] += 1
        cites.append(c)
    if "citations" in output:
        output["citations"] = cites
    return output
