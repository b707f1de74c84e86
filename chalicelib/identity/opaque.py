"""Opaque one-time secrets (session ids, reset links, codes, refresh tokens): made here, stored hashed.

Only the SHA-256 digest of a secret is ever written to a table, so a leaked table gives no usable
session, link or token. Secrets are 256-bit URL-safe random strings; short numeric codes are salted
with the address they were sent to before hashing.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets


def new_secret(prefix: str = "") -> str:
    """A 256-bit random URL-safe secret, with an optional readable prefix (``rt_``...)."""
    return prefix + secrets.token_urlsafe(32)


def digest(value: str, *, salt: str = "") -> str:
    """Hex SHA-256 of ``salt`` + NUL + ``value`` (the salt ties a short code to its address)."""
    return hashlib.sha256(f"{salt}\x00{value}".encode()).hexdigest()


def numeric_code(digits: int) -> str:
    """A uniformly random code of ``digits`` decimal digits (leading zeros kept)."""
    return str(secrets.randbelow(10**digits)).zfill(digits)


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
