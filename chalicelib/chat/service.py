"""Chats: a grounded answer per request, kept in the workspace's region.

One answer, in order: validate (nothing is stored for bad input) -> retrieve the passages the caller
may read (``knowledge/service.search``) -> route (``models/routing.choose``: residency, role
allow-list, capability, preference; a refusal stores nothing) -> complete -> verify citations
(``knowledge/citations.verify``) -> store the chat -> lineage (each source dataset -> the answer), an
audit event (who, model, sources; never message text) and the usage counters.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.chat import usage
from chalicelib.chat.models import ChatAttrs, chats
from chalicelib.core import audit, clock
from chalicelib.core.audit import Actor, CallerLike
from chalicelib.core.authz import Principal, require
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.tenancy import region_of
from chalicelib.core.workspace_settings import CHAT_AUTO_EXPIRY, auto_expiry_seconds
from chalicelib.gateway.catalog import lineage
from chalicelib.llm import service as models
from chalicelib.llm.prompt import Completion, Passage, Prompt, prompt_tokens
from chalicelib.llm.providers.openai_http import ProviderError

if TYPE_CHECKING:
    from chalicelib.knowledge.service import Hit

ROLES = ("system", "user", "assistant")
MAX_MESSAGES = 50
MAX_CONTENT_CHARS = 32_000
MAX_MODEL_CHARS = 200
MAX_CHAT_BYTES = 300_000  # one DynamoDB item holds a chat (400 KB limit)
RETRIEVE_K = 5
MAX_ANSWER_TOKENS = 1024
BODY_FIELDS = {"model", "messages", "stream"}
LIST_KIND = "chats"


@dataclass
class Timings:
    retrieval_ms: float = 0.0
    model_ms: float = 0.0
    storage_ms: float = 0.0


@dataclass
class Answer:
    reply: dict[str, Any]
    deltas: list[str] = field(default_factory=list)  # streamed content pieces (stream: true)
    timings: Timings = field(default_factory=Timings)


def check_body(body: Any) -> tuple[str, list[dict[str, str]], bool]:
    """``(model, messages, stream)`` or a 400 naming every bad field."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "The request body must be a JSON object.")
    errors: list[dict[str, str]] = [{"field": str(k)[:64], "message": "is not a known field"}
                                    for k in body if k not in BODY_FIELDS]
    model = body.get("model")
    if not isinstance(model, str) or not 1 <= len(model) <= MAX_MODEL_CHARS:
        errors.append({"field": "model", "message": "is required: a model id from GET /v1/models, or 'auto'"})
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        errors.append({"field": "stream", "message": "must be a boolean"})
    messages = body.get("messages")
    out: list[dict[str, str]] = []
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        errors.append({"field": "messages", "message": f"must be a list of 1 to {MAX_MESSAGES} messages"})
    else:
        for i, m in enumerate(messages):
            where = f"messages[{i}]"
            if not isinstance(m, dict) or set(m) - {"role", "content"}:
                errors.append({"field": where, "message": "must be an object with only role and content"})
                continue
            if m.get("role") not in ROLES:
                errors.append({"field": f"{where}.role", "message": "must be one of system, user, assistant"})
            content = m.get("content")
            if not isinstance(content, str):
                errors.append({"field": f"{where}.content", "message": "must be a string"})
            elif not content.strip() or len(content) > MAX_CONTENT_CHARS:
                errors.append({"field": f"{where}.content",
                               "message": f"must have 1 to {MAX_CONTENT_CHARS} characters"})
            else:
                out.append({"role": m.get("role"), "content": content})  # a missing role is reported above
        if not errors and out[-1]["role"] != "user":
            errors.append({"field": "messages", "message": "the last message must be the user's"})
    if errors:
        raise validation_error(errors)
    return model, out, stream


