"""Which blueprints make up each route group (DESIGN.md section 1) and the app factory."""
from __future__ import annotations

import importlib

from chalice import Chalice

from chalicelib.core import aws, tokens
from chalicelib.core.config import settings
from chalicelib.core.http.api import install
from chalicelib.core.logs import get_logger
from chalicelib.core.store.tables import connection, global_model, regional
from chalicelib.core.tenancy import MembershipAttrs, WorkspaceAttrs
from chalicelib.core.tokens import SigningKeyAttrs

APP_NAME = "aiplat"

# group -> modules whose ``api`` (core.http.api.Api) routes the group serves
GROUPS: dict[str, tuple[str, ...]] = {
    "identity": ("chalicelib.identity.oauth.routes", "chalicelib.identity.signin.routes",
                 "chalicelib.identity.account.routes", "chalicelib.identity.mfa.webauthn_routes",
                 "chalicelib.identity.pages.routes"),
    "platform": ("chalicelib.platform.routes", "chalicelib.platform.workspaces.routes",
                 "chalicelib.platform.workspaces.member_routes", "chalicelib.platform.workspaces.invitation_routes",
                 "chalicelib.platform.audit.routes", "chalicelib.platform.support.routes",
                 "chalicelib.platform.workspaces.member_security_routes", "chalicelib.platform.sso_routes",
                 "chalicelib.llm.routes", "chalicelib.chat.routes", "chalicelib.chat.preset_routes",
                 "chalicelib.chat.openai_compat.routes",
                 "chalicelib.agents.agent_routes", "chalicelib.agents.run_routes",
                 "chalicelib.residency.routes", "chalicelib.platform.workspaces.group_routes",
                 "chalicelib.platform.scim.token_routes", "chalicelib.platform.scim.routes"),
    "gateway": ("chalicelib.gateway.api.routes", "chalicelib.gateway.api.read_routes", "chalicelib.knowledge.routes",
                "chalicelib.gateway.mcp.routes"),
    "app": ("chalicelib.webapp.routes",),
    "workers": (),
}
HTTP_GROUPS = ("platform", "gateway", "identity", "app")
# groups deployed once per open region (chalicelib/core/regions.py); the others are global
REGIONAL_GROUPS = ("platform", "gateway", "workers")


def route_permissions(group: str | None = None) -> dict[tuple[str, str, str], str]:
    """(group, path, method) -> permission (or ``"public"``) of ``group``'s routes, or of every group's:
    derived from this table and each module's ``api`` (nothing is registered by import side effects)."""
    table: dict[tuple[str, str, str], str] = {}
    for name in (group,) if group else tuple(GROUPS):
        for module in GROUPS[name]:
            for route in importlib.import_module(module).api.routes:
                for method in route.methods:
                    table[(name, route.path, method)] = "public" if route.public else str(route.permission)
    return table


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


def warm_up() -> None:
    """Pay at the process's start what its first request would otherwise pay (Lambda's init phase: ``app.py``;
    locally ``infra/local_run.py`` before a group serves): the AWS clients of its regions, whose creation
    parses botocore's service models (over 100 ms for the first), and the table classes that authorizing
    every request reads (signing keys, workspaces, and in a regional deployment its memberships and its
    transaction connection). Only objects are built: no AWS call is made, so nothing here can fail for the
    network or the emulator."""
    current = settings()
    pinned = current.region
    for region in dict.fromkeys(filter(None, (current.global_region, pinned))):
        aws.client("dynamodb", region)
    global_model(SigningKeyAttrs)
    global_model(WorkspaceAttrs)
    if pinned:
        aws.client("sqs", pinned)  # the queues its requests feed
        regional(MembershipAttrs, pinned)
        connection(pinned)


def prime() -> None:
    """Read at the process's start what its first request reads once per container: the signing keys
    (re-read each ``KEYRING_REFRESH_SECONDS``) and the revocation watermark (each
    ``REVOCATION_CACHE_SECONDS``). ``make run`` calls it before a group serves, and a Lambda's init phase
    (``app.py``, in Lambda only: tools import ``app.py`` without AWS). Unlike ``warm_up`` it calls AWS;
    a failure is logged and leaves the reads to the first request, as without it."""
    try:
        tokens.verifier().prime()
    except Exception:  # noqa: BLE001 - whatever failed here fails again, and is reported, on a request
        get_logger("groups").warning("priming the token verifier failed; the first request reads instead",
                                     exc_info=True)
