"""Lockout: exact under concurrency, auto-unlock after 15 minutes, Admin unlock, repeated-lockout event."""
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from chalice.test import Client
from moto.dynamodb.models import DynamoDBBackend

from chalicelib.core import audit, clock
from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import memberships
from chalicelib.groups import create_app
from chalicelib.identity.signin import lockout
from chalicelib.identity.signin import password_hashing as passwords
from chalicelib.identity.signin import password_signin as signin
from tests.functional.conftest import bearer, make_tenant
from tests.functional.identity.helpers import PASSWORD, body, make_password_user, post


@pytest.fixture
def atomic_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies each write atomically; moto's in-memory backend does not serialise concurrent
    writes from threads, so the test makes it behave like the real service (one write at a time)."""
    lock = threading.RLock()
    for name in ("update_item", "put_item", "delete_item", "transact_write_items"):
        original = getattr(DynamoDBBackend, name)

        def serialised(self: Any, *a: Any, __original: Any = original, **kw: Any) -> Any:
            with lock:
                return __original(self, *a, **kw)

        monkeypatch.setattr(DynamoDBBackend, name, serialised)


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every real password evaluation (argon2id verify against the user's stored hash)."""
    seen: list[bool] = []
    lock = threading.Lock()
    real = passwords.verify_password

    def counting(stored: str, password: str) -> bool:
        result = real(stored, password)
        with lock:
            seen.append(result)
        return result

    monkeypatch.setattr(passwords, "verify_password", counting)
    return seen


def attempt(email: str, password: str) -> str:
    try:
        signin.password_signin(email, password, "http://127.0.0.1:8002/account", caller=None)
        return "ok"
    except ApiError as err:
        return err.code


def test_fifty_concurrent_wrong_passwords_lock_after_exactly_ten_evaluations(
        stack: None, atomic_moto: None, evaluations: list[bool]) -> None:
    u = make_password_user()
    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(lambda i: attempt(u.email, f"wrong password {i}"), range(50)))
    assert results == ["invalid_credentials"] * 50  # the same answer whether evaluated or locked out
    assert len(evaluations) == 10
    assert not any(evaluations)
    assert lockout.is_locked(u.user_id)
    # the right password is refused while locked, and is not even evaluated
    assert attempt(u.email, PASSWORD) == "invalid_credentials"
    assert len(evaluations) == 10
    # 15 minutes after the lock it has ended by itself (measured from the lock, not from now:
    # the 50 attempts may take a while on a busy machine)
    remaining = lockout._read(u.user_id).locked_until - clock.now()
    assert 15 * 60 - 300 < remaining <= 15 * 60
    clock.advance(remaining - 30)
    assert attempt(u.email, PASSWORD) == "invalid_credentials"
    clock.advance(31)
    assert attempt(u.email, PASSWORD) == "ok"
    assert len(evaluations) == 11
    assert evaluations[-1] is True


def test_nine_failures_then_success_does_not_lock(stack: None, evaluations: list[bool]) -> None:
    u = make_password_user()
    for i in range(9):
        assert attempt(u.email, f"nope {i}") == "invalid_credentials"
    assert attempt(u.email, PASSWORD) == "ok"  # the tenth attempt, right: no lock
    assert not lockout.is_locked(u.user_id)
    assert lockout.status(u.user_id)["failed_attempts"] == 9  # cleared only by a completed sign-in


def _lock(email: str) -> None:
    for i in range(10):
        attempt(email, f"bad {i}")


def test_admin_unlock_is_immediate_and_audited(stack: None) -> None:
    admin = make_tenant()
    u = make_password_user("member@example.com")
    memberships(admin.region)(admin.workspace_id, u.user_id, role="member", email=u.email,
                              joined_at=clock.iso(), joined_via="seed").save()
    _lock(u.email)
    assert lockout.is_locked(u.user_id)
    assert attempt(u.email, PASSWORD) == "invalid_credentials"
    with Client(create_app("platform")) as c:
        path = f"/v1/workspaces/{admin.workspace_id}/members/{u.user_id}/unlock"
        r = c.http.post(path, headers={**bearer(admin.token), "Content-Type": "application/json"}, body="{}")
        assert r.status_code == 200, r.body
        assert body(r)["was_locked"] is True
    assert attempt(u.email, PASSWORD) == "ok"
    events = [e for e in audit.iter_chain(admin.region, admin.workspace_id) if e["action"] == "member.unlocked"]
    assert len(events) == 1
    assert events[0]["target"]["id"] == u.user_id
    assert events[0]["actor"]["id"] == admin.user_id


