"""SSO connections of a workspace at {base_url}/v1 (Admin only: permission ``sso.manage``; audited).

The client secret goes in once and is never returned. A connection routes sign-ins only after
``POST .../verify`` found the published verification token.
"""
from __future__ import annotations

from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core import audit
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.errors import ApiError
from chalicelib.core.http.validation import F, validate
from chalicelib.core.tenancy import region_of
from chalicelib.identity.sso import connections as sso_config

api = Api("platform")

BASE = "/v1/workspaces/{workspace_id}/sso/connections"


def _urls(value: Any) -> str | None:
    if not isinstance(value, dict) or len(value) > 8:
        return "must be an object of at most 8 URLs"
    known = {"authorization_endpoint", "token_endpoint", "user_endpoint", "emails_endpoint"}
    for k, v in value.items():
        if k not in known or not isinstance(v, str) or len(v) > 512:
            return f"only {', '.join(sorted(known))} (strings) are allowed"
    return None


def _domains(value: Any) -> str | None:
    if not isinstance(value, list) or len(value) > 20:
        return "must be a list of at most 20 domains"
    if any(not isinstance(d, str) or not sso_config.DOMAIN_RE.match(d.lower()) for d in value):
        return "must contain domain names"
    return None


def _scopes(value: Any) -> str | None:
    if not isinstance(value, list) or not value or len(value) > 20:
        return "must be a non-empty list of at most 20 scopes"
    if any(not isinstance(s, str) or not s or len(s) > 64 or " " in s for s in value):
        return "must contain scope names without spaces"
    return None


def _domain(value: Any) -> str | None:
    return None if isinstance(value, str) and sso_config.DOMAIN_RE.match(value.lower()) else "must be a domain name"


CREATE_FIELDS = {
    "kind": F(str, required=True, enum=tuple(sso_config.PRESETS)),
    "domain": F(str, max_len=253, check=_domain),
    "issuer": F(str, required=True, min_len=8, max_len=512),
    "client_id": F(str, required=True, min_len=1, max_len=256),
    "client_secret": F(str, required=True, min_len=1, max_len=1024),
    "display_name": F(str, min_len=1, max_len=80),
    "allowed_domains": F(list, check=_domains),
    "scopes": F(list, check=_scopes),
    "endpoints": F(dict, check=_urls),
}


def _audit(ctx: Ctx, workspace_id: str, action: str, domain: str, details: dict[str, Any] | None = None) -> None:
    audit.append(region_of(workspace_id), workspace_id, action,
                 actor=audit.Actor.of(ctx.user),
                 target={"type": "sso_connection", "id": domain}, details=details or {}, caller=ctx.caller)


@api.route("/v1/sso/presets", permission="sso.manage")
def presets(ctx: Ctx) -> Any:
    return {"presets": sso_config.presets_view()}


@api.route(BASE, methods=["POST"], permission="sso.manage")
def create(ctx: Ctx, workspace_id: str) -> Any:
    body = validate(ctx.json(), CREATE_FIELDS)
    if body["kind"] != sso_config.CODE_HOSTING and not body.get("domain"):
        raise ApiError(400, "validation_failed", "The request has invalid fields: domain.",
                       errors=[{"field": "domain", "message": "is required for this kind"}])
    conn = sso_config.create(
        workspace_id=workspace_id, created_by=ctx.user.user_id, kind=body["kind"], domain=body.get("domain"),
        issuer=body["issuer"], client_id=body["client_id"], client_secret=body["client_secret"],
        display_name=body.get("display_name"), allowed_domains=body.get("allowed_domains"),
        scopes=body.get("scopes"), endpoints=body.get("endpoints"))
    _audit(ctx, workspace_id, "sso.connection_created", conn.domain,
           {"kind": conn.kind, "issuer": conn.issuer, "client_id": conn.client_id})
    return json_response(sso_config.public_view(conn), 201)


@api.route(BASE, permission="sso.manage")
def list_connections(ctx: Ctx, workspace_id: str) -> Any:
    return {"connections": [sso_config.public_view(c) for c in sso_config.for_workspace(workspace_id)]}


@api.route(BASE + "/{domain}", permission="sso.manage")
def get_connection(ctx: Ctx, workspace_id: str, domain: str) -> Any:
    return sso_config.public_view(sso_config.get_for_workspace(workspace_id, domain))


@api.route(BASE + "/{domain}/verify", methods=["POST"], permission="sso.manage")
def verify(ctx: Ctx, workspace_id: str, domain: str) -> Any:
    conn = sso_config.get_for_workspace(workspace_id, domain)
    if conn.kind == sso_config.CODE_HOSTING or conn.verified:
        return sso_config.public_view(conn)
    ok = sso_config.verify_domain(conn)
    _audit(ctx, workspace_id, "sso.domain_verified" if ok else "sso.domain_verification_failed", conn.domain,
           {"method": "well-known file"})
    if not ok:
        raise ApiError(422, "domain_not_verified",
                       f"The verification token was not found at {sso_config.verification_url(conn.domain)}.")
    return sso_config.public_view(sso_config.get_for_workspace(workspace_id, domain))


@api.route(BASE + "/{domain}", methods=["DELETE"], permission="sso.manage")
def delete(ctx: Ctx, workspace_id: str, domain: str) -> Any:
    conn = sso_config.get_for_workspace(workspace_id, domain)
    conn.delete()
    _audit(ctx, workspace_id, "sso.connection_deleted", conn.domain, {"kind": conn.kind})
    return Response(body="", status_code=204, headers={"Cache-Control": "no-store"})
