"""An Admin of one workspace cannot weaken the sign-in security of an account another workspace relies on:
MFA reset and unlock act only on accounts the workspace owns (verified domain, or its only workspace)."""
from __future__ import annotations

from typing import Any

from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.tenancy import memberships
from chalicelib.groups import create_app
from chalicelib.identity.mfa import factors as mfa
from chalicelib.identity.signin import lockout
from chalicelib.identity.sso import connections
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.functional.identity.helpers import PASSWORD, body, make_password_user, post


def _join(tenant: Tenant, user_id: str, email: str) -> None:
    memberships(tenant.region)(tenant.workspace_id, user_id, role="member", email=email, joined_at=clock.iso(),
                               joined_via="seed").save()


def _admin_call(p: Any, tenant: Tenant, user_id: str, action: str) -> Any:
    return p.http.post(f"/v1/workspaces/{tenant.workspace_id}/members/{user_id}/{action}",
                       headers={**bearer(tenant.token), "Content-Type": "application/json"}, body="{}")


def _lock(user_id: str) -> None:
    for _ in range(lockout.MAX_FAILURES):
        reservation = lockout.reserve(user_id)
        assert reservation is not None
        lockout.failed(reservation)
    assert lockout.is_locked(user_id)


def test_other_tenants_admin_cannot_reset_mfa_or_unlock(stack: None) -> None:
    home = make_tenant("home-admin@corp.example")
    other = make_tenant("other-admin@elsewhere.example", name="Other")
    u = make_password_user("victim@corp.example")
    _join(home, u.user_id, u.email)
    _join(other, u.user_id, u.email)
    _lock(u.user_id)
    with Client(create_app("platform")) as p:
        r = _admin_call(p, other, u.user_id, "mfa/reset")
        assert r.status_code == 403
        assert body(r)["code"] == "account_not_owned"
        r = _admin_call(p, other, u.user_id, "unlock")
        assert r.status_code == 403
    # nothing changed: the factors and the lock (with its counter) are intact
    assert mfa.methods(u.user_id) == ["totp", "recovery_code"]
    assert lockout.is_locked(u.user_id)
    assert lockout.status(u.user_id)["failed_attempts"] == lockout.MAX_FAILURES


def test_the_workspace_that_verified_the_domain_may_reset(stack: None) -> None:
    home = make_tenant("home-admin@corp.example")
    other = make_tenant("other-admin@elsewhere.example", name="Other")
    u = make_password_user("victim@corp.example")
    _join(home, u.user_id, u.email)
    _join(other, u.user_id, u.email)
    conn = connections.create(workspace_id=home.workspace_id, created_by=home.user_id, kind="identity_platform",
                              domain="corp.example", issuer="https://idp.corp.example", client_id="c",
                              client_secret="s")
    conn.update(actions=[connections.SsoConnectionAttrs.verified.set(True)])
    with Client(create_app("platform")) as p:
        r = _admin_call(p, home, u.user_id, "mfa/reset")
        assert r.status_code == 200, r.body
    assert mfa.methods(u.user_id) == []


def test_after_an_mfa_reset_the_password_is_not_confirmed(stack: None, outbox: Any) -> None:
    home = make_tenant("home-admin@corp.example")
    u = make_password_user("solo@corp.example")
    _join(home, u.user_id, u.email)
    with Client(create_app("platform")) as p:
        assert _admin_call(p, home, u.user_id, "mfa/reset").status_code == 200
    with Client(create_app("identity")) as c:
        right = post(c, "/signin/password", {"email": u.email, "password": PASSWORD})
        wrong = post(c, "/signin/password", {"email": u.email, "password": "a wrong guess of the password"})
    assert right.status_code == 401
    assert wrong.status_code == 401
    assert body(right)["code"] == body(wrong)["code"] == "invalid_credentials"
    assert body(right)["detail"] == body(wrong)["detail"]
    # only the mailbox owner is told what to do next
    assert [m["tag"] for m in outbox.messages(u.email)] == ["mfa-setup"]
