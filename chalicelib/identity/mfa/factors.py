"""The second factors, listed explicitly: which a user has, how a typed code is checked, and the Admin reset.

``FACTORS`` is the one list: each factor says whether a user has it and how an Admin reset removes it.
Passkeys are a first factor and are not listed (an Admin reset keeps them).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib.identity.mfa import recovery_codes, totp, webauthn


@dataclass(frozen=True)
class Factor:
    """A second factor: its name in ``methods``, "does this user have it?", and its Admin-reset cleanup."""

    name: str
    has: Callable[[str], bool]
    remove: Callable[[str], Any]
    also_offers: tuple[str, ...] = ()


FACTORS: tuple[Factor, ...] = (
    Factor("totp", totp.has_totp, totp.remove, also_offers=("recovery_code",)),
    Factor("webauthn", webauthn.has_security_key, webauthn.delete_security_keys),
)


def methods(user_id: str) -> list[str]:
    """The second-factor methods the user can answer now (``totp``, ``recovery_code``, ``webauthn``)."""
    out: list[str] = []
    for factor in FACTORS:
        if factor.has(user_id):
            out.append(factor.name)
            out.extend(factor.also_offers)
    return out


def has_second_factor(user_id: str) -> bool:
    return any(factor.has(user_id) for factor in FACTORS)


class CodeAlreadyUsed(Exception):
    """A right authenticator code of a time step that was already used: not a guess, not accepted."""


def verify_code(user_id: str, code: str) -> list[str] | None:
    """Check a TOTP or recovery code typed at the MFA step; the ``amr`` it adds, or None for a wrong
    code. Raises ``CodeAlreadyUsed`` for a reused authenticator code."""
    if not isinstance(code, str):
        return None
    code = code.strip()
    if len(code) == totp.DIGITS and code.isdigit():
        result = totp.check_totp(user_id, code)
        if result == totp.REUSED:
            raise CodeAlreadyUsed()
        return ["otp"] if result == totp.ACCEPTED else None
    return ["otp"] if recovery_codes.use_recovery_code(user_id, code) else None


def reset(user_id: str) -> None:
    """Admin MFA reset: remove the authenticator, the recovery codes and every security key."""
    for factor in FACTORS:
        factor.remove(user_id)
    recovery_codes.remove(user_id)
