"""`make token` (infra/demo_token.py): the demo user's token, and ``--email`` for another user of the local
stack: in the demo workspace only when a member of it, in no workspace otherwise, never for an unknown
address."""
from __future__ import annotations

from typing import Any

import jwt
import pytest

from chalicelib.identity import users
from infra.demo_token import demo_access_token
from tests.functional.conftest import Tenant, make_tenant


def _claims(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


def _info(t: Tenant) -> dict[str, Any]:
    return {"demo": {"user_id": t.user_id, "email": t.email, "workspace_id": t.workspace_id}}


def test_the_demo_user_gets_a_token_of_the_demo_workspace(tenant: Tenant) -> None:
    claims = _claims(demo_access_token(_info(tenant)))
    assert (claims["sub"], claims["workspace_id"], claims["roles"]) == (tenant.user_id, tenant.workspace_id, ["admin"])


def test_another_user_gets_the_demo_workspace_only_as_a_member(tenant: Tenant) -> None:
    outsider = users.create_user("kim@example.com", email_verified=True)
    claims = _claims(demo_access_token(_info(tenant), email="Kim@Example.com"))
    assert (claims["sub"], claims["email"]) == (outsider.id, "kim@example.com")
    assert claims["workspace_id"] == "" and claims["roles"] == []  # not a member: no workspace, no role

    own = make_tenant("lee@example.com", name="Lee's")  # a member of another workspace only
    claims = _claims(demo_access_token(_info(tenant), email=own.email))
    assert claims["workspace_id"] == "" and claims["roles"] == []


def test_an_unknown_address_gets_nothing(tenant: Tenant) -> None:
    with pytest.raises(SystemExit, match="no user nobody@example.com on this stack"):
        demo_access_token(_info(tenant), email="nobody@example.com")
