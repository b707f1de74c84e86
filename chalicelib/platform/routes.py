"""Platform API routes at {base_url}/v1: identity of the caller and the OpenAPI document."""
from __future__ import annotations

from typing import Any

from chalicelib.core.authz import AUTHENTICATED
from chalicelib.core.regions import GLOBAL
from chalicelib.core.web import Api, Ctx, json_response
from chalicelib.platform import me as me_service
from chalicelib.platform import openapi

api = Api("platform")


@api.route("/v1/me", permission=AUTHENTICATED, scope=GLOBAL)
def me(ctx: Ctx) -> Any:
    """Any verified token, with or without a workspace (the service applies the live membership)."""
    return me_service.describe(ctx.user)


@api.route("/v1/openapi.json", public=True)
def openapi_document(ctx: Ctx) -> Any:
    return json_response(openapi.document(), headers={"Cache-Control": "public, max-age=300"})
