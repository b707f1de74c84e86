"""Optional SSO demo for `make run`: a real OpenID provider (the npm ``oidc-provider`` test peer) on
loopback and a verified SSO connection of the demo workspace for the domain ``sso-demo.example``.

Sign in at {auth_url}/signin as ``alice@sso-demo.example``: the page shows "Continue with Demo
corporate IdP", the provider signs Alice in without a password prompt (a test peer), and she comes
back signed in, created just in time as a Member of the demo workspace.

Local only: the domain is marked verified directly (there is no DNS to publish to), which the product
never does. Needs Node and ``make system-deps`` (``npm ci`` of the peer).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.identity.sso import connections as sso_config
from infra.emulator.process import free_port

PEER_DIR = Path(__file__).resolve().parent.parent / "tests" / "integration" / "peers" / "oidc-provider"
DEMO_DOMAIN = "sso-demo.example"
DEMO_EMAIL = f"alice@{DEMO_DOMAIN}"


@dataclass
class SsoDemo:
    issuer: str
    domain: str
    email: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def info(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "domain": self.domain, "sign_in_as": self.email}


def available() -> bool:
    return shutil.which("node") is not None and (PEER_DIR / "node_modules" / "oidc-provider").is_dir()


def start_peer(port: int, env: dict[str, str]) -> subprocess.Popen[bytes] | None:
    """Start npm's oidc-provider (``PEER_DIR/server.mjs``) on 127.0.0.1:``port``; None if it fails to start.

    ``env`` carries the peer's settings (ACCOUNT, CLIENTS, optionally JWKS). Its output is drained."""
    proc = subprocess.Popen(["node", "server.mjs"], cwd=PEER_DIR, env={**os.environ, "PORT": str(port), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    stdout = proc.stdout
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = stdout.readline().decode()
        if "ready" in line:
            threading.Thread(target=lambda: [None for _ in stdout], name="oidc-peer-log", daemon=True).start()
            return proc
        if not line and proc.poll() is not None:
            return None
    proc.kill()
    return None


def start_sso_demo(workspace_id: str, admin_user_id: str, port: int | None = None) -> SsoDemo | None:
    """Start the provider and connect ``sso-demo.example`` to the workspace; None when Node is missing."""
    if not available():
        return None
    port = port or free_port()
    secret = secrets.token_urlsafe(24)
    account = {"sub": "demo-alice", "email": DEMO_EMAIL, "email_verified": True, "name": "Alice Demo"}
    proc = start_peer(port, {"ACCOUNT": json.dumps(account), "CLIENTS": json.dumps([{
        "client_id": "aiplat-demo", "client_secret": secret, "redirect_uris": [settings().auth_url + "/sso/callback"]}])})
    if proc is None:
        return None
    issuer = f"http://127.0.0.1:{port}"
    existing = sso_config.get(DEMO_DOMAIN)
    if existing is not None:
        existing.delete()
    conn = sso_config.create(workspace_id=workspace_id, created_by=admin_user_id, kind="identity_platform",
                             domain=DEMO_DOMAIN, issuer=issuer, client_id="aiplat-demo", client_secret=secret,
                             display_name="Demo corporate IdP")
    conn.update(actions=[sso_config.SsoConnectionAttrs.verified.set(True),
                         sso_config.SsoConnectionAttrs.verified_at.set(clock.iso())])
    return SsoDemo(issuer, DEMO_DOMAIN, DEMO_EMAIL, proc)
