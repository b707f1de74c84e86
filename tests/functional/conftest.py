from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from moto import mock_aws

from chalicelib.core import aws, clock, models, tenancy, tokens
from chalicelib.core.config import settings
from chalicelib.identity import signing, users
from chalicelib.identity.signing import issue_access_token
from chalicelib.platform.workspaces import create_workspace
from infra.bootstrap import bootstrap_all


def reset_process_state() -> None:
    """Forget every per-process cache (clients, bound models, keys, verified tokens)."""
    settings.cache_clear()
    aws.reset_caches()
    models.reset_models()
    tenancy.region_of.cache_clear()
    tokens._verifier = None
    signing._signer = None
    clock.reset()


@pytest.fixture
def stack() -> Iterator[None]:
    """Both regions bootstrapped in moto, fresh per test."""
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    reset_process_state()
    with mock_aws():
        bootstrap_all()
        yield
    reset_process_state()


@dataclass
class Tenant:
    user_id: str
    email: str
    workspace_id: str
    region: str
    token: str
    claims: dict[str, Any]


def make_tenant(email: str = "owner@example.com", residency: str = "us-east", name: str = "Acme",
                enforce_mfa: bool = False) -> Tenant:
    user = users.find_by_email(email) or users.create_user(email, email_verified=True)
    ws = create_workspace(owner_id=user.id, owner_email=user.email, name=name, residency=residency,
                          enforce_mfa=enforce_mfa)
    token, claims = issue_access_token(user_id=user.id, email=user.email, workspace_id=ws.id,
                                       roles=["admin"], amr=["pwd", "otp", "mfa"])
    return Tenant(user.id, user.email, ws.id, ws.region, token, claims)


@pytest.fixture
def tenant(stack: None) -> Tenant:
    return make_tenant()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Outbox:
    """The local mail outbox (``MAIL_OUTBOX_DIR``) as the tests read it."""

    def __init__(self, path: Any) -> None:
        self.path = path

    def messages(self, to: str | None = None) -> list[dict[str, Any]]:
        import json as _json

        out = [_json.loads(p.read_text()) for p in sorted(self.path.glob("*.json"))]
        return [m for m in out if to is None or m["to"] == to]

    def last_code(self, to: str) -> str:
        import re as _re

        msgs = [m for m in self.messages(to) if m["tag"] == "signin-code"]
        assert msgs, f"no sign-in code sent to {to}"
        found = _re.search(r"\b(\d{8})\b", msgs[-1]["text"])
        assert found
        return found.group(1)

    def last_link(self, to: str) -> str:
        import re as _re

        msgs = [m for m in self.messages(to) if m["tag"] == "reset"]
        assert msgs, f"no reset link sent to {to}"
        found = _re.search(r"(https?://\S+)", msgs[-1]["text"])
        assert found
        return found.group(1)


@pytest.fixture
def outbox(stack: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Outbox:
    monkeypatch.setenv("MAIL_OUTBOX_DIR", str(tmp_path / "outbox"))
    (tmp_path / "outbox").mkdir()
    return Outbox(tmp_path / "outbox")
