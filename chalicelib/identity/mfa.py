"""Second factors: TOTP (pyotp) and single-use recovery codes; the registry of other factors.

TOTP: RFC 6238, SHA-1, 6 digits, 30-second steps, one step of drift either way. The secret is stored
KMS-encrypted in ``users.totp_secret_enc`` (global ``token-keys`` key, encryption context
``{"purpose": "totp", "user_id": ...}``). A code is accepted only for a time step later than the last
accepted one: the step is written with a conditional update (``totp#<user_id>`` item), so a code can
never be used twice, not even by two concurrent requests.

Recovery codes: 10 codes of 10 characters (about 50 bits each) shown once, stored as SHA-256 digests
salted with the user id in a string set (``rc#<user_id>``); using one removes it with a conditional
``DELETE`` so each works exactly once.

Other modules register further factors (``webauthn_creds`` registers WebAuthn security keys) in
``SECOND_FACTORS`` (name -> "does this user have it?") and cleanup functions in ``RESET_HOOKS``
(called by an Admin MFA reset).
"""
from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Callable
from typing import Any

import pyotp
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import aws, clock
from chalicelib.core.conditions import condition_failed
from chalicelib.core.config import settings
from chalicelib.core.errors import ApiError, conflict
from chalicelib.core.models import BaseModel, global_model
from chalicelib.identity import users as users_mod
from chalicelib.identity.opaque import digest

ISSUER_NAME = "AI Platform"
DIGITS = 6
INTERVAL = 30
DRIFT_STEPS = 1
RECOVERY_CODES = 10
_RC_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
SETUP_TTL_SECONDS = 15 * 60

# name -> predicate(user_id) "has this factor"; "totp" is ours, webauthn_creds adds "webauthn"
SECOND_FACTORS: dict[str, Callable[[str], bool]] = {}
# called with user_id by an Admin MFA reset (webauthn_creds deletes security keys here)
RESET_HOOKS: list[Callable[[str], Any]] = []


class TotpStateAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # totp#<user_id>
    last_step = NumberAttribute(null=True)
    pending_secret_enc = UnicodeAttribute(null=True)
    pending_expires_at = NumberAttribute(null=True)


class RecoveryCodesAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # rc#<user_id>
    codes = UnicodeSetAttribute(null=True)
    created_at = NumberAttribute(null=True)


def _totp_state() -> type[TotpStateAttrs]:
    return global_model(TotpStateAttrs)


def _rc() -> type[RecoveryCodesAttrs]:
    return global_model(RecoveryCodesAttrs)


def _kms() -> Any:
    return aws.client("kms", settings().global_region)


def _encrypt(user_id: str, secret: str) -> str:
    blob = _kms().encrypt(KeyId=aws.key_alias("token-keys"), Plaintext=secret.encode(),
                          EncryptionContext={"purpose": "totp", "user_id": user_id})["CiphertextBlob"]
    return base64.b64encode(blob).decode()


def _decrypt(user_id: str, enc: str) -> str:
    return _kms().decrypt(CiphertextBlob=base64.b64decode(enc),
                          EncryptionContext={"purpose": "totp", "user_id": user_id})["Plaintext"].decode()


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


def verify_totp(user_id: str, code: str) -> bool:
    """True once per accepted time step: a replayed (or older) code is refused."""
    user = users_mod.get_user(user_id)
    if user is None or not user.totp_secret_enc:
        return False
    step = _matching_step(_decrypt(user_id, user.totp_secret_enc), code, clock.now())
    if step is None:
        return False
    cls = _totp_state()
    try:
        cls(f"totp#{user_id}").update(actions=[cls.last_step.set(step)],
                                      condition=cls.last_step.does_not_exist() | (cls.last_step < step))
    except UpdateError as err:
        if condition_failed(err):
            return False
        raise
    return True


def start_setup(user_id: str, email: str) -> dict[str, str]:
    """A new secret to scan (kept pending, encrypted, until confirmed with a code)."""
    if has_totp(user_id):
        raise conflict("totp_already_enabled", "An authenticator app is already set up; an Admin reset or "
                                                "removing it first is needed to replace it.")
    secret = pyotp.random_base32(length=32)
    cls = _totp_state()
    cls(f"totp#{user_id}").update(actions=[
        cls.pending_secret_enc.set(_encrypt(user_id, secret)),
        cls.pending_expires_at.set(int(clock.now()) + SETUP_TTL_SECONDS)])
    uri = pyotp.TOTP(secret, digits=DIGITS, interval=INTERVAL).provisioning_uri(name=email, issuer_name=ISSUER_NAME)
    return {"secret": secret, "otpauth_uri": uri, "digits": str(DIGITS), "period": str(INTERVAL)}


