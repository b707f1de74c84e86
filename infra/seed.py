"""The demo tenant `make run` seeds: one user with a password and an authenticator (TOTP) secret, a
us-east workspace where they are Admin, an API token, and two synced connectors whose datasets carry PII
fields under policies (``chalicelib/gateway/demo.py``).

Idempotent: against a persistent endpoint (LocalStack) a second run reuses the user, workspace and data,
and issues fresh secrets. Secrets are generated at run time, never stored in the repo.
"""
from __future__ import annotations

from typing import Any

from chalicelib.agents import demo as agents_demo
from chalicelib.chat import demo as chat_demo
from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import region_of, workspaces_of
from chalicelib.gateway import demo as gateway_demo
from chalicelib.identity import users
from chalicelib.identity.demo_seed import seed_signin_demo
from chalicelib.platform.workspaces import create_workspace

DEMO_EMAIL = "demo@example.com"
DEMO_WORKSPACE = "Demo Workspace"


def seed_demo() -> dict[str, Any]:
    user = users.find_by_email(DEMO_EMAIL) or users.create_user(DEMO_EMAIL, email_verified=True,
                                                                 display_name="Demo Admin")
    mine = workspaces_of(user.id)
    if mine:
        workspace_id = mine[0]["workspace_id"]
    else:
        workspace_id = create_workspace(owner_id=user.id, owner_email=user.email, name=DEMO_WORKSPACE,
                                        residency="us-east", enforce_mfa=False, joined_via="seed").id
    demo = seed_signin_demo(user.id, user.email, workspace_id)
    data = gateway_demo.seed(workspace_id, region_of(workspace_id), user.email)
    knowledge = chat_demo.seed(workspace_id, region_of(workspace_id), Principal(
        user_id=user.id, workspace_id=workspace_id, roles=("admin",), email=user.email, amr=("seed",),
        token_id="seed"))
    agent = agents_demo.seed(workspace_id, region_of(workspace_id), user.id, user.email)
    return {**demo, "user_id": user.id, "datasets": [d["name"] for d in data["datasets"]] + ["handbook"],
            "chat_question": knowledge["question"], **agent}
