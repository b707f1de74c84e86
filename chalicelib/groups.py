"""Which blueprints make up each route group (DESIGN.md section 1) and the app factory."""
from __future__ import annotations

import importlib

from chalice import Chalice

from chalicelib.core.http.api import install

APP_NAME = "aiplat"

# group -> modules whose ``api`` (core.web.Api) routes the group serves
GROUPS: dict[str, tuple[str, ...]] = {
    "identity": ("chalicelib.identity.oauth.routes", "chalicelib.identity.signin.routes",
                 "chalicelib.identity.account.routes", "chalicelib.identity.mfa.webauthn_routes",
                 "chalicelib.identity.pages.routes"),
    "platform": ("chalicelib.platform.routes", "chalicelib.platform.workspaces.routes",
                 "chalicelib.platform.workspaces.member_routes", "chalicelib.platform.workspaces.invitation_routes",
                 "chalicelib.platform.audit.routes", "chalicelib.platform.support.routes",
                 "chalicelib.platform.workspaces.member_security_routes", "chalicelib.platform.sso_routes",
                 "chalicelib.llm.routes", "chalicelib.chat.routes", "chalicelib.chat.openai_compat.routes",
                 "chalicelib.agents.agent_routes", "chalicelib.agents.run_routes",
                 "chalicelib.residency.routes"),
    "gateway": ("chalicelib.gateway.api.routes", "chalicelib.gateway.api.read_routes", "chalicelib.knowledge.routes",
                "chalicelib.gateway.mcp.routes"),
    "app": ("chalicelib.webapp.routes",),
    "workers": (),
}
HTTP_GROUPS = ("platform", "gateway", "identity", "app")
# groups deployed once per open region (chalicelib/core/regions.py); the others are global
REGIONAL_GROUPS = ("platform", "gateway", "workers")


def create_app(group: str) -> Chalice:
    """A Chalice app holding only ``group``'s routes."""
    if group not in GROUPS:
        raise ValueError(f"unknown ROUTE_GROUP {group!r}; expected one of {', '.join(GROUPS)}")
    app = Chalice(app_name=APP_NAME)
    app.api.cors = False
    install(app)
    for module in GROUPS[group]:
        importlib.import_module(module).api.register(app)
    return app
