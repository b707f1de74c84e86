"""Stored answers read again after a source narrowed: what the reader may no longer read is redacted.

A chat answer is stored with the passages it was grounded on (``passages``: chunk, dataset, document and
fields, never text). Every read of a stored answer (``GET /v1/chats/{id}``, an ``Idempotency-Key`` replay of
``/v1/chats`` or ``/v1/chat/completions``, plain or streamed) asks the policy-enforcing reader
(``gateway/reader.sources_readable``) which of them the reader may read now. When one is no longer readable
(its dataset's ACL, its document's ACL or one of its fields' policies narrowed):

- every answer sentence whose support is that passage (``grounding.per_sentence[].passage``, sentences with
  at least partial support) is replaced by ``REDACTED``;
- every quote of that passage (citations, the best-quotes lines) is replaced by ``REDACTED`` wherever the
  text shows it, and the citation keeps its place with ``quote: null`` and ``redacted: true``;
- the message says so: ``redacted: {"reason": "source_no_longer_readable", "sentences": n, "quotes": n}``,
  and sentence spans (``per_sentence[].start/end``) are moved to the redacted text.
Nothing is rewritten in storage: a source that becomes readable again shows the answer whole again.
Answers stored before ``passages`` existed are checked by their citations' sources, and their links and
images as a new answer's are (``knowledge/answer_links``), so no stored chat shows an outside image.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core.tenancy import RequestScope
from chalicelib.core.workspace_settings import answer_link_hosts
from chalicelib.gateway import reader
from chalicelib.knowledge import answer_links
from chalicelib.knowledge.redaction_spans import REASON, cut, ranges


def _sources(m: dict[str, Any], kept: list[dict[str, Any]] | None) -> dict[int, dict[str, Any]]:
    """ref -> source of the message's passages (from the stored passages, else from its citations)."""
    if kept is not None:
        return {n: p for n, p in enumerate(kept, start=1)}
    out: dict[int, dict[str, Any]] = {}
    for c in m.get("citations") or []:
        src = c.get("source") or {}
        if isinstance(c.get("ref"), int) and src.get("dataset_id"):
            out[c["ref"]] = {"chunk_id": c.get("chunk_id"), "dataset_id": src["dataset_id"],
                             "doc": src.get("id") if src.get("kind") == "document" else None}
    return out


def _key(src: dict[str, Any]) -> tuple[Any, ...]:
    fields = src.get("fields")
    return (src.get("dataset_id"), src.get("doc"), tuple(fields) if isinstance(fields, list) else None)


def _of(m: dict[str, Any]) -> dict[int, dict[str, Any]]:
    kept = m.get("passages")
    return _sources(m, kept if isinstance(kept, list) else None) if m.get("role") == "assistant" else {}


def _verdicts(scope: RequestScope, messages: list[dict[str, Any]]) -> dict[tuple[Any, ...], bool]:
    """Whether the reader may read each distinct source of ``messages`` now (one reader call)."""
    distinct = {_key(src): src for m in messages for src in _of(m).values()}
    keys = list(distinct)
    return dict(zip(keys, reader.sources_readable(scope, [distinct[k] for k in keys]), strict=True))


def _checked_links(scope: RequestScope, message: dict[str, Any]) -> dict[str, Any]:
    """An answer stored before answers' links were checked (it has no ``passages``) is checked on read,
    its citations' quotes standing for its cited sources (``knowledge/answer_links``)."""
    m = dict(message)
    if m.get("role") != "assistant" or "passages" in m:
        return m
    r = answer_links.rules(answer_link_hosts(scope),
                           [str(c.get("quote") or "") for c in m.get("citations") or [] if isinstance(c, dict)])
    for name in ("content", "unverified_answer"):
        if isinstance(m.get(name), str):
            m[name] = answer_links.sanitise(m[name], r).text
    return m


def redact(scope: RequestScope, message: dict[str, Any],
           verdicts: dict[tuple[Any, ...], bool] | None = None) -> dict[str, Any]:
    """One stored message as the scope's caller may read it now (module docstring); the stored passages are
    never part of what is returned."""
    sources = _of(message)
    m = _checked_links(scope, message)
    m.pop("passages", None)
    if not sources:
        return m
    verdicts = verdicts if verdicts is not None else _verdicts(scope, [message])
    gone = {r for r, src in sources.items() if not verdicts.get(_key(src), False)}
    if not gone:
        return m
    citations, quotes = _redacted_citations(m, gone, {sources[r].get("chunk_id") for r in gone})
    grounding = dict(m.get("grounding") or {})
    per = [dict(p) for p in grounding.get("per_sentence") or []]
    sentences = _redacted_sentences(per, gone)
    count = {"sentences": len(sentences), "quotes": len(quotes)}
    _cut_texts(m, grounding.get("spans_of", "content"), sentences, quotes, per)
    if per:
        grounding["per_sentence"] = per
        m["grounding"] = grounding
    m["citations"] = citations
    m["redacted"] = {"reason": REASON, **count}
    return m


def _redacted_citations(m: dict[str, Any], gone: set[Any], gone_chunks: set[Any]) -> tuple[list[dict[str, Any]], set[str]]:
    """The message's citations with those of hidden sources redacted, and the quotes they held."""
    citations = [dict(c) for c in m.get("citations") or []]
    quotes = set()
    for c in citations:
        if c.get("ref") in gone or c.get("chunk_id") in gone_chunks:
            if c.get("quote"):
                quotes.add(c["quote"])
            c.update({"quote": None, "redacted": True})
    return citations, quotes


def _redacted_sentences(per: list[dict[str, Any]], gone: set[Any]) -> list[tuple[int, int]]:
    """The spans of the sentences a hidden source supports (their grounding entries redacted in place)."""
    sentences = []
    for p in per:
        if p.get("passage") in gone and p.get("status") in ("supported", "partial"):
            sentences.append((int(p["start"]), int(p["end"])))
            p.pop("quote", None)
            p["redacted"] = True
        elif p.get("passage") in gone:
            p.pop("quote", None)
    return sentences


def _cut_texts(m: dict[str, Any], spans_of: str, sentences: list[tuple[int, int]], quotes: set[str],
               per: list[dict[str, Any]]) -> None:
    """The message's texts without those sentences and quotes (in place); the grounding spans moved to match."""
    texts = {"content": m.get("content") or "", "unverified_answer": m.get("unverified_answer")}
    for name, text in texts.items():
        if not isinstance(text, str):
            continue
        new, moved = cut(text, ranges(text, sentences if name == spans_of else [], quotes))
        texts[name] = new
        if name == spans_of:
            for p in per:
                p["start"], p["end"] = moved(int(p.get("start", 0))), moved(int(p.get("end", 0)))
    m["content"] = texts["content"]
    if isinstance(texts["unverified_answer"], str):
        m["unverified_answer"] = texts["unverified_answer"]


def redact_all(scope: RequestScope, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    verdicts = _verdicts(scope, messages)
    return [redact(scope, m, verdicts) for m in messages]


def exported(scope: RequestScope, item: dict[str, Any]) -> dict[str, Any]:
    """A stored chat (its plain table item) as its author may read it now, for their data export: its
    messages as ``GET /v1/chats/{id}`` shows them."""
    try:
        messages = json.loads(item.get("messages") or "[]")
    except ValueError:
        return item
    return {**item, "messages": json.dumps(redact_all(scope, messages)) if isinstance(messages, list)
            else item.get("messages")}
