"""The demo tenant `make run` seeds: one user with a password and an authenticator (TOTP) secret, a
us-east workspace and an eu-central workspace where they are Admin, an API token for each, and in each
workspace two synced connectors over that region's own demo data, whose datasets carry PII fields under
policies (``chalicelib/gateway/demo.py``).

Idempotent: against an endpoint that still holds an earlier seed (a LocalStack container that kept
running, or an AWS sandbox) a second run reuses the user, workspace and data, and issues fresh secrets.
`make run`'s own emulator keeps its state across restarts and does not call this again while the state
holds the demo user (``infra/local_run.py``, ``.local/demo.json``). LocalStack Community keeps nothing
across a container restart. Secrets are generated at run time, never stored in the repo.
"""
from __future__ import annotations

from typing import Any

from chalicelib.agents import demo as agents_demo
from chalicelib.chat import demo as chat_demo
from chalicelib.core.authz import Principal
from chalicelib.core.regions import region_for
from chalicelib.core.tenancy import region_of, workspaces_of
from chalicelib.gateway import demo as gateway_demo
from chalicelib.identity import users
from chalicelib.identity.account import api_tokens
from chalicelib.identity.demo_seed import seed_signin_demo
from chalicelib.platform.workspaces.service import create_workspace
from chalicelib.webapp.shell import ensure_app_client
from chalicelib.workers.jobs import index_changed_dataset

DEMO_EMAIL = "demo@example.com"
DEMO_WORKSPACE = "Demo Workspace"
DEMO_WORKSPACES = {"us-east": DEMO_WORKSPACE, "eu-central": "Demo Workspace EU"}


def _workspace(user: Any, residency: str) -> str:
    region = region_for(residency)
    for mine in workspaces_of(user.id):
        if mine["region"] == region:
            return str(mine["workspace_id"])
    return create_workspace(owner_id=user.id, owner_email=user.email, name=DEMO_WORKSPACES[residency],
                            residency=residency, enforce_mfa=False, joined_via="seed").id


def seed_demo() -> dict[str, Any]:
    user = users.find_by_email(DEMO_EMAIL) or users.create_user(DEMO_EMAIL, email_verified=True,
                                                                 display_name="Demo Admin")
    us_id, eu_id = _workspace(user, "us-east"), _workspace(user, "eu-central")
    demo = {**seed_signin_demo(user.id, user.email, us_id), "app_client_id": ensure_app_client()}
    eu_token, _ = api_tokens.create(user.id, ["pwd", "otp", "mfa"], name="demo-eu", workspace_id=eu_id,
                                    expires_in_days=30)
    per_region: dict[str, Any] = {}
    for workspace_id, token in ((us_id, demo["api_token"]), (eu_id, eu_token)):
        region = region_of(workspace_id)
        data = gateway_demo.seed(workspace_id, region, user.email, on_changed=index_changed_dataset)
        per_region[region] = {"workspace_id": workspace_id, "api_token": token,
                              "datasets": [d["name"] for d in data["datasets"]]}
    us_region = region_of(us_id)
    knowledge = chat_demo.seed(us_id, us_region, Principal(
        user_id=user.id, workspace_id=us_id, roles=("admin",), email=user.email, amr=("seed",), token_id="seed"))
    agent = agents_demo.seed(us_id, us_region, user.id, user.email)
    return {**demo, "user_id": user.id, "datasets": per_region[us_region]["datasets"] + ["handbook"],
            "chat_question": knowledge["question"], **agent,
            "eu_workspace_id": eu_id, "eu_api_token": eu_token, "workspaces": per_region}
