"""Chat routes at {base_url}/v1 (platform group). Thin: every view calls a service.

``stream: true`` answers ``text/event-stream`` as a ``StreamingResponse``: where the server in front can
stream (``make run``), each event is sent as the model writes it, and a reader that goes away stops the
answer (the partial answer is stored, marked stopped); behind API Gateway's Lambda proxy integration the
same events arrive in one body when the answer is complete (docs/api/chat.md, docs/decisions.md)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.chat import conversations, service, usage
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.paging import check_params
from chalicelib.core.http.streaming import StreamingResponse
from chalicelib.core.store import idempotency
from chalicelib.core.tenancy import region_of

api = Api("platform")
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store",
               "X-Accel-Buffering": "no"}


def _respond(ctx: Ctx, chat_id: str | None,
             begin: Callable[[Any], service.Live] | None = None, scope: str = "") -> Response:
    """One answer as JSON or SSE, with Idempotency-Key replays; ``begin`` (regenerate, edit) replaces
    the plain new-or-continued answer."""
    body = ctx.json()
    user = ctx.user
    status = 200 if chat_id or begin is not None else 201

    def live() -> service.Live:
        return begin(body) if begin is not None else service.start(user, body, ctx.caller, chat_id)

    region, key = region_of(user.workspace_id), ctx.header(idempotency.HEADER)
    request = {"body": body, "chat_id": chat_id, "scope": scope}
    scope_key = f"{user.workspace_id}#chats"

    def ref_of(reply: dict[str, Any]) -> dict[str, Any]:
        return {"type": "chat_message", "chat_id": reply["chat_id"], "id": reply["id"]}

    def replay(ref: dict[str, Any]) -> tuple[int, Any]:
        return status, service.replay(user, ref)

    if isinstance(body, dict) and body.get("stream") is True:
        held = idempotency.hold(region, user.user_id, scope_key, key, request, replay)
        if held.replayed is not None:
            return StreamingResponse(iter([service.encode_sse(service.sse_events(held.replayed[1]))]), status,
                                     {**SSE_HEADERS, "Idempotent-Replayed": "true"})
        chunks, ended = service.stream_sse(live, held, ref_of)
        return StreamingResponse(chunks, status, SSE_HEADERS, on_close=ended)

    replies, answered, replayed = idempotency.run(region, user.user_id, scope_key, key, request,
                                                  lambda: (status, live().finish().reply), ref_of=ref_of,
                                                  replay=replay)
    return json_response(answered, replies, {"Idempotent-Replayed": "true"} if replayed else {})


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