def test_admin_routes_refuse_non_members_other_workspaces_and_non_admins(stack: None) -> None:
    admin = make_tenant()
    other = make_tenant("other@example.com", name="Other")
    outsider = make_password_user("outsider@example.com", totp=False)
    with Client(create_app("platform")) as c:
        headers = {**bearer(admin.token), "Content-Type": "application/json"}
        for path in (f"/v1/workspaces/{admin.workspace_id}/members/{outsider.user_id}/unlock",
                     f"/v1/workspaces/{admin.workspace_id}/members/{outsider.user_id}/mfa/reset",
                     f"/v1/workspaces/{other.workspace_id}/members/{other.user_id}/unlock",
                     f"/v1/workspaces/{admin.workspace_id}/members/not-an-id/unlock"):
            r = c.http.post(path, headers=headers, body="{}")
            assert r.status_code == 404, path
            assert r.headers["Content-Type"] == "application/problem+json"
        from chalicelib.identity.oauth.signing import issue_access_token
        viewer, _ = issue_access_token(user_id=outsider.user_id, email=outsider.email,
                                       workspace_id=admin.workspace_id, roles=["viewer"], amr=["pwd"])
        r = c.http.post(f"/v1/workspaces/{admin.workspace_id}/members/{admin.user_id}/unlock",
                        headers={**bearer(viewer), "Content-Type": "application/json"}, body="{}")
        assert r.status_code == 403
        r = c.http.post(f"/v1/workspaces/{admin.workspace_id}/members/{admin.user_id}/unlock",
                        headers={"Content-Type": "application/json"}, body="{}")
        assert r.status_code == 401
        r = c.http.post(f"/v1/workspaces/{admin.workspace_id}/members/{admin.user_id}/unlock",
                        headers=headers, body='{"force": true}')
        assert r.status_code == 400
        assert body(r)["code"] == "validation_failed"
        r = c.http.post(f"/v1/workspaces/{admin.workspace_id}/members/{admin.user_id}/mfa/reset",
                        headers=headers, body="{oops")
        assert r.status_code == 400
        assert body(r)["code"] == "malformed_json"


def test_repeated_lockouts_write_a_security_event_to_every_workspace(stack: None) -> None:
    u = make_password_user("rep@example.com")
    ws1 = make_tenant("rep@example.com", name="One")
    ws2 = make_tenant("rep@example.com", name="Two", residency="eu-central")
    for n in range(3):
        _lock(u.email)
        assert lockout.is_locked(u.user_id)
        events = [e for e in audit.iter_chain(ws1.region, ws1.workspace_id)
                  if e["action"] == "security.repeated_lockout"]
        assert len(events) == (1 if n == 2 else 0)
        clock.advance(15 * 60 + 1)
    for ws in (ws1, ws2):
        events = [e for e in audit.iter_chain(ws.region, ws.workspace_id) if e["action"] == "security.repeated_lockout"]
        assert len(events) == 1
        assert events[0]["target"] == {"type": "user", "id": u.user_id, "email": u.email}
        assert events[0]["details"]["lockouts_in_window"] == 3
        assert audit.verify_live(ws.region, ws.workspace_id).ok


def test_lockouts_spread_over_more_than_a_day_are_not_repeated(stack: None) -> None:
    u = make_password_user("slow@example.com")
    ws = make_tenant("slow@example.com", name="Slow")
    for _ in range(3):
        _lock(u.email)
        clock.advance(13 * 3600)
    assert not [e for e in audit.iter_chain(ws.region, ws.workspace_id) if e["action"] == "security.repeated_lockout"]


def test_wrong_second_factor_codes_count_towards_the_lock(stack: None) -> None:
    u = make_password_user()
    with Client(create_app("identity")) as c:
        for _ in range(2):
            r = post(c, "/signin/password", {"email": u.email, "password": u.password})
            token = body(r)["mfa_token"]
            for _ in range(5):
                r = post(c, "/signin/mfa", {"mfa_token": token, "code": "000000"})
                assert r.status_code == 401
    assert lockout.is_locked(u.user_id)
