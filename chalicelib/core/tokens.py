"""Access-token verification for every API call (DESIGN.md section 4, "Tokens").

RS256 only; ``iss`` = {auth_url}; ``aud`` = ``service-api`` (the MCP endpoint's verifier: an MCP resource,
``core.tokens``, "audiences"); ``kid`` looked up only among our own
published keys (the ``signing_keys`` table, the same source the JWKS endpoint serves). Verified tokens
are cached until they expire, so a repeated token costs a dictionary lookup.

Revocation (``RevocationCheck``): markers in the ``revoked_tokens`` table refuse a token by its ``jti``,
its session (``sid:<sid>``) or its grant (``grant:<grant_id>``), and its user's item (``user:<sub>``)
holds the revocation epochs and the time of the user's latest marker. Every revocation also records its
time in one bucket (a hash of the user, or of a service token's jti) of the revocation watermark item;
a container reads that one item per ``REVOCATION_CACHE_SECONDS`` for every user, and reads a user's own
items only when the user's bucket moved around or after the token's issue. A revocation written in
this container applies from the next request, one written in another container within that bound
(docs/security.md, "Revocation cache").
Epochs: a user-wide counter (``epoch``, bumped by a password reset) and one per workspace
(``ws_<workspace_id>``, bumped by a workspace Admin's security action); a token carries the epochs
current at its issue (claim ``rev`` = [user, workspace]) and is refused once either has moved on.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import threading
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from jose import jwk
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from chalicelib.core import aws, clock, process_state
from chalicelib.core.authz import Principal
from chalicelib.core.config import AUDIENCE, settings
from chalicelib.core.http.errors import unauthorized
from chalicelib.core.regions import OPEN_REGIONS, endpoints
from chalicelib.core.store.tables import BaseModel, global_model

ALGORITHM = "RS256"
KEYRING_REFRESH_SECONDS = 60
UNKNOWN_KID_REFRESH_SECONDS = 5
EPOCH_TTL_SECONDS = 100 * 24 * 3600  # longer than any token lifetime (90 days at most)
CACHE_SIZE = 10_000
LEEWAY_SECONDS = 30
# How long a container trusts a revocation marker or epoch it has read: the staleness bound for a
# revocation written in another container (docs/security.md, "Revocation cache").
REVOCATION_CACHE_SECONDS = 5.0
# The revocation watermark: one item of ``revoked_tokens`` whose attribute ``b<bucket>`` holds the time of
# the latest revocation of a subject hashing into that bucket. 4,096 buckets keep the item under 60 KB and
# make an unrelated revocation share a user's bucket rarely (one in 4,096 per revocation).
WATERMARK_KEY = "watermark:revocations"
WATERMARK_BUCKETS = 4096


# --- audiences: who a token is for (RFC 8707 resource indicators, RFC 9068 ``aud``) --------------------
# Two kinds of protected resource accept the platform's access tokens, and neither accepts the other's (no
# token passthrough, docs/security.md "Token audiences"): ``service-api`` (the platform API, the gateway's
# REST and GraphQL routes, userinfo, introspection, token exchange: every token issued without ``resource``)
# and the MCP resource of each regional gateway, ``{gateway_url}/mcp``, accepted only by the MCP endpoint. A
# regional MCP endpoint verifies a token issued for any region's MCP resource, so that another region's
# workspace is answered 421 with its address (as REST does), and acts only on tokens for its own resource.

MCP_PATH = "/mcp"


def mcp_resource() -> str:
    """This deployment's MCP resource identifier (its canonical URL)."""
    return settings().gateway_url + MCP_PATH


@process_state.cached(maxsize=8, derived=True)
def _mcp_resources(gateway_url: str, regional_urls: str) -> frozenset[str]:
    json.loads(regional_urls or "{}")  # the cache key; endpoints() reads the same setting
    return frozenset({gateway_url + MCP_PATH} | {endpoints(r)["gateway_url"] + MCP_PATH for r in OPEN_REGIONS})


