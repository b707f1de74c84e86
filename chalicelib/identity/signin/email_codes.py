"""E-mailed one-time sign-in codes: the first sign-in of the default (passkey) method.

A code has 8 digits, lives 10 minutes, allows 5 wrong tries and works once. It is stored as SHA-256
salted with the address (``ecode#<address>`` item); a new request replaces the previous code. At most
5 codes are sent to one address per hour (further requests are answered the same way, but nothing is
sent). The caller gets the same answer whether the address is known, unknown or SSO-managed: unknown
addresses get a code too (proving it creates the account just in time, ``email_verified=True``);
SSO-managed accounts get a message pointing to their identity provider instead of a code.
"""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock, mail
from chalicelib.core.http.errors import ApiError
from chalicelib.core.logs import get_logger
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.identity import users as users_mod
from chalicelib.identity.models import EMAIL_CODE, EmailCodeAttrs, UserAttrs, state_key
from chalicelib.identity.opaque import digest, numeric_code, same
from chalicelib.identity.users import normalise_email

log = get_logger("identity.email_codes")
DIGITS = 8
TTL_SECONDS = 10 * 60
MAX_ATTEMPTS = 5
MAX_SENDS_PER_HOUR = 5


def _model() -> type[EmailCodeAttrs]:
    return global_model(EmailCodeAttrs)


def invalid_code() -> ApiError:
    return ApiError(401, "invalid_code", "The code is not correct or has expired; ask for a new one.")


def _may_send(address: str, now: float) -> bool:
    cls = _model()
    pk = state_key(EMAIL_CODE, address)
    try:
        cls(pk).update(actions=[cls.sends.set((cls.sends | 0) + 1), cls.expires_at.set(int(now) + 3600)],
                       condition=cls.window_start.exists() & (cls.window_start > now - 3600)
                       & (cls.sends < MAX_SENDS_PER_HOUR))
        return True
    except UpdateError as err:
        if not condition_failed(err):
            raise
    try:  # no window, or an old one: start a new window (unless another request just did)
        cls(pk).update(actions=[cls.sends.set(1), cls.window_start.set(now), cls.expires_at.set(int(now) + 3600)],
                       condition=cls.window_start.does_not_exist() | (cls.window_start <= now - 3600))
        return True
    except UpdateError as err:
        if not condition_failed(err):
            raise
    return False


def request_code(email: str, *, caller: Any = None) -> None:
    """Send a code (or the SSO hint) to ``email``; the caller's answer never depends on the outcome."""
    address = normalise_email(email)
    now = clock.now()
    if not _may_send(address, now):
        return
    user = users_mod.find_by_email(address)
    if user is not None and user.idp:
        mail.send(address, "Sign in with your organisation",
                  "Your account is managed by your organisation's identity provider. Go to the sign-in page, "
                  "enter your e-mail address and choose 'Continue with your identity provider'.", tag="signin-sso")
        return
    code = numeric_code(DIGITS)
    cls = _model()
    cls(state_key(EMAIL_CODE, address)).update(actions=[
        cls.code_hash.set(digest(code, salt=f"ecode:{address}")), cls.attempts.set(0),
        cls.code_expires_at.set(int(now) + TTL_SECONDS)])
    mail.send(address, f"Your sign-in code: {code}",
              f"Your sign-in code is {code}.\n\nIt is valid for {TTL_SECONDS // 60} minutes and can be used once. "
              "If you did not ask for it, ignore this message.", tag="signin-code")


def verify_code(email: str, code: str) -> UserAttrs:
    """Prove the code (once); the user, created just in time for a new address; 401 otherwise."""
    address = normalise_email(email)
    cls = _model()
    pk = state_key(EMAIL_CODE, address)
    now = clock.now()
    try:
        item = cls.get(pk, consistent_read=True)
    except DoesNotExist:
        raise invalid_code() from None
    if not item.code_hash or (item.code_expires_at or 0) <= now or (item.attempts or 0) >= MAX_ATTEMPTS:
        raise invalid_code()
    try:  # count the try before comparing
        cls(pk).update(actions=[cls.attempts.set(cls.attempts + 1)],
                       condition=(cls.attempts < MAX_ATTEMPTS) & (cls.code_hash == item.code_hash))
    except UpdateError as err:
        if condition_failed(err):
            raise invalid_code() from None
        raise
    if not isinstance(code, str) or not same(digest(code.strip(), salt=f"ecode:{address}"), item.code_hash):
        raise invalid_code()
    try:  # single use: only one request can remove this exact code
        cls(pk).update(actions=[cls.code_hash.remove(), cls.code_expires_at.remove()],
                       condition=cls.code_hash == item.code_hash)
    except UpdateError as err:
        if condition_failed(err):
            raise invalid_code() from None
        raise
    user = users_mod.find_by_email(address)
    if user is None:
        try:
            user = users_mod.create_user(address, email_verified=True)
        except ApiError:  # created a moment ago by a concurrent request
            user = users_mod.find_by_email(address)
            if user is None:
                raise
    if user.idp or user.status != "active":
        raise invalid_code()
    if not user.email_verified:
        users_mod.users()(user.id).update(actions=[UserAttrs.email_verified.set(True)])
        user.email_verified = True
    return user


def sweep_expired(event: dict[str, Any] | None = None) -> dict[str, int]:
    """Delete e-mail code records (``ecode#...``) whose item expiry has passed; the emulator's TTL never does.
    Hourly, in the global region."""
    now = int(clock.now())
    cls = _model()
    n = 0
    for item in cls.scan(filter_condition=cls.pk.startswith(EMAIL_CODE + "#") & (cls.expires_at <= now)):
        try:
            cls(item.pk).delete(condition=cls.expires_at <= now)
            n += 1
        except Exception:  # noqa: BLE001 - a new code was sent meanwhile: keep it
            continue
    if n:
        log.info("expired e-mail codes deleted", extra={"deleted": n})
    return {"email_codes": n}
