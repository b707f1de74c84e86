"""Access-token verification for every API call (DESIGN.md section 4, "Tokens").

RS256 only; ``iss`` = {auth_url}; ``aud`` = ``service-api``; ``kid`` looked up only among our own
published keys (the ``signing_keys`` table, the same source the JWKS endpoint serves). Verified tokens
are cached until they expire, so a repeated token costs a dictionary lookup; revocations are picked up
from the ``revoked_tokens`` table at most ``REVOCATION_REFRESH_SECONDS`` late.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from jose import jwk, jwt
from jose.exceptions import JOSEError
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from chalicelib.core import clock
from chalicelib.core.authz import Principal
from chalicelib.core.config import AUDIENCE, settings
from chalicelib.core.errors import unauthorized
from chalicelib.core.models import BaseModel, global_model

ALGORITHM = "RS256"
KEYRING_REFRESH_SECONDS = 60
UNKNOWN_KID_REFRESH_SECONDS = 5
REVOCATION_REFRESH_SECONDS = 30
CACHE_SIZE = 10_000
LEEWAY_SECONDS = 30


class SigningKeyAttrs(BaseModel):
    """A token signing key. ``private_blob`` is the PEM encrypted under the ``token-keys`` KMS key."""

    TABLE = "signing_keys"
    kid = UnicodeAttribute(hash_key=True)
    status = UnicodeAttribute()  # active | retiring | retired
    public_jwk = UnicodeAttribute()  # JSON
    private_blob = UnicodeAttribute()  # base64 KMS ciphertext
    created_at = NumberAttribute()
    retire_at = NumberAttribute(null=True)  # published until then (covers every token it signed)


class RevokedTokenAttrs(BaseModel):
    TABLE = "revoked_tokens"
    jti = UnicodeAttribute(hash_key=True)
    expires_at = NumberAttribute()  # TTL: the revoked token's own expiry
    reason = UnicodeAttribute(null=True)


def published(key: Any, now: float) -> bool:
    """A key is published (in JWKS, accepted for verification) while active or not yet retired."""
    if key.status == "active":
        return True
    return key.status == "retiring" and key.retire_at is not None and key.retire_at > now


class KeyRing:
    """Our published public keys, by ``kid``; refreshed periodically and on an unknown ``kid``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, tuple[Any, float | None]] = {}  # kid -> (jose Key, retire_at)
        self._jwks: list[dict[str, Any]] = []
        self._loaded_at = -1e18
        self._last_forced = -1e18

    def _load(self) -> None:
        import json

        now = clock.now()
        keys: dict[str, tuple[Any, float | None]] = {}
        jwks: list[dict[str, Any]] = []
        for item in global_model(SigningKeyAttrs).scan():
            if not published(item, now):
                continue
            public = json.loads(item.public_jwk)
            keys[item.kid] = (jwk.construct(public, ALGORITHM), item.retire_at)
            jwks.append(public)
        jwks.sort(key=lambda k: k["kid"])
        self._keys, self._jwks, self._loaded_at = keys, jwks, now

    def _fresh(self) -> None:
        if clock.now() - self._loaded_at > KEYRING_REFRESH_SECONDS:
            with self._lock:
                if clock.now() - self._loaded_at > KEYRING_REFRESH_SECONDS:
                    self._load()

    def key(self, kid: str) -> Any | None:
        self._fresh()
        entry = self._keys.get(kid)
        if entry is None and clock.now() - self._last_forced > UNKNOWN_KID_REFRESH_SECONDS:
            with self._lock:
                self._last_forced = clock.now()
                self._load()
            entry = self._keys.get(kid)
        if entry is None:
            return None
        key, retire_at = entry
        if retire_at is not None and retire_at <= clock.now():
            return None
        return key

    def jwks(self) -> list[dict[str, Any]]:
        self._fresh()
        return [k for k in self._jwks if self.key(k["kid"]) is not None]

    def invalidate(self) -> None:
        with self._lock:
            self._loaded_at = -1e18


