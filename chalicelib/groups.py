"""Which blueprints make up each route group (DESIGN.md section 1) and the app factory."""
from __future__ import annotations

import importlib

from chalice import Chalice

from chalicelib.core.web import install

APP_NAME = "aiplat"

# group -> modules whose ``api`` (core.web.Api) routes the group serves
GROUPS: dict[str, tuple[str, ...]] = {
    "identity": ("chalicelib.identity.routes", "chalicelib.identity.signin_routes",
                 "chalicelib.identity.oauth_routes", "chalicelib.identity.account_routes",
                 "chalicelib.identity.webauthn_routes", "chalicelib.identity.pages_routes"),
    "platform": ("chalicelib.platform.routes", "chalicelib.platform.workspace_routes",
                 "chalicelib.platform.member_routes", "chalicelib.platform.invitation_routes",
                 "chalicelib.platform.audit_routes", "chalicelib.platform.support_routes",
                 "chalicelib.platform.member_security_routes", "chalicelib.platform.sso_routes",
                 "chalicelib.models.routes", "chalicelib.chat.routes",
                 "chalicelib.agents.agent_routes", "chalicelib.agents.run_routes"),
    "gateway": ("chalicelib.gateway.routes", "chalicelib.gateway.read_routes", "chalicelib.knowledge.routes"),
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
