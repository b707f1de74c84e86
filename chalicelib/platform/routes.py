"""Platform API routes at {base_url}/v1: identity of the caller and the OpenAPI document."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from chalicelib.core.authz import AUTHENTICATED
from chalicelib.core.config import settings
from chalicelib.core.http import openapi
from chalicelib.core.http.api import Api, Ctx
from chalicelib.core.regions import GLOBAL
from chalicelib.platform import me as me_service

api = Api("platform")
OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")


@api.route("/v1/me", permission=AUTHENTICATED, scope=GLOBAL)
def me(ctx: Ctx) -> Any:
    """Any verified token, with or without a workspace (the service applies the live membership)."""
    return me_service.describe(ctx.scope)


@api.route("/v1/openapi.json", public=True)
def openapi_document(ctx: Ctx) -> Any:
    return openapi.response(OPENAPI_PATH, settings().base_url, "platform API ({base_url})")
