"""Chat routes at {base_url}/v1 (platform group). Thin: every view calls a service.

``stream: true`` answers ``text/event-stream``. Chalice (and API Gateway's Lambda proxy integration)
return one complete response body, so the events are delivered together when the answer is complete
(a buffered stream); each still carries its sequence number (see docs/api/chat.md)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.chat import conversations, service, usage
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.paging import check_params
from chalicelib.core.store import idempotency
from chalicelib.core.tenancy import region_of

api = Api("platform")


def _respond(ctx: Ctx, chat_id: str | None,
             answer: Callable[[Any], service.Answer] | None = None, scope: str = "") -> Response:
    """One answer as JSON or SSE, with Idempotency-Key replays; ``answer`` (regenerate, edit) replaces
    the plain new-or-continued answer."""
    body = ctx.json()
    user = ctx.user

    def work() -> tuple[int, Any]:
        if answer is not None:
            return 200, answer(body).reply
        return (200 if chat_id else 201), service.answer(user, body, ctx.caller, chat_id).reply

    status, reply, replayed = idempotency.run(region_of(user.workspace_id), user.workspace_id,
                                              f"chats:{user.user_id}", ctx.header(idempotency.HEADER),
                                              {"body": body, "chat_id": chat_id, "scope": scope}, work)
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    if isinstance(body, dict) and body.get("stream") is True and status < 300:
        return Response(body=service.encode_sse(service.sse_events(reply)), status_code=status,
                        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store",
                                 **headers})
    return json_response(reply, status, headers)


@api.route("/v1/chats", ["POST"], permission="chat.use")
def create_chat(ctx: Ctx) -> Response:
    return _respond(ctx, None)


@api.route("/v1/chats/{chat_id}/messages", ["POST"], permission="chat.use")
def continue_chat(ctx: Ctx, chat_id: str) -> Response:
    service.get_chat(ctx.user, chat_id)  # 404 before anything else
    return _respond(ctx, chat_id)


@api.route("/v1/chats", permission="chat.use")
def list_chats(ctx: Ctx) -> dict[str, Any]:
    if "q" in ctx.query:  # search over the caller's own chats
        return conversations.search(ctx.user, ctx.query)
    return service.list_chats(ctx.user, ctx.query)


@api.route("/v1/chats/{chat_id}", ["PATCH"], permission="chat.use")
def rename_chat(ctx: Ctx, chat_id: str) -> dict[str, Any]:
    return conversations.rename(ctx.user, chat_id, ctx.json(), ctx.caller)


@api.route("/v1/chats/{chat_id}/regenerate", ["POST"], permission="chat.use")
def regenerate_answer(ctx: Ctx, chat_id: str) -> Response:
    return _respond(ctx, chat_id, lambda body: conversations.regenerate(ctx.user, chat_id, body, ctx.caller),
                    "regenerate")


@api.route("/v1/chats/{chat_id}/messages/{message_id}/edit", ["POST"], permission="chat.use")
def edit_question(ctx: Ctx, chat_id: str, message_id: str) -> Response:
    return _respond(ctx, chat_id, lambda body: conversations.edit(ctx.user, chat_id, message_id, body, ctx.caller),
                    f"edit:{message_id}")


@api.route("/v1/chats/{chat_id}/messages/{message_id}/feedback", ["PUT"], permission="chat.use")
def message_feedback(ctx: Ctx, chat_id: str, message_id: str) -> dict[str, Any]:
    return conversations.feedback(ctx.user, chat_id, message_id, ctx.json(), ctx.caller)


@api.route("/v1/chats/{chat_id}", permission="chat.use")
def read_chat(ctx: Ctx, chat_id: str) -> dict[str, Any]:
    return service.get_chat(ctx.user, chat_id)


@api.route("/v1/chats/{chat_id}", ["DELETE"], permission="chat.use")
def delete_chat(ctx: Ctx, chat_id: str) -> Response:
    service.delete_chat(ctx.user, chat_id, ctx.caller)
    return Response(body="", status_code=204)


@api.route("/v1/usage", permission="billing.manage")
def usage_report(ctx: Ctx) -> dict[str, Any]:
    q = ctx.query

    check_params(q, ("from", "to"))
    return usage.report(ctx.user, q.get("from"), q.get("to"))
