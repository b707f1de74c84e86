"""What a person does with a conversation after it is asked: rename it, find it again (a search over the
caller's own chats, server side), rate an answer (thumbs up or down, stored on the message), answer the
last question again (regenerate) and change an earlier question and ask it again (edit and resend).

Every function works on the caller's own chat only (``service._own``: another user's chat, Admins
included, is 404). Regenerate and edit keep the messages before the point they change, then answer
through ``service.start`` as a continuation; if that answer fails (provider error, routing refusal, bad
input, a model failing mid-stream) the chat is put back as it was, so nothing is lost.
"""
from __future__ import annotations

import json
import unicodedata
from typing import Any

from chalicelib.chat import modes, redaction, service
from chalicelib.chat.models import ChatAttrs, chats
from chalicelib.core import audit, clock
from chalicelib.core.audit import Actor, CallerLike
from chalicelib.core.authz import Principal, require
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.ids import is_id
from chalicelib.core.tenancy import RequestScope

TITLE_MAX = 120
QUERY_MAX = 200
SEARCH_LIMIT_MAX = 50
SEARCH_SCAN_MAX = 2000  # chats read per search (the caller's newest first)
SNIPPET_CHARS = 160
COMMENT_MAX = 1000
RATINGS = ("up", "down")


def _actor(principal: Principal) -> Actor:
    return Actor("user", principal.user_id, principal.email)


def _clean_title(value: Any) -> str:
    if not isinstance(value, str):
        raise validation_error([{"field": "title", "message": f"must be a string of 1 to {TITLE_MAX} characters"}])
    title = " ".join(value.split())
    if not 1 <= len(title) <= TITLE_MAX or any(unicodedata.category(ch) in ("Cc", "Cf") for ch in title):
        raise validation_error([{"field": "title",
                                 "message": f"must be 1 to {TITLE_MAX} printable characters"}])
    return title


def _only(body: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "The request body must be a JSON object.")
    unknown = [{"field": str(k)[:64], "message": "is not a known field"} for k in body if k not in allowed]
    if unknown:
        raise validation_error(unknown)
    return body


def rename(scope: RequestScope, chat_id: str, body: Any, caller: CallerLike | None = None) -> dict[str, Any]:
    """Give the chat a new title (spaces collapsed) and/or a new ``mode`` (``chat/modes.py``); its summary."""
    principal = scope.principal
    require(principal, "chat.use")
    body = _only(body, {"title", "mode"})
    if not body:
        raise validation_error([{"field": "body", "message": "must change title or mode"}])
    title = _clean_title(body.get("title")) if "title" in body else None
    mode = modes.check(scope, body["mode"]) if "mode" in body else None
    item = service._own(scope, chat_id)
    actions: list[Any] = [ChatAttrs.title.set(title)] if title is not None else []
    if mode is not None:
        actions.append(ChatAttrs.mode.set(mode) if mode != modes.KNOWLEDGE else ChatAttrs.mode.remove())
    item.update(actions=actions, condition=ChatAttrs.user_id == principal.user_id)
    region = scope.home
    if title is not None:
        audit.append(region, principal.workspace_id, "chat.renamed", actor=_actor(principal),
                     target={"type": "chat", "id": chat_id}, caller=caller)  # never the title (chat content)
    if mode is not None:
        audit.append(region, principal.workspace_id, "chat.mode_changed", actor=_actor(principal),
                     target={"type": "chat", "id": chat_id}, details={"mode": mode}, caller=caller)
    return service._summary(item)


