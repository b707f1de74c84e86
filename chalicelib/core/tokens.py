"""Access-token verification for every API call (DESIGN.md section 4, "Tokens").

RS256 only; ``iss`` = {auth_url}; ``aud`` = ``service-api``; ``kid`` looked up only among our own
published keys (the ``signing_keys`` table, the same source the JWKS endpoint serves). Verified tokens
are cached until they expire, so a repeated token costs a dictionary lookup.

Revocation is checked on every call, with no cache: one consistent ``BatchGetItem`` on the
``revoked_tokens`` table reads the markers that could refuse the token (``revocation_keys``): its own
``jti``, its session (``sid:<sid>``), its grant (``grant:<grant_id>``) and its user's revocation epochs
(``user:<sub>``). A revocation written by any process is therefore refused from the next request on.
Epochs: a user-wide counter (``epoch``, bumped by a password reset) and one per workspace
(``ws_<workspace_id>``, bumped by a workspace Admin's security action); a token carries the epochs
current at its issue (claim ``rev`` = [user, workspace]) and is refused once either has moved on.
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

from chalicelib.core import aws, clock
from chalicelib.core.authz import Principal
from chalicelib.core.config import AUDIENCE, settings
from chalicelib.core.errors import unauthorized
from chalicelib.core.models import BaseModel, global_model

ALGORITHM = "RS256"
KEYRING_REFRESH_SECONDS = 60
UNKNOWN_KID_REFRESH_SECONDS = 5
EPOCH_TTL_SECONDS = 100 * 24 * 3600  # longer than any token lifetime (90 days at most)
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


def revocation_keys(claims: dict[str, Any]) -> list[str]:
    """The ``revoked_tokens`` keys whose markers can refuse a token with these claims."""
    keys = [str(claims["jti"])]
    for prefix, claim in (("sid", "sid"), ("grant", "grant_id")):
        value = claims.get(claim)
        if isinstance(value, str) and value:
            keys.append(f"{prefix}:{value}")
    if claims.get("token_use") != "service":
        keys.append(f"user:{claims['sub']}")
    return keys


def _epochs_of(item: dict[str, Any] | None, workspace_id: str) -> list[int]:
    if not item:
        return [0, 0]
    return [int(item.get("epoch", {}).get("N", 0)), int(item.get(f"ws_{workspace_id}", {}).get("N", 0))]


def _table() -> str:
    return aws.table_name(RevokedTokenAttrs.TABLE)


def _ddb() -> Any:
    return aws.client("dynamodb", settings().global_region)


def current_epochs(user_id: str, workspace_id: str) -> list[int]:
    """The user's revocation epochs now ([user-wide, this workspace]); a new token carries them as ``rev``."""
    item = _ddb().get_item(TableName=_table(), Key={"jti": {"S": f"user:{user_id}"}}, ConsistentRead=True)
    return _epochs_of(item.get("Item"), workspace_id)


def bump_epoch(user_id: str, workspace_id: str | None = None) -> None:
    """Refuse every token of the user issued before now: all of them, or those of one workspace."""
    attr = "epoch" if workspace_id is None else f"ws_{workspace_id}"
    _ddb().update_item(TableName=_table(), Key={"jti": {"S": f"user:{user_id}"}},
                       UpdateExpression="ADD #e :one SET expires_at = :ttl",
                       ExpressionAttributeNames={"#e": attr},
                       ExpressionAttributeValues={":one": {"N": "1"},
                                                  ":ttl": {"N": str(int(clock.now()) + EPOCH_TTL_SECONDS)}})


def revoke_key(key: str, expires_at: float, reason: str) -> None:
    """Write a revocation marker (a jti, ``sid:<sid>`` or ``grant:<id>``) kept until ``expires_at`` (TTL)."""
    global_model(RevokedTokenAttrs)(key, expires_at=int(expires_at) + LEEWAY_SECONDS, reason=reason[:64]).save()


def is_revoked(key: str) -> bool:
    """Whether a live revocation marker exists for ``key`` (a jti, ``sid:<sid>`` or ``grant:<id>``)."""
    item = _ddb().get_item(TableName=_table(), Key={"jti": {"S": key}}, ConsistentRead=True).get("Item")
    return bool(item) and float(item.get("expires_at", {}).get("N", 0)) > clock.now()


class RevocationCheck:
    """Reads a token's revocation markers (one consistent ``BatchGetItem``, no cache)."""

    def revoked(self, claims: dict[str, Any]) -> bool:
        keys = revocation_keys(claims)
        table = _table()
        request: dict[str, Any] = {table: {"Keys": [{"jti": {"S": k}} for k in keys], "ConsistentRead": True}}
        found: dict[str, dict[str, Any]] = {}
        for _ in range(5):
            answer = _ddb().batch_get_item(RequestItems=request)
            for item in answer.get("Responses", {}).get(table, []):
                found[item["jti"]["S"]] = item
            request = answer.get("UnprocessedKeys") or {}
            if not request:
                break
        else:
            return True  # could not read every marker: refuse rather than guess
        now = clock.now()
        for key, item in found.items():
            if key.startswith("user:"):
                carried = list(claims.get("rev") or [0, 0]) + [0, 0]
                current = _epochs_of(item, str(claims.get("workspace_id", "")))
                if current[0] > int(carried[0]) or current[1] > int(carried[1]):
                    return True
            elif float(item.get("expires_at", {}).get("N", 0)) > now:
                return True
        return False


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

    def __init__(self, keyring: KeyRing | None = None, revocations: RevocationCheck | None = None) -> None:
        self.keyring = keyring or KeyRing()
        self.revocations = revocations or RevocationCheck()
        self._cache: OrderedDict[str, tuple[dict[str, Any], float]] = OrderedDict()
        self._headers: dict[str, str] = {}  # header segment -> kid (only well-formed RS256 headers)
        self._lock = threading.Lock()

    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token``; raises a 401 ``ApiError`` when it is not valid now."""
        now = clock.now()
        hit = self._cache.get(token)
        if hit is not None:
            claims, exp = hit
            if exp > now and not self.revocations.revoked(claims):
                return claims
            with self._lock:
                self._cache.pop(token, None)
            raise unauthorized("The access token has expired or was revoked.")
        claims = self._verify(token, now)
        if self.revocations.revoked(claims):
            raise unauthorized("The access token has been revoked.")
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
