"""GET /v1/me: who the token belongs to, which workspaces they can switch to, and where each is served.

A signed-in user with no workspace yet (a token with ``workspace_id=""``, see
``chalicelib/identity/oauth/authorize.py``) is answered too: ``workspace`` is null and ``next_steps`` says how
to create one, join one, or switch to one they already belong to.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.tenancy import RequestScope, live_principal, workspaces_of
from chalicelib.platform.workspaces.service import served_at, token_exchange_hint


def describe(scope: RequestScope) -> dict[str, Any]:
    """The caller; a token bound to a workspace acts with its live membership (removed members get 403)."""
    principal = scope.principal
    if principal.workspace_id:
        principal = live_principal(principal)
    member_of = [{"workspace_id": m["workspace_id"], "role": m["role"], "region": m["region"], **served_at(m["region"])}
                 for m in workspaces_of(principal.user_id)]
    out: dict[str, Any] = {
        "user_id": principal.user_id,
        "email": principal.email,
        "workspace_id": principal.workspace_id or None,
        "roles": list(principal.roles),
        "amr": list(principal.amr),
        "token_id": principal.token_id,
        "token_expires_at": principal.claims.get("exp"),
        "workspace": None,
        "workspaces": member_of,
    }
    if principal.workspace_id:
        ws = scope.entry()
        out["workspace"] = {"id": ws.id, "name": ws.name, "slug": ws.slug, "residency": ws.residency,
                            **served_at(ws.region)}
    else:
        out["next_steps"] = next_steps(member_of)
    return out


def next_steps(member_of: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a token without a workspace can do next: switch (when already a member), create, or join."""
    steps: list[dict[str, Any]] = []
    if member_of:
        steps.append({"action": "switch", "description": "You already belong to a workspace: exchange this token "
                                                         "for one bound to it (RFC 8693 token exchange).",
                      "token_exchange": token_exchange_hint(member_of[0]["workspace_id"])})
    steps += [
        {"action": "create", "method": "POST", "path": "/v1/workspaces",
         "description": "Create a workspace (body: name, residency); you become its Admin."},
        {"action": "join", "method": "GET", "path": "/v1/joinable-workspaces",
         "description": "List workspaces open to your verified e-mail domain, then "
                        "POST /v1/workspaces/{workspace_id}/join."},
        {"action": "accept_invitation", "method": "POST",
         "path": "/v1/workspaces/{workspace_id}/invitations/{invitation_id}/accept",
         "description": "Accept an invitation an Admin sent to your e-mail address."},
    ]
    return steps
