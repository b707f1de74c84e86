"""The demo tenant `make run` seeds: one user, a us-east workspace (Admin), an API token, and two synced
connectors whose datasets carry PII fields under policies (``chalicelib/gateway/demo.py``).

Idempotent: against a persistent endpoint (LocalStack) a second run reuses the user and workspace and
issues fresh secrets. Secrets are generated at run time, never stored in the repo.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.tenancy import workspaces_of
from chalicelib.identity import users
from chalicelib.identity.signing import issue_access_token
from chalicelib.platform.workspaces import create_workspace

DEMO_EMAIL = "demo@example.com"
DEMO_WORKSPACE = "Demo Workspace"
API_TOKEN_TTL = 30 * 24 * 3600


def seed_demo() -> dict[str, Any]:
    user = users.find_by_email(DEMO_EMAIL) or users.create_user(DEMO_EMAIL, email_verified=True,
                                                                 display_name="Demo Admin")
    mine = workspaces_of(user.id)
    if mine:
        workspace_id = mine[0]["workspace_id"]
    else:
        workspace_id = create_workspace(owner_id=user.id, owner_email=user.email, name=DEMO_WORKSPACE,
                                        residency="us-east", enforce_mfa=False, joined_via="seed").id
    token, _ = issue_access_token(user_id=user.id, email=user.email, workspace_id=workspace_id, roles=["admin"],
                                  amr=["pwd", "otp", "mfa"], ttl=API_TOKEN_TTL, extra={"token_use": "api"})
    from chalicelib.core.tenancy import region_of
    from chalicelib.gateway import demo as gateway_demo

    data = gateway_demo.seed(workspace_id, region_of(workspace_id), user.email)
    return {"email": user.email, "user_id": user.id, "workspace_id": workspace_id, "api_token": token,
            "datasets": [d["name"] for d in data["datasets"]]}
