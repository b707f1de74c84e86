"""Platform API routes at {base_url}/v1."""
from __future__ import annotations

from typing import Any

from chalice import Blueprint

from chalicelib.core.web import Api, Ctx
from chalicelib.platform import me as me_service

bp = Blueprint(__name__)
api = Api(bp, "platform")


@api.route("/v1/me", permission="workspace.read")
def me(ctx: Ctx) -> Any:
    return me_service.describe(ctx.user)