def mcp_resources() -> frozenset[str]:
    """Every region's MCP resource: the values the identity service accepts as ``resource``."""
    s = settings()
    return _mcp_resources(s.gateway_url, s.regional_urls)


@dataclass(frozen=True)
class Audience:
    """Which ``aud`` values a surface verifies, and which one it acts on (``home``)."""

    name: str

    def accepts(self, aud: Any) -> bool:
        if self.name == API.name:
            return aud == AUDIENCE or (isinstance(aud, list) and AUDIENCE in aud)
        return isinstance(aud, str) and aud in mcp_resources()

    def home(self) -> str:
        return AUDIENCE if self.name == API.name else mcp_resource()

    def is_home(self, aud: Any) -> bool:
        home = self.home()
        return aud == home or (self.name == API.name and isinstance(aud, list) and home in aud)


API = Audience("service-api")
MCP = Audience("mcp")


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

    def prime(self) -> None:
        """Read the keys now when the next lookup would."""
        self._fresh()

    def key(self, kid: str) -> Any | None:
        now = clock.now()
        if now - self._loaded_at > KEYRING_REFRESH_SECONDS:
            self._fresh()
        entry = self._keys.get(kid)
        if entry is None and now - self._last_forced > UNKNOWN_KID_REFRESH_SECONDS:
            with self._lock:
                self._last_forced = now
                self._load()
            entry = self._keys.get(kid)
        if entry is None:
            return None
        key, retire_at = entry
        if retire_at is not None and retire_at <= now:
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


# Bumped by every revocation written in this process (this Lambda container): each ``RevocationCheck``
# drops what it has cached when it sees a new value, so a local revocation applies from the next request.
_generation = 0


def _note_local_revocation() -> None:
    global _generation
    _generation += 1


def current_epochs(user_id: str, workspace_id: str) -> list[int]:
    """The user's revocation epochs now ([user-wide, this workspace]); a new token carries them as ``rev``."""
    item = _ddb().get_item(TableName=_table(), Key={"jti": {"S": f"user:{user_id}"}}, ConsistentRead=True)
    return _epochs_of(item.get("Item"), workspace_id)


def bucket_of(subject: str) -> str:
    """The watermark attribute of a revocation subject (a user id, or ``jti:<jti>`` for a service token)."""
    digest = hashlib.sha256(subject.encode("utf-8")).digest()
    return "b%03x" % (int.from_bytes(digest[:2], "big") % WATERMARK_BUCKETS)


