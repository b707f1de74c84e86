"""Platform API routes at {base_url}/v1."""
from __future__ import annotations

from typing import Any

from chalicelib.core.web import Api, Ctx
from chalicelib.platform import me as me_service

api = Api("platform")


@api.route("/v1/me", permission="workspace.read")
def me(ctx: Ctx) -> Any:
    return me_service.describe(ctx.user)