def _snippet(text: str, at: int, length: int) -> str:
    start = max(0, at - SNIPPET_CHARS // 3)
    end = min(len(text), start + SNIPPET_CHARS)
    out = " ".join(text[start:end].split())
    return ("…" if start else "") + out + ("…" if end < len(text) else "")


def search(scope: RequestScope, query: dict[str, str]) -> dict[str, Any]:
    """The caller's chats whose title or messages contain every word of ``q`` (case-insensitive), newest
    first, each with where it matched and a snippet; at most ``limit`` (default 20)."""
    principal = scope.principal
    require(principal, "chat.use")
    unknown = [k for k in query if k not in ("q", "limit")]
    q = (query.get("q") or "").strip()
    errors = [{"field": k[:64], "message": "is not a known parameter with q"} for k in unknown]
    if not 1 <= len(q) <= QUERY_MAX:
        errors.append({"field": "q", "message": f"must be 1 to {QUERY_MAX} characters"})
    limit = query.get("limit", "20")
    if not limit.isdigit() or not 1 <= int(limit) <= SEARCH_LIMIT_MAX:
        errors.append({"field": "limit", "message": f"must be between 1 and {SEARCH_LIMIT_MAX}"})
    if errors:
        raise validation_error(errors)
    words = [w.casefold() for w in q.split()]
    cls = chats(scope.home)
    now = clock.now()
    found: list[dict[str, Any]] = []
    scanned = 0
    for item in cls.query(principal.workspace_id, cls.id.startswith("chat_"), scan_index_forward=False,
                          filter_condition=cls.user_id == principal.user_id, page_size=100):
        scanned += 1
        if scanned > SEARCH_SCAN_MAX or len(found) >= int(limit):
            break
        if item.expires_at is not None and item.expires_at <= now:
            continue
        hit = _match(item, words)
        if hit is not None:  # matched stored text: match again on what the caller may read now
            hit = _match(item, words, redaction.redact_all(scope, json.loads(item.messages or "[]")))
        if hit is not None:
            found.append({**service._summary(item), **hit})
    return {"items": found, "has_more": False, "next_cursor": None, "query": q}


def _match(item: ChatAttrs, words: list[str], messages: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    title = item.title or ""
    messages = json.loads(item.messages or "[]") if messages is None else messages
    everything = (title + "\n" + "\n".join(str(m.get("content", "")) for m in messages)).casefold()
    if not all(w in everything for w in words):
        return None
    if all(w in title.casefold() for w in words):
        return {"match": "title", "snippet": title, "message_id": None}
    first = words[0]
    for m in messages:
        content = str(m.get("content", ""))
        at = content.casefold().find(first)
        if at >= 0:
            return {"match": "message", "snippet": _snippet(content, at, len(first)), "message_id": m.get("id")}
    return {"match": "title", "snippet": title, "message_id": None}


def _message_index(messages: list[dict[str, Any]], message_id: str) -> int:
    if not is_id(message_id, "msg"):
        raise not_found("message")
    for i, m in enumerate(messages):
        if m.get("id") == message_id:
            return i
    raise not_found("message")


def feedback(scope: RequestScope, chat_id: str, message_id: str, body: Any,
             caller: CallerLike | None = None) -> dict[str, Any]:
    """Thumbs up or down (``rating``: up, down, or null to take it back) with an optional comment, on one
    answer of the caller's chat; stored on the message (``feedback``) and audited (the rating only)."""
    principal = scope.principal
    require(principal, "chat.use")
    body = _only(body, {"rating", "comment"})
    rating = body.get("rating")
    comment = body.get("comment")
    errors = []
    if "rating" not in body or (rating is not None and rating not in RATINGS):
        errors.append({"field": "rating", "message": "must be up, down or null"})
    if comment is not None and (not isinstance(comment, str) or len(comment) > COMMENT_MAX):
        errors.append({"field": "comment", "message": f"must be a string of at most {COMMENT_MAX} characters"})
    if errors:
        raise validation_error(errors)
    item = service._own(scope, chat_id)
    messages = json.loads(item.messages)
    i = _message_index(messages, message_id)
    if messages[i].get("role") != "assistant":
        raise ApiError(409, "not_an_answer", "Feedback is given on the assistant's answers only.")
    if rating is None:
        messages[i].pop("feedback", None)
        stored = None
    else:
        stored = {"rating": rating, "comment": (comment or "").strip() or None, "at": clock.iso()}
        messages[i]["feedback"] = stored
    item.update(actions=[ChatAttrs.messages.set(json.dumps(messages, separators=(",", ":")))],
                condition=ChatAttrs.updated_at == item.updated_at)
    audit.append(scope.home, principal.workspace_id, "chat.feedback", actor=_actor(principal),
                 target={"type": "chat", "id": chat_id},
                 details={"message_id": message_id, "rating": rating, "model": messages[i].get("model")},
                 caller=caller)
    return {"chat_id": chat_id, "message_id": message_id, "feedback": stored}


def _answer_from(scope: RequestScope, item: ChatAttrs, keep: int, question: str, body: dict[str, Any],
                 caller: CallerLike | None) -> service.Live:
    """Answer ``question`` after the chat's first ``keep`` messages; the chat is restored when the answer
    fails (before or while the model writes)."""
    original = item.messages
    original_count = item.message_count
    kept = json.loads(original)[:keep]
    item.update(actions=[ChatAttrs.messages.set(json.dumps(kept, separators=(",", ":"))),
                         ChatAttrs.message_count.set(len(kept))],
                condition=ChatAttrs.updated_at == item.updated_at)
    request = {"model": body.get("model"), "messages": [{"role": "user", "content": question}]}
    if "stream" in body:
        request["stream"] = body["stream"]

    def restore() -> None:
        item.update(actions=[ChatAttrs.messages.set(original), ChatAttrs.message_count.set(original_count)])

    try:
        return service.start(scope, request, caller, item.id, on_fail=restore)
    except Exception:
        restore()
        raise


def regenerate(scope: RequestScope, chat_id: str, body: Any, caller: CallerLike | None = None) -> service.Live:
    """Answer the chat's last question again (``model``, ``stream`` as for a new message); the answers
    after that question are replaced by the new one."""
    principal = scope.principal
    require(principal, "chat.use")
    body = _only(body, {"model", "stream"})
    item = service._own(scope, chat_id)
    messages = json.loads(item.messages)
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        raise ApiError(409, "nothing_to_regenerate", "This chat has no question to answer again.")
    return _answer_from(scope, item, last_user, messages[last_user]["content"], body, caller)


def edit(scope: RequestScope, chat_id: str, message_id: str, body: Any,
         caller: CallerLike | None = None) -> service.Live:
    """Replace one of the caller's questions with ``content`` and answer it; everything after the
    question is dropped (the conversation continues from the edited question)."""
    principal = scope.principal
    require(principal, "chat.use")
    body = _only(body, {"model", "stream", "content"})
    content = body.get("content")
    if not isinstance(content, str) or not content.strip() or len(content) > service.MAX_CONTENT_CHARS:
        raise validation_error([{"field": "content",
                                 "message": f"must have 1 to {service.MAX_CONTENT_CHARS} characters"}])
    item = service._own(scope, chat_id)
    messages = json.loads(item.messages)
    i = _message_index(messages, message_id)
    if messages[i].get("role") != "user":
        raise ApiError(409, "not_a_question", "Only your own questions can be edited.")
    return _answer_from(scope, item, i, content, body, caller)

