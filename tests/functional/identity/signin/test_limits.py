"""Mail flooding and guessing are limited per address (and per IP) with 429 + Retry-After; unknown and
known addresses get the same work and the same answer."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from chalice.test import Client

from chalicelib.core import clock
from chalicelib.groups import create_app
from chalicelib.identity.signin import limits
from tests.functional.identity.helpers import body, make_password_user, post


@contextmanager
def _window_start() -> Iterator[None]:
    """The clock stopped one second into an hour, which starts a window of every limit (their windows
    divide an hour): a test's calls, a few seconds apart, never straddle two windows whatever the time."""
    assert all(3600 % limit.window_seconds == 0 for limit in limits.LIMITS)
    with clock.frozen():
        clock.advance(3600 - clock.now() % 3600 + 1)
        yield


def test_reset_mail_flood_is_cut_at_the_per_address_limit(outbox: Any) -> None:
    u = make_password_user("flood@example.com")
    with Client(create_app("identity")) as c, _window_start():
        answers = []
        for _ in range(limits.MAIL_PER_ADDRESS.count + 3):
            answers.append(post(c, "/signin/reset", {"email": u.email}))
            clock.advance(1)  # one message file per second in the local outbox
        assert [r.status_code for r in answers[: limits.MAIL_PER_ADDRESS.count]] == [202] * limits.MAIL_PER_ADDRESS.count
        refused = answers[limits.MAIL_PER_ADDRESS.count:]
        assert {r.status_code for r in refused} == {429}
        assert body(refused[0])["code"] == "rate_limited"
        retry_after = int(refused[-1].headers["Retry-After"])
        assert 0 < retry_after <= limits.MAIL_PER_ADDRESS.window_seconds
        assert len([m for m in outbox.messages(u.email) if m["tag"] == "reset"]) == limits.MAIL_PER_ADDRESS.count
        # after the window, the address may ask again
        clock.advance(retry_after + 1)
        assert post(c, "/signin/reset", {"email": u.email}).status_code == 202


def test_unknown_addresses_get_the_same_work_and_are_limited_alike(outbox: Any) -> None:
    with Client(create_app("identity")) as c, _window_start():
        for _ in range(limits.MAIL_PER_ADDRESS.count):
            assert post(c, "/signin/reset", {"email": "nobody@example.com"}).status_code == 202
            clock.advance(1)
        assert post(c, "/signin/reset", {"email": "nobody@example.com"}).status_code == 429
    # one message per accepted request, as for a known address (the same work, so the same time)
    assert len(outbox.messages("nobody@example.com")) == limits.MAIL_PER_ADDRESS.count


def test_password_guessing_is_limited_per_address(stack: None) -> None:
    u = make_password_user("guess@example.com")
    with Client(create_app("identity")) as c, _window_start():
        codes = [post(c, "/signin/password", {"email": u.email, "password": f"guess number {i}"}).status_code
                 for i in range(limits.SIGNIN_PER_ADDRESS.count + 1)]
    assert set(codes[:-1]) == {401}
    assert codes[-1] == 429


def test_email_code_requests_are_limited_per_address(outbox: Any) -> None:
    with Client(create_app("identity")) as c, _window_start():
        codes = [post(c, "/signin/email-code", {"email": "new@example.com"}).status_code
                 for _ in range(limits.MAIL_PER_ADDRESS.count + 1)]
    assert codes == [202] * limits.MAIL_PER_ADDRESS.count + [429]


def test_a_test_stack_raises_every_limit_with_the_limit_factor(outbox: Any, monkeypatch: Any) -> None:
    """``SIGNIN_LIMIT_FACTOR`` (a stack under a fuzzer) multiplies the counts; the limit still holds."""
    from chalicelib.core.config import settings

    monkeypatch.setenv("SIGNIN_LIMIT_FACTOR", "3")
    settings.cache_clear()
    allowed = limits.MAIL_PER_ADDRESS.count * 3
    with Client(create_app("identity")) as c, _window_start():
        answers = []
        for _ in range(allowed + 1):
            answers.append(post(c, "/signin/email-code", {"email": "many@example.com"}).status_code)
            clock.advance(1)
        assert answers == [202] * allowed + [429]
