"""Signing keys and token issuing.

Keys are RSA-2048, stored in the global ``signing_keys`` table with the private PEM encrypted under the
``token-keys`` KMS key. A process decrypts the active key once and keeps the parsed key object; it looks
again (one table scan) at most every ``ACTIVE_KEY_RECHECK_SECONDS`` so a rotation reaches every process.
Rotation makes a new key active and keeps the previous one published (``retiring``) until every token
it may have signed has expired: ``retire_at`` = rotation time + the longest token lifetime + leeway.
"""
from __future__ import annotations

import json
import threading
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jose import jwk, jwt

from chalicelib.core import clock, process_state
from chalicelib.core.config import AUDIENCE, settings
from chalicelib.core.ids import new_id
from chalicelib.core.store import kms
from chalicelib.core.store.tables import global_model
from chalicelib.core.tokens import ALGORITHM, LEEWAY_SECONDS, SigningKeyAttrs, current_epochs, published

ACTIVE_KEY_RECHECK_SECONDS = 60
# RFC 9068 section 2.2: every access token names its client. Tokens the platform issues itself (API
# tokens, ``infra/demo_token.py``) name this one; it is never a registered client's id (those are ``cli_...``).
PLATFORM_CLIENT_ID = "platform"


def _keys() -> type[SigningKeyAttrs]:
    return global_model(SigningKeyAttrs)



def create_key(status: str = "active") -> str:
    """Generate a key pair, store it (private part KMS-encrypted) and return its ``kid``."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    kid = new_id("key")
    public = jwk.construct(private.public_key(), ALGORITHM).to_dict()
    public.update({"kid": kid, "use": "sig", "alg": ALGORITHM})
    public = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in public.items()}
    blob = kms.encrypt(settings().global_region, "token-keys", "token-signing", pem, kid=kid)
    _keys()(kid, status=status, public_jwk=json.dumps(public), private_blob=blob,
            created_at=clock.now()).save(condition=SigningKeyAttrs.kid.does_not_exist())
    return kid


def ensure_key() -> str:
    """The active key's ``kid``, creating the first key when there is none (bootstrap, first start)."""
    active = [k for k in _keys().scan(consistent_read=True) if k.status == "active"]
    if active:
        return max(active, key=lambda k: k.created_at).kid
    return create_key()


def rotate() -> str:
    """Make a new key active; the old one stays published until its tokens have expired."""
    new_kid = create_key(status="pending")
    retire_at = clock.now() + settings().max_api_token_ttl + LEEWAY_SECONDS
    for key in _keys().scan(consistent_read=True):
        if key.status == "active":
            key.update(actions=[SigningKeyAttrs.status.set("retiring"), SigningKeyAttrs.retire_at.set(retire_at)])
    _keys().get(new_kid, consistent_read=True).update(actions=[SigningKeyAttrs.status.set("active")])
    signer().invalidate()
    return new_kid


def retire_expired() -> list[str]:
    """Mark keys past ``retire_at`` as retired (scheduled job); returns their kids."""
    now = clock.now()
    retired = []
    for key in _keys().scan(consistent_read=True):
        if key.status == "retiring" and not published(key, now):
            key.update(actions=[SigningKeyAttrs.status.set("retired")])
            retired.append(key.kid)
    return retired


class Signer:
    """Holds the decrypted active key of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kid: str | None = None
        self._key: Any = None
        self._checked_at = -1e18

    def _load(self) -> None:
        active = [k for k in _keys().scan(consistent_read=True) if k.status == "active"]
        if not active:
            raise RuntimeError("no active signing key; run the bootstrap")
        item = max(active, key=lambda k: k.created_at)
        if item.kid != self._kid:
            pem = kms.decrypt(settings().global_region, "token-signing", item.private_blob, kid=item.kid)
            self._key = jwk.construct(serialization.load_pem_private_key(pem, password=None), ALGORITHM)
            self._kid = item.kid
        self._checked_at = clock.now()

    def current(self) -> tuple[str, Any]:
        if self._kid is None or clock.now() - self._checked_at > ACTIVE_KEY_RECHECK_SECONDS:
            with self._lock:
                if self._kid is None or clock.now() - self._checked_at > ACTIVE_KEY_RECHECK_SECONDS:
                    self._load()
        assert self._kid is not None
        return self._kid, self._key

    def invalidate(self) -> None:
        with self._lock:
            self._checked_at = -1e18

    def sign(self, claims: dict[str, Any], token_type: str = "at+jwt") -> str:
        kid, key = self.current()
        return jwt.encode(claims, key, algorithm=ALGORITHM, headers={"kid": kid, "typ": token_type})


_signer: Signer | None = None


def signer() -> Signer:
    global _signer
    if _signer is None:
        _signer = Signer()
    return _signer


def _forget_signer() -> None:
    global _signer
    _signer = None


process_state.enrol("identity.oauth.signing.signer", _forget_signer)


def issue_access_token(
    *,
    user_id: str,
    email: str,
    workspace_id: str,
    roles: list[str],
    amr: list[str],
    ttl: int | None = None,
    extra: dict[str, Any] | None = None,
    session_id: str | None = None,
    grant_id: str | None = None,
    audience: str = AUDIENCE,
) -> tuple[str, dict[str, Any]]:
    """Sign an access token for one workspace; returns the token and its claims.

    ``audience``: ``service-api``, or the MCP resource a client named with RFC 8707 ``resource``
    (``core.tokens``): such a token is accepted by that MCP endpoint only.

    Every user token belongs to a session (``sid``; a new one when none is given) and, when it comes
    from an OAuth grant, to that grant (``grant_id``); it carries the user's revocation epochs
    (``rev``). Service tokens (``token_use="service"``) belong to their client instead.
    """
    now = int(clock.now())
    lifetime = ttl if ttl is not None else settings().access_token_ttl
    if lifetime <= 0 or lifetime > settings().max_api_token_ttl:
        raise ValueError("token lifetime out of bounds")
    claims: dict[str, Any] = {
        "iss": settings().issuer,
        "aud": audience,
        "sub": user_id,
        "workspace_id": workspace_id,
        "roles": list(roles),
        "email": email,
        "amr": list(amr),
        "iat": now,
        "nbf": now,
        "exp": now + lifetime,
        "jti": new_id("tok"),
    }
    if extra:
        claims.update(extra)
    claims.setdefault("client_id", PLATFORM_CLIENT_ID)
    if claims.get("token_use") != "service":
        if claims.get("token_use") != "api":
            claims["sid"] = session_id or new_id("sess")
        if grant_id:
            claims["grant_id"] = grant_id
        claims["rev"] = current_epochs(user_id, workspace_id)
    return signer().sign(claims), claims
