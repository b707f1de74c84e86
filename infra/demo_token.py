"""`make token`: print a fresh access token for the demo user of a running `make run` (``ARGS=--mcp``: one
for the gateway's MCP endpoint, whose audience is its resource ``{gateway_url}/mcp``; ``ARGS='--email
ADDRESS'``: one for another user of the local stack, who signed up before, e.g. with an e-mailed code,
bound to the demo workspace when a member of it, else to no workspace, as a sign-in before the first
workspace gives).

It reads ``.local/run.json`` (``LOCAL_STATE_DIR``), points this process at the same AWS endpoint and
issuer as the running platform, and signs the token with the identity service's active signing key,
with what a password + TOTP sign-in of the demo user gives: the demo workspace, the user's current role
there, ``amr`` ``["mfa", "otp", "pwd"]``, and the access-token lifetime (15 minutes, ``ACCESS_TOKEN_TTL``).
Unlike the 30-day API token in ``run.json``, it may create workspaces and be exchanged for another
workspace's token (RFC 8693). Local only: it needs the emulator of ``make run``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

SIGN_IN_AMR = ["mfa", "otp", "pwd"]


def load_run_info(state_dir: str | None = None) -> dict[str, Any]:
    """The details `make run` wrote; exits with a clear message when it is not running."""
    path = Path(state_dir or os.environ.get("LOCAL_STATE_DIR", ".local")) / "run.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SystemExit(f"{path} not found: start the platform with `make run` first") from None


def point_at(info: dict[str, Any]) -> None:
    """Configure this process like the running platform (endpoint, resource names, issuer, service URLs)."""
    urls = info["urls"]
    os.environ["AWS_ENDPOINT_URL"] = urls["aws_endpoint"]
    for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(name, value)
    if info.get("resource_prefix"):
        os.environ["RESOURCE_PREFIX"] = info["resource_prefix"]
    os.environ.update({"AUTH_URL": urls["identity"], "BASE_URL": urls["platform"].removesuffix("/v1"),
                       "GATEWAY_URL": urls["gateway"], "APP_URL": urls["app"]})
    from chalicelib.core.config import settings

    settings.cache_clear()


def demo_access_token(info: dict[str, Any], mcp: bool = False, email: str | None = None) -> str:
    """Sign an access token for the demo user in the demo workspace (``mcp``: for the gateway's MCP
    resource, ``{gateway_url}/mcp``, the only audience the MCP endpoint accepts; ``email``: for that user
    instead, in the demo workspace when a member of it, else in no workspace)."""
    from chalicelib.core.tenancy import roles_for
    from chalicelib.core.tokens import mcp_resource
    from chalicelib.identity.oauth.signing import AUDIENCE, issue_access_token
    from chalicelib.identity.users import find_by_email

    demo = info["demo"]
    user_id, address, workspace_id = demo["user_id"], demo["email"], demo["workspace_id"]
    if email:
        user = find_by_email(email)
        if user is None:
            raise SystemExit(f"no user {email} on this stack: sign in once first (e.g. with an e-mailed code)")
        user_id, address = user.id, user.email
    roles = roles_for(workspace_id, user_id)
    if not roles and not email:
        raise SystemExit("the demo user is no longer a member of the demo workspace")
    token, _ = issue_access_token(user_id=user_id, email=address, workspace_id=workspace_id if roles else "",
                                  roles=roles, amr=SIGN_IN_AMR, audience=mcp_resource() if mcp else AUDIENCE)
    return token


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="make token", description="A fresh access token of a running make run.")
    parser.add_argument("--mcp", action="store_true", help="for the gateway's MCP endpoint")
    parser.add_argument("--email", help="for this user (signed up before) instead of the demo user")
    args = parser.parse_args(argv)
    info = load_run_info()
    point_at(info)
    sys.stdout.write(demo_access_token(info, mcp=args.mcp, email=args.email) + "\n")


if __name__ == "__main__":
    main()
