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
