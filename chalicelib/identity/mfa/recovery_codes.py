"""Single-use recovery codes, the fallback of the authenticator app.

10 codes of 10 characters (about 50 bits each) shown once, stored as SHA-256 digests salted with the
user id in a string set (``rc#<user_id>``); using one removes it with a conditional ``DELETE`` so each
works exactly once.
"""
from __future__ import annotations

import secrets

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import RECOVERY_CODES, RecoveryCodesAttrs, state_key
from chalicelib.identity.opaque import digest

CODES = 10
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"


def _rc() -> type[RecoveryCodesAttrs]:
    return global_model(RecoveryCodesAttrs)


def _rc_digest(user_id: str, code: str) -> str:
    return digest(code.replace("-", "").replace(" ", "").strip().lower(), salt=f"rc:{user_id}")


def _new_code() -> str:
    raw = "".join(secrets.choice(_ALPHABET) for _ in range(10))
    return f"{raw[:5]}-{raw[5:]}"


def regenerate_recovery_codes(user_id: str) -> list[str]:
    """Replace every recovery code with 10 new ones (shown once)."""
    codes = [_new_code() for _ in range(CODES)]
    _rc()(state_key(RECOVERY_CODES, user_id), codes={_rc_digest(user_id, c) for c in codes},
          created_at=int(clock.now())).save()
    return codes


def use_recovery_code(user_id: str, code: str) -> bool:
    """Consume one recovery code; True exactly once per code."""
    if not isinstance(code, str) or not 8 <= len(code) <= 16:
        return False
    h = _rc_digest(user_id, code)
    cls = _rc()
    try:
        cls(state_key(RECOVERY_CODES, user_id)).update(actions=[cls.codes.delete({h})], condition=cls.codes.contains(h))
    except UpdateError as err:
        if condition_failed(err):
            return False
        raise
    return True


def recovery_codes_left(user_id: str) -> int:
    try:
        return len(_rc().get(state_key(RECOVERY_CODES, user_id), consistent_read=True).codes or ())
    except DoesNotExist:
        return 0


def remove(user_id: str) -> None:
    """Admin MFA reset: delete every recovery code."""
    _rc()(state_key(RECOVERY_CODES, user_id)).delete()