class RevocationList:
    """Ids of revoked, unexpired tokens, re-read from the table every ``REVOCATION_REFRESH_SECONDS``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: frozenset[str] = frozenset()
        self._loaded_at = -1e18

    def contains(self, jti: str) -> bool:
        if clock.now() - self._loaded_at > REVOCATION_REFRESH_SECONDS:
            with self._lock:
                if clock.now() - self._loaded_at > REVOCATION_REFRESH_SECONDS:
                    now = clock.now()
                    self._ids = frozenset(
                        r.jti for r in global_model(RevokedTokenAttrs).scan() if r.expires_at > now
                    )
                    self._loaded_at = now
        return jti in self._ids

    def invalidate(self) -> None:
        with self._lock:
            self._loaded_at = -1e18


class TokenVerifier:
    """Verifies access tokens into ``Principal``s; every refusal is the same 401 problem."""

    def __init__(self, keyring: KeyRing | None = None, revocations: RevocationList | None = None) -> None:
        self.keyring = keyring or KeyRing()
        self.revocations = revocations or RevocationList()
        self._cache: OrderedDict[str, tuple[dict[str, Any], float]] = OrderedDict()
        self._lock = threading.Lock()

    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token``; raises a 401 ``ApiError`` when it is not valid now."""
        now = clock.now()
        hit = self._cache.get(token)
        if hit is not None:
            claims, exp = hit
            if exp > now and not self.revocations.contains(claims.get("jti", "")):
                return claims
            with self._lock:
                self._cache.pop(token, None)
            raise unauthorized("The access token has expired or was revoked.")
        claims = self._verify(token, now)
        with self._lock:
            self._cache[token] = (claims, float(claims["exp"]))
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return claims

    def _verify(self, token: str, now: float) -> dict[str, Any]:
        if not isinstance(token, str) or token.count(".") != 2 or len(token) > 8192:
            raise unauthorized("The access token is malformed.")
        try:
            header = jwt.get_unverified_header(token)
        except JOSEError:
            raise unauthorized("The access token is malformed.") from None
        if header.get("alg") != ALGORITHM:
            raise unauthorized("The access token must be signed with RS256.")
        kid = header.get("kid")
        key = self.keyring.key(kid) if isinstance(kid, str) else None
        if key is None:
            raise unauthorized("The access token was not signed by a key of this issuer.")
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=settings().issuer,
                # expiry is checked below against the platform clock, which tests can move
                options={"verify_exp": False, "verify_at_hash": False, "require_exp": True,
                         "require_iat": True, "require_sub": True, "require_jti": True},
            )
        except JOSEError:
            raise unauthorized("The access token is not valid.") from None
        if not isinstance(claims["exp"], (int, float)) or not isinstance(claims["iat"], (int, float)):
            raise unauthorized("The access token is not valid.")
        if float(claims["exp"]) <= now or float(claims["iat"]) > now + LEEWAY_SECONDS:
            raise unauthorized("The access token has expired.")
        if not isinstance(claims.get("workspace_id"), str) or not isinstance(claims.get("roles"), list):
            raise unauthorized("The access token lacks workspace claims.")
        if self.revocations.contains(claims["jti"]):
            raise unauthorized("The access token has been revoked.")
        return claims

    def principal(self, token: str) -> Principal:
        c = self.claims(token)
        return Principal(
            user_id=c["sub"],
            workspace_id=c["workspace_id"],
            roles=tuple(c["roles"]),
            email=c.get("email", ""),
            amr=tuple(c.get("amr", ())),
            token_id=c["jti"],
            claims=c,
        )

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
        self.keyring.invalidate()
        self.revocations.invalidate()


_verifier: TokenVerifier | None = None


def verifier() -> TokenVerifier:
    """The process-wide verifier (keys and cache live as long as the Lambda container)."""
    global _verifier
    if _verifier is None:
        _verifier = TokenVerifier()
    return _verifier


def bearer(authorization: str | None) -> str:
    """The token from an ``Authorization: Bearer`` header, or a 401."""
    if not authorization:
        raise unauthorized("A Bearer access token is required.")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("The Authorization header must be 'Bearer <token>'.")
    return token.strip()
