"""``POST /v1/chat/completions`` at {base_url}/v1 (platform group): the grounded workspace chat in the shape of
OpenAI's Chat Completions API, for the ``openai`` SDK, LangChain, Open WebUI, LibreChat and the like.

It is ``POST /v1/chats`` under another shape: the same permission (``chat.use``) through the same
``authorize`` (platform API tokens and user access tokens both work as the Bearer "API key"; 421 for another
region's workspace), the same ``chat.service.answer`` (retrieval under the caller's rights, routing,
verified citations, the stored chat, lineage, audit and usage counters) and the same ``Idempotency-Key``
replay. Every error on this route, authorization included, is OpenAI's error object (``translate.error_body``).
``stream: true`` answers ``chat.completion.chunk`` server-sent events ending in ``data: [DONE]`` in one response
body once the answer is complete: unlike ``/v1/chats``, this route answers in its own request (its clients
expect the whole answer in one response).
"""
from __future__ import annotations

import json
from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.chat import service
from chalicelib.chat.openai_compat import translate
from chalicelib.core import correlation
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store import idempotency

api = Api("platform")


def openai_error(err: ApiError) -> Response:
    status, body = translate.error_body(err, correlation.current())
    return Response(body=json.dumps(body), status_code=status,
                    headers={"Content-Type": "application/json", "Cache-Control": "no-store", **err.headers})


@api.route("/v1/chat/completions", ["POST"], permission="chat.use", render_error=openai_error)
def chat_completions(ctx: Ctx) -> Response:
    body = ctx.json()
    chat_body, include_usage = translate.chat_request(body)  # a 400 here stores nothing
    user = ctx.user

    def work() -> tuple[int, Any]:
        return 200, service.answer(ctx.scope, chat_body, ctx.caller).reply

    _, reply, replayed = idempotency.run(
        ctx.scope.home, user.user_id, f"{user.workspace_id}#chat.completions",
        ctx.header(idempotency.HEADER), body, work,
        ref_of=lambda r: {"type": "chat_message", "chat_id": r["chat_id"], "id": r["id"]},
        replay=lambda ref: (200, service.replay(ctx.scope, ref)))
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    if chat_body["stream"]:
        return Response(body=translate.encode_sse(translate.chunks(reply, include_usage)), status_code=200,
                        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store",
                                 **headers})
    return json_response(translate.completion(reply), 200, headers)
