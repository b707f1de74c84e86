"""openid-client (npm, a certified strict relying party) drives the running identity service: discovery,
code + PKCE, ID token validation, userinfo, refresh rotation and its ``invalid_grant`` after reuse,
revocation, introspection, token exchange, client_secret_post, and the error paths.

The peer lives in ``tests/integration/peers/openid-client`` (pinned, installed by
``infra/scripts/system_deps.sh``); ``drive.mjs`` runs the steps and prints what it saw.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import ROOT, RunningPlatform
from tests.integration.sessions import email_code_session

pytestmark = pytest.mark.integration
PEER = Path(__file__).resolve().parents[1] / "peers" / "openid-client"
REDIRECT = "http://127.0.0.1:9/callback"  # never visited: the test reads the redirect's Location
FOREIGN_WORKSPACE = "ws_01HZZZZZZZZZZZZZZZZZZZZZZZ"

REGISTER = """
import json, sys
from infra.demo_token import load_run_info, point_at
point_at(load_run_info())
from chalicelib.identity.oauth.clients import register_client
cid, secret = register_client("openid-client peer", confidential=True, redirect_uris=[sys.argv[1]], first_party=True)
print(json.dumps({"client_id": cid, "client_secret": secret}))
"""


def register_confidential_client(platform: RunningPlatform) -> dict[str, str]:
    """Register a client in the running platform's store (what an operator's registration does)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # like `make token`
    env.update({"LOCAL_STATE_DIR": str(platform.state_dir), "RESOURCE_PREFIX": "aiplat"})
    done = subprocess.run([sys.executable, "-c", REGISTER, REDIRECT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def driven(platform: RunningPlatform) -> dict[str, Any]:
    if shutil.which("node") is None or not (PEER / "node_modules" / "openid-client").is_dir():
        pytest.fail("the openid-client peer is not installed: run `bash infra/scripts/system_deps.sh`")
    client = register_confidential_client(platform)
    demo = platform.demo
    data = {"issuer": platform.urls["identity"], "redirect_uri": REDIRECT, **client,
            "cookie": email_code_session(platform, demo["email"]),
            "other_workspace_id": demo["eu_workspace_id"], "foreign_workspace_id": FOREIGN_WORKSPACE}
    done = subprocess.run(["node", "drive.mjs"], cwd=PEER, env={**os.environ, "OPENID_CLIENT_INPUT": json.dumps(data)},
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    out["client_id"] = client["client_id"]
    return out


def test_discovery_and_code_flow_with_pkce_and_id_token(driven: dict[str, Any], platform: RunningPlatform) -> None:
    assert driven["discovery"]["issuer"] == platform.urls["identity"]
    assert "client_secret_post" in driven["discovery"]["auth_methods"]
    grant = driven["code_grant"]
    assert grant["ok"], json.dumps(grant)
    claims = grant["value"]["claims"]  # openid-client validated iss, aud, exp, iat, nonce and the signature
    assert claims["aud"] == driven["client_id"] and claims["email"] == platform.demo["email"]
    assert grant["value"]["refresh_token"].startswith("rt_")


def oauth_error_of(step: dict[str, Any]) -> str | None:
    """The RFC 6749 ``error`` openid-client reported for a failed step (its ResponseBodyError)."""
    assert step["ok"] is False, json.dumps(step)
    return step.get("error")


def test_code_reuse_is_invalid_grant(driven: dict[str, Any]) -> None:
    assert oauth_error_of(driven["code_reuse"]) == "invalid_grant", json.dumps(driven["code_reuse"])


def test_userinfo_and_introspection(driven: dict[str, Any]) -> None:
    assert driven["userinfo"]["ok"], driven["userinfo"]
    assert driven["userinfo"]["value"]["sub"] == driven["code_grant"]["value"]["claims"]["sub"]
    assert driven["userinfo_wrong_subject"]["ok"] is False  # openid-client's own subject check
    intro = driven["introspect"]
    assert intro["ok"] and intro["value"]["active"] is True and intro["value"]["client_id"] == driven["client_id"]


def test_refresh_rotation_and_invalid_grant_after_reuse(driven: dict[str, Any]) -> None:
    assert driven["refresh"]["ok"], driven["refresh"]
    reuse = driven["refresh_reuse"]
    assert oauth_error_of(reuse) == "invalid_grant" and reuse["status"] == 400, json.dumps(reuse)
    # the reuse revoked the whole grant, the rotated token's access token included
    assert driven["introspect_after_reuse"]["value"] == {"active": False}


def test_token_exchange_and_its_errors(driven: dict[str, Any], platform: RunningPlatform) -> None:
    ex = driven["exchange"]
    assert ex["ok"], ex
    assert ex["value"]["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    assert ex["value"]["workspace_id"] == platform.demo["eu_workspace_id"]
    assert oauth_error_of(driven["exchange_foreign"]) == "invalid_target"
    assert oauth_error_of(driven["exchange_missing_subject"]) == "invalid_request"


def test_revocation_then_refresh_introspection_and_userinfo_fail(driven: dict[str, Any]) -> None:
    assert driven["revoke"]["ok"], driven["revoke"]
    assert oauth_error_of(driven["refresh_after_revoke"]) == "invalid_grant"
    assert driven["introspect_after_revoke"]["value"] == {"active": False}
    after = driven["userinfo_after_revoke"]
    assert after["ok"] is False and after["status"] in (401, None), after  # a WWW-Authenticate challenge


def test_client_authentication_methods(driven: dict[str, Any]) -> None:
    wrong = driven["wrong_secret"]  # 401 with a Basic challenge: openid-client raises the challenge
    assert wrong["ok"] is False and wrong["status"] == 401 and '"scheme":"basic"' in wrong["cause"], json.dumps(wrong)
    assert driven["client_secret_post"]["ok"], driven["client_secret_post"]
    assert driven["client_secret_post"]["value"] == {"token_type": "bearer", "has_id_token": True}