def confirm_setup(user_id: str, code: str) -> list[str]:
    """Prove the pending secret with a current code; enable TOTP; return 10 new recovery codes."""
    cls = _totp_state()
    try:
        state = cls.get(f"totp#{user_id}", consistent_read=True)
    except DoesNotExist:
        state = None
    if state is None or not state.pending_secret_enc or (state.pending_expires_at or 0) < clock.now():
        raise ApiError(409, "totp_setup_not_started", "Start the authenticator setup first (it expires after 15 minutes).")
    step = _matching_step(_decrypt(user_id, state.pending_secret_enc), code, clock.now())
    if step is None:
        raise ApiError(400, "invalid_code", "The code is not valid for this authenticator; check the device clock.")
    try:
        cls(f"totp#{user_id}").update(
            actions=[cls.last_step.set(step), cls.pending_secret_enc.remove(), cls.pending_expires_at.remove()],
            condition=cls.pending_secret_enc == state.pending_secret_enc)
    except UpdateError as err:
        if condition_failed(err):
            raise ApiError(409, "totp_setup_not_started", "The setup was replaced or already confirmed.") from None
        raise
    users_mod.users()(user_id).update(actions=[users_mod.UserAttrs.totp_secret_enc.set(state.pending_secret_enc)])
    return regenerate_recovery_codes(user_id)


# --- recovery codes -------------------------------------------------------------------------------

def _rc_digest(user_id: str, code: str) -> str:
    return digest(code.replace("-", "").replace(" ", "").strip().lower(), salt=f"rc:{user_id}")


def _new_code() -> str:
    raw = "".join(secrets.choice(_RC_ALPHABET) for _ in range(10))
    return f"{raw[:5]}-{raw[5:]}"


def regenerate_recovery_codes(user_id: str) -> list[str]:
    """Replace every recovery code with 10 new ones (shown once)."""
    codes = [_new_code() for _ in range(RECOVERY_CODES)]
    _rc()(f"rc#{user_id}", codes={_rc_digest(user_id, c) for c in codes}, created_at=int(clock.now())).save()
    return codes


def use_recovery_code(user_id: str, code: str) -> bool:
    """Consume one recovery code; True exactly once per code."""
    if not isinstance(code, str) or not 8 <= len(code) <= 16:
        return False
    h = _rc_digest(user_id, code)
    cls = _rc()
    try:
        cls(f"rc#{user_id}").update(actions=[cls.codes.delete({h})], condition=cls.codes.contains(h))
    except UpdateError as err:
        if condition_failed(err):
            return False
        raise
    return True


def recovery_codes_left(user_id: str) -> int:
    try:
        return len(_rc().get(f"rc#{user_id}", consistent_read=True).codes or ())
    except DoesNotExist:
        return 0


# --- the second-factor registry ---------------------------------------------------------------------

SECOND_FACTORS["totp"] = has_totp


def methods(user_id: str) -> list[str]:
    """The second-factor methods the user can answer now (``totp``, ``recovery_code``, ``webauthn``...)."""
    out: list[str] = []
    for name, has in SECOND_FACTORS.items():
        if has(user_id):
            out.append(name)
            if name == "totp":
                out.append("recovery_code")
    return out


def has_second_factor(user_id: str) -> bool:
    return any(has(user_id) for has in SECOND_FACTORS.values())


def verify_code(user_id: str, code: str) -> list[str] | None:
    """Check a TOTP or recovery code typed at the MFA step; the ``amr`` it adds, or None."""
    if not isinstance(code, str):
        return None
    code = code.strip()
    if len(code) == DIGITS and code.isdigit():
        return ["otp"] if verify_totp(user_id, code) else None
    return ["otp"] if use_recovery_code(user_id, code) else None


def reset(user_id: str) -> None:
    """Admin MFA reset: remove the authenticator, the recovery codes and every registered factor."""
    users_mod.users()(user_id).update(actions=[users_mod.UserAttrs.totp_secret_enc.remove()])
    _totp_state()(f"totp#{user_id}").delete()  # deleting an absent item is not an error in DynamoDB
    _rc()(f"rc#{user_id}").delete()
    for hook in RESET_HOOKS:
        hook(user_id)

# webauthn_creds' WebAuthn security keys register themselves as the "webauthn" factor (and reset hook)
from chalicelib.identity import webauthn_creds as _webauthn_factor  # noqa: E402,F401
