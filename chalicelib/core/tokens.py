"""Access-token verification for every API call (DESIGN.md section 4, "Tokens").

RS256 only; ``iss`` = {auth_url}; ``aud`` = ``service-api``; ``kid`` looked up only among our own
published keys (the ``signing_keys`` table, the same source the JWKS endpoint serves). Verified tokens
are cached until they expire, so a repeated token costs a dictionary lookup; revocations are picked up
from the ``revoked_tokens`` table at most ``REVOCATION_REFRESH_SECONDS`` late.
"""
from __future__ import annotations

import base64
import json
import re
import threading
from collections import OrderedDict
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from jose import jwk
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


_JWS_COMPACT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
_PKCS1 = padding.PKCS1v15()
_SHA256 = hashes.SHA256()


def _b64url(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _claims_valid(c: dict[str, Any], now: float) -> bool:
    """Issuer, audience, lifetime (platform clock) and the claims every access token carries."""
    aud = c.get("aud")
    exp, iat, nbf = c.get("exp"), c.get("iat"), c.get("nbf", c.get("iat"))
    return (
        c.get("iss") == settings().issuer
        and (aud == AUDIENCE or (isinstance(aud, list) and AUDIENCE in aud))
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (exp, iat, nbf))
        and exp > now
        and iat <= now + LEEWAY_SECONDS
        and nbf <= now + LEEWAY_SECONDS
        and isinstance(c.get("sub"), str) and isinstance(c.get("jti"), str)
        and isinstance(c.get("workspace_id"), str) and isinstance(c.get("roles"), list)
    )


class TokenVerifier:
    """Verifies access tokens into ``Principal``s; every refusal is the same 401 problem."""

    def __init__(self, keyring: KeyRing | None = None, revocations: RevocationList | None = None) -> None:
        self.keyring = keyring or KeyRing()
        self.revocations = revocations or RevocationList()
        self._cache: OrderedDict[str, tuple[dict[str, Any], float]] = OrderedDict()
        self._headers: dict[str, str] = {}  # header segment -> kid (only well-formed RS256 headers)
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
        if not isinstance(token, str) or len(token) > 8192 or not _JWS_COMPACT.match(token):
            raise unauthorized("The access token is malformed.")
        header_b64, payload_b64, signature_b64 = token.split(".")
        kid = self._kid_of(header_b64)
        key = self.keyring.key(kid) if isinstance(kid, str) else None
        if key is None:
            raise unauthorized("The access token was not signed by a key of this issuer.")
        try:
            # RSASSA-PKCS1-v1_5 with SHA-256 over the exact signing input, with the RSA public key python-jose
            # built from our JWK (calling it directly avoids re-parsing the token: see README, "Tokens").
            key.prepared_key.verify(_b64url(signature_b64), f"{header_b64}.{payload_b64}".encode("ascii"),
                                    _PKCS1, _SHA256)
            claims = json.loads(_b64url(payload_b64))
        except (InvalidSignature, ValueError):
            raise unauthorized("The access token is not valid.") from None
        if not isinstance(claims, dict) or not _claims_valid(claims, now):
            raise unauthorized("The access token is expired, not yet valid, or not for this service.")
        if self.revocations.contains(claims["jti"]):
            raise unauthorized("The access token has been revoked.")
        return claims

    def _kid_of(self, header_b64: str) -> Any:
        """The ``kid`` of an RS256 header; every token of one key shares its header, so it is parsed once."""
        kid = self._headers.get(header_b64)
        if kid is None:
            try:
                header = json.loads(_b64url(header_b64))
            except ValueError:
                raise unauthorized("The access token is malformed.") from None
            if not isinstance(header, dict) or header.get("alg") != ALGORITHM:
                raise unauthorized("The access token must be signed with RS256.")
            kid = header.get("kid")
            if isinstance(kid, str) and len(self._headers) < 64:
                self._headers[header_b64] = kid
        return kid

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
