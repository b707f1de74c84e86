"""GET /v1/me: who the token belongs to and which workspaces they can switch to."""
from __future__ import annotations

from typing import Any

from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import get_workspace, workspaces_of


def describe(principal: Principal) -> dict[str, Any]:
    ws = get_workspace(principal.workspace_id)
    return {
        "user_id": principal.user_id,
        "email": principal.email,
        "workspace_id": principal.workspace_id,
        "roles": list(principal.roles),
        "amr": list(principal.amr),
        "token_id": principal.token_id,
        "token_expires_at": principal.claims.get("exp"),
        "workspace": {"id": ws.id, "name": ws.name, "slug": ws.slug, "residency": ws.residency},
        "workspaces": [{"workspace_id": m["workspace_id"], "role": m["role"]}
                       for m in workspaces_of(principal.user_id)],
    }