def _user_update(user_id: str, expression: str, names: dict[str, str], values: dict[str, Any]) -> dict[str, Any]:
    """The update of the user's epochs item (``user:<sub>``), kept past every token's lifetime."""
    return {"TableName": _table(), "Key": {"jti": {"S": f"user:{user_id}"}}, "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {**values, ":ttl": {"N": str(int(clock.now()) + EPOCH_TTL_SECONDS)}}}


def _watermark_update(subject: str, now: int) -> dict[str, Any]:
    return {"TableName": _table(), "Key": {"jti": {"S": WATERMARK_KEY}}, "UpdateExpression": "SET #b = :now",
            "ExpressionAttributeNames": {"#b": bucket_of(subject)},
            "ExpressionAttributeValues": {":now": {"N": str(now)}}}


def _write_revocation(items: list[dict[str, Any]]) -> None:
    """Write a revocation and its watermark bucket in one transaction (all or nothing: a verifier that
    sees the bucket moved also finds what moved it), then clear this container's revocation state."""
    _ddb().transact_write_items(TransactItems=items)
    _note_local_revocation()


def bump_epoch(user_id: str, workspace_id: str | None = None) -> None:
    """Refuse every token of the user issued before now: all of them, or those of one workspace."""
    attr = "epoch" if workspace_id is None else f"ws_{workspace_id}"
    now = math.ceil(clock.now())
    _write_revocation([
        {"Update": _user_update(user_id, "ADD #e :one SET expires_at = :ttl", {"#e": attr}, {":one": {"N": "1"}})},
        {"Update": _watermark_update(user_id, now)},
    ])


def revoke_key(key: str, expires_at: float, reason: str, user_id: str | None) -> None:
    """Write a revocation marker (a jti, ``sid:<sid>`` or ``grant:<id>``) kept until ``expires_at`` (TTL).

    ``user_id`` is the user whose tokens the marker refuses (None only for a service token's jti): the
    user's item records the time of their latest marker (``mrev``), and a verifier looks markers up only
    for a token issued less than ``LEEWAY_SECONDS`` before that time (see docs/security.md, "Revocation
    cache"). The marker, ``mrev`` and the watermark bucket are written in one transaction.
    """
    now = math.ceil(clock.now())
    marker = {"jti": {"S": key}, "expires_at": {"N": str(int(expires_at) + LEEWAY_SECONDS)},
              "reason": {"S": reason[:64]}}
    items: list[dict[str, Any]] = [{"Put": {"TableName": _table(), "Item": marker}}]
    if user_id is not None:
        items.append({"Update": _user_update(user_id, "SET #m = :now, expires_at = :ttl", {"#m": "mrev"},
                                             {":now": {"N": str(now)}})})
    items.append({"Update": _watermark_update(user_id if user_id is not None else f"jti:{key}", now)})
    _write_revocation(items)


def is_revoked(key: str) -> bool:
    """Whether a live revocation marker exists for ``key`` (a jti, ``sid:<sid>`` or ``grant:<id>``)."""
    item = _ddb().get_item(TableName=_table(), Key={"jti": {"S": key}}, ConsistentRead=True).get("Item")
    return bool(item) and float(item.get("expires_at", {}).get("N", 0)) > clock.now()


REVOKED = float("-inf")


class RevocationCheck:
    """Whether a token was revoked, from the revocation watermark and the items it points at.

    The watermark (one item: ``b<bucket>`` -> time of the bucket's latest revocation) is read with one
    consistent ``GetItem`` and trusted for ``ttl`` seconds, for every user. A token whose subject's bucket
    last moved more than ``LEEWAY_SECONDS`` before the token's issue cannot have been revoked since
    (every revocation moves its bucket in the same transaction): no further read. Otherwise the subject's
    items are read (one consistent ``BatchGetItem``): a user's epochs and ``mrev``, then the token's
    markers when ``mrev`` says one was written around or after its issue; a service token's jti marker.
    An item read is trusted for ``ttl`` seconds, and after that for as long as its bucket has not moved
    since it was read (less ``LEEWAY_SECONDS``). A revocation written by another container is refused
    here at most ``ttl`` seconds later; one written in this process clears every cache at once
    (``_generation``).
    """

    def __init__(self, ttl: float = REVOCATION_CACHE_SECONDS) -> None:
        self.ttl = ttl
        # key -> (read at, state): a user's (epoch, {workspace: epoch}, mrev), a marker's expires_at
        self._items: dict[str, tuple[float, Any]] = {}
        self._buckets: dict[str, float] = {}  # the watermark: bucket -> time of its latest revocation
        self._watermark_until = -1e18
        self._seen = _generation
        self.reads = 0  # GetItem and BatchGetItem calls made (tests count them)

    def clear(self) -> None:
        self._items.clear()
        self._buckets = {}
        self._watermark_until = -1e18

    def revoked(self, claims: dict[str, Any]) -> bool:
        return self.valid_until(claims) == REVOKED

    def valid_until(self, claims: dict[str, Any], now: float | None = None) -> float:
        """Until when (platform clock) the token counts as not revoked, or ``REVOKED``."""
        if self._seen != _generation:
            self.clear()
            self._seen = _generation
        if now is None:
            now = clock.now()
        if self._watermark_until <= now:
            self._read_watermark(now)
        until = self._watermark_until
        service = claims.get("token_use") == "service"
        bucket = bucket_of("jti:" + str(claims["jti"]) if service else str(claims["sub"]))
        moved = self._buckets.get(bucket, 0.0)
        if moved < float(claims["iat"]) - LEEWAY_SECONDS:
            return until  # nothing revoked for this subject since well before the token's issue
        if service:
            return min(until, self._markers([str(claims["jti"])], bucket, now))
        user_key = "user:" + str(claims["sub"])
        if not self._fresh(user_key, bucket, now) and not self._read([user_key], now):
            return REVOKED
        epoch, per_workspace, mrev = self._items[user_key][1]
        carried = claims.get("rev") or (0, 0)
        if epoch > int(carried[0]) or per_workspace.get(claims.get("workspace_id"), 0) > int(carried[1]):
            return REVOKED
        if mrev and mrev >= float(claims["iat"]) - LEEWAY_SECONDS:
            return min(until, self._markers([k for k in revocation_keys(claims) if k != user_key], bucket, now))
        return until

    def _fresh(self, key: str, bucket: str, now: float) -> bool:
        """Whether the cached item of ``key`` may be used: read less than ``ttl`` ago, or read well after
        its bucket last moved (the bucket is the watermark's, itself at most ``ttl`` old)."""
        hit = self._items.get(key)
        if hit is None:
            return False
        read_at = hit[0]
        return now < read_at + self.ttl or self._buckets.get(bucket, 0.0) < read_at - LEEWAY_SECONDS

    def _markers(self, keys: list[str], bucket: str, now: float) -> float:
        """``REVOKED`` when a live marker exists for one of ``keys``, else until when that is known."""
        stale = [k for k in keys if not self._fresh(k, bucket, now)]
        if stale and not self._read(stale, now):
            return REVOKED
        for key in keys:
            if self._items[key][1] > now:
                return REVOKED
        return self._watermark_until

    def prime(self) -> None:
        """Read the watermark now when the next check would."""
        now = clock.now()
        if self.watermark_due(now):
            self._read_watermark(now)

    def watermark_due(self, now: float) -> bool:
        """Whether the next check reads the watermark (so a caller about to read the table anyway can
        fetch it in the same request: ``take_watermark``)."""
        return self._seen != _generation or self._watermark_until <= now

    def take_watermark(self, item: dict[str, Any] | None, now: float) -> None:
        """The watermark item as a consistent read made ``now`` found it (``core.tenancy.begin_request``
        reads it with the request's scope): the same as the check's own read."""
        if self._seen != _generation:
            self.clear()
            self._seen = _generation
        self.reads += 1
        self._take(item or {}, now)

    def _read_watermark(self, now: float) -> None:
        self.reads += 1
        item = _ddb().get_item(TableName=_table(), Key={"jti": {"S": WATERMARK_KEY}},
                               ConsistentRead=True).get("Item") or {}
        self._take(item, now)

    def _take(self, item: dict[str, Any], now: float) -> None:
        self._buckets = {name: float(value["N"]) for name, value in item.items() if name != "jti" and "N" in value}
        self._watermark_until = now + self.ttl

    def _read(self, keys: list[str], now: float) -> bool:
        """Read ``keys`` with consistent ``BatchGetItem`` calls into the cache; False when DynamoDB would not
        answer every key (the caller refuses rather than guesses)."""
        table = _table()
        request: dict[str, Any] = {table: {"Keys": [{"jti": {"S": k}} for k in keys], "ConsistentRead": True}}
        got: dict[str, dict[str, Any]] = {}
        for _ in range(5):
            self.reads += 1
            answer = _ddb().batch_get_item(RequestItems=request)
            for item in answer.get("Responses", {}).get(table, []):
                got[item["jti"]["S"]] = item
            request = answer.get("UnprocessedKeys") or {}
            if not request:
                break
        else:
            return False
        if len(self._items) > CACHE_SIZE:
            self._items.clear()
        for key in keys:
            self._items[key] = (now, _state_of(key, got.get(key)))
        return True


def _state_of(key: str, item: dict[str, Any] | None) -> Any:
    """What the check needs of a ``revoked_tokens`` item: a user's epochs and ``mrev``, a marker's expiry."""
    item = item or {}
    if key.startswith("user:"):
        per_workspace = {name[3:]: int(value["N"]) for name, value in item.items() if name.startswith("ws_")}
        return int(item.get("epoch", {}).get("N", 0)), per_workspace, float(item.get("mrev", {}).get("N", 0))
    return float(item.get("expires_at", {}).get("N", 0))


_BASE64URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_PKCS1 = padding.PKCS1v15()
_SHA256 = hashes.SHA256()


_URL_TO_STD = bytes.maketrans(b"-_", b"+/")
_JSON = json.JSONDecoder()


def _b64url(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _b64url_raw(segment: bytes) -> bytes:
    """A base64url segment already checked to hold only the alphabet (no ``=``): the same decoding as
    ``_b64url`` without its str round trips. Surplus padding after the last quantum is ignored, and a
    segment whose length leaves one character over is an error (``binascii.Error``, a ``ValueError``)."""
    return binascii.a2b_base64(segment.translate(_URL_TO_STD) + b"==")


def _json_object(payload: bytes) -> Any:
    """The JSON document ``payload`` (UTF-8 only, as RFC 7519 requires; nothing before or after it):
    ``json.loads`` without its encoding sniffing and whitespace scans. ``ValueError`` when it is not one."""
    text = payload.decode("utf-8")
    value, end = _JSON.raw_decode(text)
    if end != len(text):
        raise ValueError("trailing data after the JSON document")
    return value


_NUMBER = (int, float)
ACCESS_TOKEN_TYPES = ("at+jwt", "application/at+jwt")  # RFC 9068 section 2.1, compared case-insensitively


def _claims_valid(c: dict[str, Any], now: float, audience: Audience = API) -> bool:
    """Issuer, audience, lifetime (platform clock) and the claims every access token carries."""
    exp: Any = c.get("exp")
    iat: Any = c.get("iat")
    nbf: Any = c.get("nbf", iat)
    if not (type(exp) in _NUMBER and type(iat) in _NUMBER and type(nbf) in _NUMBER):  # not bool, not str
        return False
    return (
        c.get("iss") == settings().issuer
        and audience.accepts(c.get("aud"))
        and exp > now
        and iat <= now + LEEWAY_SECONDS
        and nbf <= now + LEEWAY_SECONDS
        and isinstance(c.get("sub"), str) and isinstance(c.get("jti"), str)
        and isinstance(c.get("workspace_id"), str) and isinstance(c.get("roles"), list)
    )


class TokenVerifier:
    """Verifies access tokens into ``Principal``s; every refusal is the same 401 problem."""

    def __init__(self, keyring: KeyRing | None = None, revocations: RevocationCheck | None = None,
                 audience: Audience = API) -> None:
        self.audience = audience  # the ``aud`` values this verifier accepts
        self.keyring = keyring or KeyRing()
        self.revocations = revocations or RevocationCheck()
        # token -> (claims, exp, until when it counts as not revoked, local revocation generation then)
        self._cache: dict[str, tuple[dict[str, Any], float, float, int]] = {}
        self._headers: dict[str, str] = {}  # header segment -> kid (only well-formed RS256 headers)
        self._lock = threading.Lock()

    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token``; raises a 401 ``ApiError`` when it is not valid now."""
        hit = self._cache.get(token)
        if hit is not None:
            claims, exp, until, generation = hit
            if generation == _generation and clock.now() < until:
                return claims  # signature, lifetime and revocation all known good until ``until``
            until = self.revocations.valid_until(claims) if exp > clock.now() else REVOKED
            if until == REVOKED:
                self._cache.pop(token, None)
                raise unauthorized("The access token has expired or was revoked.")
            self._cache[token] = (claims, exp, min(until, exp), _generation)
            return claims
        now = clock.now()
        claims = self._verify(token, now)
        until = self.revocations.valid_until(claims, now)
        if until == REVOKED:
            raise unauthorized("The access token has been revoked.")
        exp = claims["exp"]
        if len(self._cache) >= CACHE_SIZE:
            with self._lock:
                for oldest in list(self._cache)[:CACHE_SIZE // 10]:  # drop the oldest tenth
                    self._cache.pop(oldest, None)
        self._cache[token] = (claims, exp, until if until < exp else exp, _generation)
        return claims

    def known(self, token: str) -> dict[str, Any] | None:
        """The claims of a token this verifier already verified and has not seen expire or revoked (no
        check made now: ``claims`` still decides), else None."""
        hit = self._cache.get(token)
        return hit[0] if hit is not None and hit[1] > clock.now() else None

    def _verify(self, token: str, now: float) -> dict[str, Any]:
        # Compact JWS: three non-empty base64url segments (deleting the alphabet must leave exactly two dots).
        if not isinstance(token, str) or len(token) > 8192 or not token.isascii():
            raise unauthorized("The access token is malformed.")
        raw = token.encode("ascii")
        if raw.translate(None, _BASE64URL) != b"..":
            raise unauthorized("The access token is malformed.")
        dot1 = raw.index(b".")  # the segments by offset: no copies of the whole token
        dot2 = raw.index(b".", dot1 + 1)
        if dot1 == 0 or dot2 == dot1 + 1 or dot2 == len(raw) - 1:
            raise unauthorized("The access token is malformed.")
        kid = self._kid_of(token[:dot1])
        key = self.keyring.key(kid) if isinstance(kid, str) else None
        if key is None:
            raise unauthorized("The access token was not signed by a key of this issuer.")
        try:
            # RSASSA-PKCS1-v1_5 with SHA-256 over the exact signing input, with the RSA public key python-jose
            # built from our JWK (calling it directly avoids re-parsing the token: docs/security.md, "Tokens").
            key.prepared_key.verify(_b64url_raw(raw[dot2 + 1:]), raw[:dot2], _PKCS1, _SHA256)
            claims = _json_object(_b64url_raw(raw[dot1 + 1:dot2]))
        except (InvalidSignature, ValueError):
            raise unauthorized("The access token is not valid.") from None
        if not isinstance(claims, dict) or not _claims_valid(claims, now, self.audience):
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
            if not isinstance(header.get("typ"), str) or header["typ"].lower() not in ACCESS_TOKEN_TYPES:
                # RFC 9068 section 4: an ID token (``typ: JWT``) or any other JWT is not an access token
                raise unauthorized("The token is not an access token (typ must be at+jwt).")
            kid = header.get("kid")
            if isinstance(kid, str) and len(self._headers) < 64:
                self._headers[header_b64] = kid
        return kid

    def prime(self) -> None:
        """Read now what the next verification would read first: the keys and the revocation watermark."""
        self.keyring.prime()
        self.revocations.prime()

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
        self.revocations.clear()


_verifier: TokenVerifier | None = None
_others: dict[str, TokenVerifier] = {}  # audience name -> verifier sharing ``_verifier``'s keys and revocations


def verifier(audience: Audience = API) -> TokenVerifier:
    """The process-wide verifier of ``audience`` (keys and cache live as long as the Lambda container)."""
    global _verifier
    if _verifier is None:
        _verifier = TokenVerifier()
    if audience == API:
        return _verifier
    other = _others.get(audience.name)
    if other is None or other.keyring is not _verifier.keyring:
        other = _others[audience.name] = TokenVerifier(_verifier.keyring, _verifier.revocations, audience)
    return other


def _forget_verifier() -> None:
    global _verifier
    _verifier = None


process_state.enrol("core.tokens.verifier", _forget_verifier)


def bearer(authorization: str | None) -> str:
    """The token from an ``Authorization: Bearer`` header, or a 401."""
    if not authorization:
        raise unauthorized("A Bearer access token is required.")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("The Authorization header must be 'Bearer <token>'.")
    return token.strip()
