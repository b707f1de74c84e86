"""Helpers for the platform tests: users with roles, tokens, a client, JSON calls."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.tenancy import memberships, region_of
from chalicelib.identity import users
from chalicelib.identity.oauth.signing import issue_access_token

MFA = ["pwd", "otp", "mfa"]


@dataclass
class User:
    user_id: str
    email: str
    token: str


def user_token(user_id: str, email: str, workspace_id: str, role: str, ttl: int | None = None, **extra: Any) -> str:
    """A token; tests that move the clock forward issue long-lived ones first (python-jose checks
    ``nbf``/``iat`` against the real clock, so a token cannot be issued "in the future")."""
    token, _ = issue_access_token(user_id=user_id, email=email, workspace_id=workspace_id, roles=[role], amr=MFA,
                                  ttl=ttl, extra=extra or None)
    return token


def add_member(workspace_id: str, email: str, role: str, *, verified: bool = True) -> User:
    """A directory user who is ``role`` in the workspace (stored in its region), with a token for it."""
    user = users.find_by_email(email) or users.create_user(email, email_verified=verified)
    memberships(region_of(workspace_id))(workspace_id, user.id, role=role, email=user.email, joined_at=clock.iso(),
                                         joined_via="seed").save()
    return User(user.id, user.email, user_token(user.id, user.email, workspace_id, role))


def call(client: Client, method: str, path: str, token: str | None = None, body: Any = None,
         raw: bytes | str | None = None, headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    h = {"Content-Type": "application/json", **(headers or {})}
    if token:
        h["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    if isinstance(data, str):
        data = data.encode()
    r = client.http.request(method, path, headers=h, body=data if data is not None else b"")
    try:
        parsed = json.loads(r.body) if r.body else None
    except ValueError:
        parsed = r.body
    return r.status_code, parsed, r.headers
