"""The authenticator-app second factor: TOTP (RFC 6238, pyotp).

TOTP: RFC 6238, SHA-1, 6 digits, 30-second steps, one step of drift either way. The secret is stored
KMS-encrypted in ``users.totp_secret_enc`` (global ``token-keys`` key, encryption context
``{"purpose": "totp", "user_id": ...}``). A code is accepted only for a time step later than the last
accepted one: the step is written with a conditional update (``totp#<user_id>`` item), so a code can
never be used twice, not even by two concurrent requests. Confirming a setup issues new recovery
codes (``recovery_codes``).
"""
from __future__ import annotations

import hmac

import pyotp
from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError, conflict
from chalicelib.core.store import kms
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.identity import users as users_mod
from chalicelib.identity.mfa.recovery_codes import regenerate_recovery_codes
from chalicelib.identity.models import TOTP, TotpStateAttrs, UserAttrs, state_key

ISSUER_NAME = "AI Platform"
DIGITS = 6
INTERVAL = 30
DRIFT_STEPS = 1
SETUP_TTL_SECONDS = 15 * 60

def _totp_state() -> type[TotpStateAttrs]:
    return global_model(TotpStateAttrs)



def _encrypt(user_id: str, secret: str) -> str:
    return kms.encrypt(settings().global_region, "token-keys", "totp", secret.encode(), user_id=user_id)


def _decrypt(user_id: str, enc: str) -> str:
    return kms.decrypt(settings().global_region, "totp", enc, user_id=user_id).decode()


def _matching_step(secret: str, code: str, now: float) -> int | None:
    if not isinstance(code, str) or len(code) != DIGITS or not code.isdigit():
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=INTERVAL)
    step = int(now // INTERVAL)
    found = None
    for s in range(step - DRIFT_STEPS, step + DRIFT_STEPS + 1):
        if hmac.compare_digest(totp.at(s * INTERVAL), code):
            found = s
    return found


# --- TOTP ---------------------------------------------------------------------------------------

def has_totp(user_id: str) -> bool:
    user = users_mod.get_user(user_id)
    return bool(user and user.totp_secret_enc)


ACCEPTED, REUSED, WRONG = "accepted", "reused", "wrong"


def check_totp(user_id: str, code: str) -> str:
    """``ACCEPTED`` once per time step; ``REUSED`` for a right code of a step already used (or older than
    the last used one: a replay); ``WRONG`` otherwise."""
    user = users_mod.get_user(user_id)
    if user is None or not user.totp_secret_enc:
        return WRONG
    step = _matching_step(_decrypt(user_id, user.totp_secret_enc), code, clock.now())
    if step is None:
        return WRONG
    cls = _totp_state()
    try:
        cls(state_key(TOTP, user_id)).update(actions=[cls.last_step.set(step)],
                                      condition=cls.last_step.does_not_exist() | (cls.last_step < step))
    except UpdateError as err:
        if condition_failed(err):
            return REUSED
        raise
    return ACCEPTED


def verify_totp(user_id: str, code: str) -> bool:
    """True once per accepted time step: a replayed (or older) code is refused."""
    return check_totp(user_id, code) == ACCEPTED


def start_setup(user_id: str, email: str) -> dict[str, str]:
    """A new secret to scan (kept pending, encrypted, until confirmed with a code)."""
    if has_totp(user_id):
        raise conflict("totp_already_enabled", "An authenticator app is already set up; an Admin reset or "
                                                "removing it first is needed to replace it.")
    secret = pyotp.random_base32(length=32)
    cls = _totp_state()
    cls(state_key(TOTP, user_id)).update(actions=[
        cls.pending_secret_enc.set(_encrypt(user_id, secret)),
        cls.pending_expires_at.set(int(clock.now()) + SETUP_TTL_SECONDS)])
    uri = pyotp.TOTP(secret, digits=DIGITS, interval=INTERVAL).provisioning_uri(name=email, issuer_name=ISSUER_NAME)
    return {"secret": secret, "otpauth_uri": uri, "digits": str(DIGITS), "period": str(INTERVAL),
            "qr_svg": qr_svg(uri)}


def qr_svg(uri: str) -> str:
    """The otpauth URI as a QR code (``segno``), an inline SVG of paths only (no text, no script, no style
    attribute), for the security settings page to show; error correction M, 4 px modules."""
    import segno  # noqa: PLC0415 - loaded when someone sets up an authenticator app

    return segno.make(uri, error="m").svg_inline(scale=4, border=4, dark="#000", light="#fff", title="QR code to scan")


def confirm_setup(user_id: str, code: str) -> list[str]:
    """Prove the pending secret with a current code; enable TOTP; return 10 new recovery codes."""
    cls = _totp_state()
    try:
        state = cls.get(state_key(TOTP, user_id), consistent_read=True)
    except DoesNotExist:
        state = None
    if state is None or not state.pending_secret_enc or (state.pending_expires_at or 0) < clock.now():
        raise ApiError(409, "totp_setup_not_started", "Start the authenticator setup first (it expires after 15 minutes).")
    step = _matching_step(_decrypt(user_id, state.pending_secret_enc), code, clock.now())
    if step is None:
        raise ApiError(400, "invalid_code", "The code is not valid for this authenticator; check the device clock.")
    try:
        cls(state_key(TOTP, user_id)).update(
            actions=[cls.last_step.set(step), cls.pending_secret_enc.remove(), cls.pending_expires_at.remove()],
            condition=cls.pending_secret_enc == state.pending_secret_enc)
    except UpdateError as err:
        if condition_failed(err):
            raise ApiError(409, "totp_setup_not_started", "The setup was replaced or already confirmed.") from None
        raise
    users_mod.users()(user_id).update(actions=[UserAttrs.totp_secret_enc.set(state.pending_secret_enc)])
    return regenerate_recovery_codes(user_id)


def remove(user_id: str) -> None:
    """Admin MFA reset: forget the authenticator and any setup in progress."""
    users_mod.users()(user_id).update(actions=[UserAttrs.totp_secret_enc.remove()])
    _totp_state()(state_key(TOTP, user_id)).delete()  # deleting an absent item is not an error in DynamoDB