def _own(principal: Principal, chat_id: str) -> ChatAttrs:
    """The caller's chat (404 for a malformed id, another user's or workspace's chat, or an expired one)."""
    if not is_id(chat_id, "chat"):
        raise not_found("chat")
    cls = chats(region_of(principal.workspace_id))
    try:
        item = cls.get(principal.workspace_id, chat_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("chat") from None
    if item.user_id != principal.user_id or (item.expires_at is not None and item.expires_at <= clock.now()):
        raise not_found("chat")
    return item


def _sources(hits: list[Hit], cited: list[dict[str, Any]]) -> list[dict[str, Any]]:
    used = {c["chunk_id"] for c in cited}
    return [{"kind": h.chunk.kind, "dataset_id": h.chunk.dataset_id, "id": h.citation()["source"]["id"],
             "chunk_id": h.chunk.id, "cited": h.chunk.id in used} for h in hits]


def answer(principal: Principal, body: Any, caller: CallerLike | None = None, chat_id: str | None = None) -> Answer:
    """Answer one chat request (a new chat, or a continuation when ``chat_id`` is given)."""
    # retrieval (numpy, bm25s) loads on the first answer, not at the platform group's cold start
    from chalicelib.knowledge import citations  # noqa: PLC0415 - knowledge loads NumPy and bm25s: at first use, not at cold start
    from chalicelib.knowledge import service as knowledge  # noqa: PLC0415 - knowledge loads NumPy and bm25s: at first use, not at cold start

    require(principal, "chat.use")
    model_id, new_messages, stream = check_body(body)
    timings = Timings()
    existing = _own(principal, chat_id) if chat_id else None
    history = [{"role": m["role"], "content": m["content"]} for m in json.loads(existing.messages)] if existing else []
    question = new_messages[-1]["content"]

    started = time.perf_counter()
    hits = knowledge.search(principal, question[:knowledge.MAX_QUERY_CHARS], RETRIEVE_K) \
        if principal.can("knowledge.read") else []
    timings.retrieval_ms = (time.perf_counter() - started) * 1000
    prompt = Prompt(history + new_messages, [Passage(i + 1, h.chunk.title, h.chunk.text) for i, h in enumerate(hits)],
                    max_tokens=MAX_ANSWER_TOKENS)
    need = models.Need(context_tokens=prompt_tokens(prompt) + MAX_ANSWER_TOKENS, streaming=stream)
    routing = models.route(principal, model_id, need)

    started = time.perf_counter()
    deltas: list[str] = []
    try:
        if stream:
            completion: Completion | None = None
            for part in models.stream(routing, prompt):
                if isinstance(part, Completion):
                    completion = part
                else:
                    deltas.append(part)
            assert completion is not None
        else:
            completion = models.complete(routing, prompt)
    except ProviderError as err:
        raise ApiError(502, "provider_error", f"The model provider failed: {err}") from None
    timings.model_ms = (time.perf_counter() - started) * 1000

    checked = citations.verify(completion.text, hits)
    spec = routing.chosen
    now = clock.iso()
    message_id = new_id("msg")
    assistant = {"id": message_id, "role": "assistant", "content": checked.content, "created_at": now,
                 "model": spec.id, "provider": spec.provider, "region": routing.region,
                 "routing": routing.as_dict(), "usage": {"input_tokens": completion.input_tokens,
                                                         "output_tokens": completion.output_tokens},
                 "citations": checked.citations, "grounding": checked.grounding,
                 "kind": spec.kind}
    stored_new = [{"id": new_id("msg"), **m, "created_at": now} for m in new_messages]

    started = time.perf_counter()
    region = routing.region
    ttl = auto_expiry_seconds(principal.workspace_id, CHAT_AUTO_EXPIRY)
    expires = int(clock.now()) + ttl if ttl else None
    cls = chats(region)
    if existing is None:
        chat_id = new_id("chat")
        title = question.strip().splitlines()[0][:80]
        messages = stored_new + [assistant]
        item = cls(principal.workspace_id, chat_id, user_id=principal.user_id, title=title, created_at=now)
    else:
        item = existing
        messages = json.loads(existing.messages) + stored_new + [assistant]
    raw = json.dumps(messages, separators=(",", ":"))
    if len(raw.encode()) > MAX_CHAT_BYTES:
        raise ApiError(413, "chat_too_long", "This chat is too long to continue; start a new chat.")
    item.messages, item.message_count, item.updated_at, item.expires_at = raw, len(messages), now, expires
    item.save()
    assert chat_id is not None
    datasets = sorted({c["source"]["dataset_id"] for c in checked.citations} | {h.chunk.dataset_id for h in hits})
    if datasets:
        lineage.record_edges(principal.workspace_id, [
            ("DATASET", ds, "CHAT_ANSWER", message_id, {"target_name": f"chat answer {message_id}",
                                                        "chat_id": chat_id, "model": spec.id,
                                                        "user_id": principal.user_id}) for ds in datasets])
    audit.append(region, principal.workspace_id, "chat.answered",
                 actor=Actor.of(principal),
                 target={"type": "chat", "id": chat_id},
                 details={"message_id": message_id, "model": spec.id, "provider": spec.provider, "region": region,
                          "routing_reason": routing.reason, "sources": _sources(hits, checked.citations),
                          "citations_dropped": len(checked.dropped), "usage": assistant["usage"],
                          "grounding": checked.grounding["ratio"]}, caller=caller)
    usage.add(principal.workspace_id, spec.id, completion.input_tokens, completion.output_tokens)
    timings.storage_ms = (time.perf_counter() - started) * 1000

    reply = {"id": message_id, "chat_id": chat_id, "message": {"role": "assistant", "content": checked.content},
             "model": spec.id, "provider": spec.provider, "region": region, "routing": routing.as_dict(),
             "usage": assistant["usage"], "citations": checked.citations, "grounding": checked.grounding,
             "kind": spec.kind, "created_at": now}
    return Answer(reply, deltas, timings)


def sse_events(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events of one answer: message_start, content_delta..., citations, message_stop;
    each carries ``sequence`` (1, 2, ...). Deltas are the rendered answer in line-sized pieces."""
    content = reply["message"]["content"]
    pieces = [p for p in content.splitlines(keepends=True) if p] or [""]
    events: list[dict[str, Any]] = [{"event": "message_start", "data": {
        k: reply[k] for k in ("id", "chat_id", "model", "provider", "region", "routing", "kind", "created_at")}}]
    events += [{"event": "content_delta", "data": {"text": p}} for p in pieces]
    events.append({"event": "citations", "data": {"citations": reply["citations"], "grounding": reply["grounding"]}})
    events.append({"event": "message_stop", "data": {"usage": reply["usage"], "stop_reason": "end_turn"}})
    for n, e in enumerate(events, start=1):
        e["data"] = {"sequence": n, **e["data"]}
    return events


def encode_sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"id: {e['data']['sequence']}\nevent: {e['event']}\ndata: "
                   f"{json.dumps(e['data'], separators=(',', ':'))}\n\n" for e in events)


def iter_sse(reply: dict[str, Any]) -> Iterator[str]:
    for e in sse_events(reply):
        yield encode_sse([e])


# --- reading, listing, deleting ----------------------------------------------------------------------

def _summary(item: ChatAttrs) -> dict[str, Any]:
    return {"id": item.id, "title": item.title, "message_count": int(item.message_count or 0),
            "created_at": item.created_at, "updated_at": item.updated_at,
            "expires_at": clock.iso(item.expires_at) if item.expires_at else None}


def get_chat(principal: Principal, chat_id: str) -> dict[str, Any]:
    require(principal, "chat.use")
    item = _own(principal, chat_id)
    return {**_summary(item), "messages": json.loads(item.messages)}


def list_chats(principal: Principal, query: dict[str, str]) -> dict[str, Any]:
    """The caller's chats, newest first, paged (``limit``, ``after``)."""
    require(principal, "chat.use")
    paging.check_params(query, ("limit", "after"))
    lim = paging.limit(query)
    after = paging.decode(LIST_KIND, query.get("after"))
    cls = chats(region_of(principal.workspace_id))
    cond = cls.id < after if after else cls.id.startswith("chat_")
    now = clock.now()
    items: list[ChatAttrs] = []
    for item in cls.query(principal.workspace_id, cond, scan_index_forward=False,
                          filter_condition=cls.user_id == principal.user_id, page_size=100):
        if item.expires_at is not None and item.expires_at <= now:
            continue
        items.append(item)
        if len(items) > lim:
            break
    page = paging.page(items, lim, LIST_KIND, lambda i: i.id)
    return {"items": [_summary(i) for i in page["_items"]], "has_more": page["has_more"],
            "next_cursor": page["next_cursor"]}


def delete_chat(principal: Principal, chat_id: str, caller: CallerLike | None = None) -> None:
    require(principal, "chat.use")
    item = _own(principal, chat_id)
    region = region_of(principal.workspace_id)
    item.delete()
    audit.append(region, principal.workspace_id, "chat.deleted", actor=Actor.of(principal),
                 target={"type": "chat", "id": chat_id}, caller=caller)
