"""GET /v1/me: who the token belongs to, which workspaces they can switch to, and where each is served."""
from __future__ import annotations

from typing import Any

from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import get_workspace, workspaces_of
from chalicelib.platform.workspaces import served_at


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
        "workspace": {"id": ws.id, "name": ws.name, "slug": ws.slug, "residency": ws.residency,
                      **served_at(ws.region)},
        "workspaces": [{"workspace_id": m["workspace_id"], "role": m["role"], "region": m["region"],
                        **served_at(m["region"])}
                       for m in workspaces_of(principal.user_id)],
    }
