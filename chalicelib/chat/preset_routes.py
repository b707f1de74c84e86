"""Preset routes at {base_url}/v1/presets (platform group). Thin: every view calls ``llm/presets``."""
from __future__ import annotations

from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.llm import presets

api = Api("platform")


@api.route("/v1/presets", permission="chat.use")
def list_presets(ctx: Ctx) -> dict[str, Any]:
    return presets.list_presets(ctx.scope, ctx.query)


@api.route("/v1/presets", ["POST"], permission="chat.use")
def create_preset(ctx: Ctx) -> Response:
    return json_response(presets.create(ctx.scope, ctx.json(), ctx.caller), 201)


@api.route("/v1/presets/{preset_id}", permission="chat.use")
def read_preset(ctx: Ctx, preset_id: str) -> dict[str, Any]:
    return presets.get(ctx.scope, preset_id)


@api.route("/v1/presets/{preset_id}", ["PATCH"], permission="chat.use")
def update_preset(ctx: Ctx, preset_id: str) -> dict[str, Any]:
    return presets.update(ctx.scope, preset_id, ctx.json(), ctx.caller)


@api.route("/v1/presets/{preset_id}", ["DELETE"], permission="chat.use")
def delete_preset(ctx: Ctx, preset_id: str) -> Response:
    presets.delete(ctx.scope, preset_id, ctx.caller)
    return Response(body="", status_code=204)
