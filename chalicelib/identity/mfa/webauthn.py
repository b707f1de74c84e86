"""Passkeys and security keys (WebAuthn) with the ``webauthn`` package.

Relying party: the ID is the host of {auth_url}, the expected origin is {auth_url}'s origin.
Two kinds of credential share the ``webauthn_credentials`` table (hash key ``user_id``, range key the
credential id, index ``by_credential``):

- ``passkey``: discoverable (resident key required), user verification required; signs in alone
  (amr ``hwk`` + ``user`` + ``mfa``: something you have, verified with something you are or know).
- ``security_key``: a second factor after a password (user verification not required; amr ``hwk``).

Every ceremony starts with a challenge stored server-side (``flows``, kind ``webauthn``, 5 minutes)
and consumed by the verify call, so a challenge answers at most once. The signature counter is
checked by the library and advanced with a conditional write, so a cloned authenticator replaying an
old counter is refused even under concurrency.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError, not_found
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import CredentialAttrs, UserAttrs
from chalicelib.identity.signin import flows

# the webauthn library (with its cbor2 and pyOpenSSL) is imported inside the functions that use it, so the
# groups that only list or delete credentials (the platform's MFA reset) do not pay for it at cold start
PASSKEY = "passkey"
SECURITY_KEY = "security_key"
KINDS = (PASSKEY, SECURITY_KEY)
CHALLENGE_TTL = 300
MAX_CREDENTIALS = 20
RP_NAME = "AI Platform"
AMR = {PASSKEY: ["hwk", "user", "mfa"], SECURITY_KEY: ["hwk"]}


def _creds() -> type[CredentialAttrs]:
    return global_model(CredentialAttrs)


def rp_id() -> str:
    return urlparse(settings().auth_url).hostname or "localhost"


def origin() -> str:
    parsed = urlparse(settings().auth_url)
    return f"{parsed.scheme}://{parsed.netloc}"


def _refused(detail: str = "The security key or passkey response could not be verified.") -> ApiError:
    return ApiError(400, "webauthn_failed", detail)


def public_view(c: CredentialAttrs) -> dict[str, Any]:
    return {"id": c.credential_id, "kind": c.kind, "name": c.name, "created_at": c.created_at,
            "last_used_at": c.last_used_at, "backed_up": c.backed_up}


def list_credentials(user_id: str, kind: str | None = None) -> list[CredentialAttrs]:
    items = list(_creds().query(user_id, consistent_read=True))
    return [c for c in items if kind is None or c.kind == kind]


def find_credential(credential_id: str) -> CredentialAttrs | None:
    for item in _creds().by_credential.query(credential_id, limit=1):
        return _creds().get(item.user_id, item.credential_id, consistent_read=True)
    return None


# --- registration (requires a signed-in session) -------------------------------------------------

def registration_options(user: UserAttrs, kind: str) -> dict[str, Any]:
    """Options for ``navigator.credentials.create`` plus the id of the stored challenge."""
    from webauthn import (  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
        generate_registration_options,
        options_to_json,
    )
    from webauthn.helpers import base64url_to_bytes, bytes_to_base64url  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
    from webauthn.helpers.structs import (  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
        AuthenticatorSelectionCriteria,
        PublicKeyCredentialDescriptor,
        ResidentKeyRequirement,
        UserVerificationRequirement,
    )

    if kind not in KINDS:
        raise ValueError(kind)
    existing = list_credentials(user.id)
    if len(existing) >= MAX_CREDENTIALS:
        raise ApiError(409, "too_many_credentials", f"At most {MAX_CREDENTIALS} passkeys and security keys.")
    if kind == PASSKEY:
        selection = AuthenticatorSelectionCriteria(resident_key=ResidentKeyRequirement.REQUIRED,
                                                   user_verification=UserVerificationRequirement.REQUIRED)
    else:
        selection = AuthenticatorSelectionCriteria(resident_key=ResidentKeyRequirement.DISCOURAGED,
                                                   user_verification=UserVerificationRequirement.DISCOURAGED)
    options = generate_registration_options(
        rp_id=rp_id(), rp_name=RP_NAME, user_id=user.id.encode(), user_name=user.email,
        user_display_name=user.display_name or user.email, authenticator_selection=selection,
        exclude_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(c.credential_id))
                             for c in existing],
        timeout=CHALLENGE_TTL * 1000,
    )
    challenge_id = flows.put("webauthn", {"purpose": "register", "kind": kind, "user_id": user.id,
                                          "challenge": bytes_to_base64url(options.challenge)}, CHALLENGE_TTL)
    return {"challenge_id": challenge_id, "publicKey": json.loads(options_to_json(options))}


def verify_registration(user: UserAttrs, challenge_id: str, credential: dict[str, Any], name: str) -> CredentialAttrs:
    """Check the attestation against the stored challenge and save the credential."""
    from webauthn import verify_registration_response  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
    from webauthn.helpers import base64url_to_bytes, bytes_to_base64url  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
    from webauthn.helpers.exceptions import WebAuthnException  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start

    flow = flows.take("webauthn", challenge_id)
    if not flow or flow.get("purpose") != "register" or flow.get("user_id") != user.id:
        raise _refused("The challenge is unknown, expired or already used.")
    kind = flow["kind"]
    try:
        verified = verify_registration_response(
            credential=credential, expected_challenge=base64url_to_bytes(flow["challenge"]),
            expected_rp_id=rp_id(), expected_origin=origin(), require_user_verification=(kind == PASSKEY))
    except (WebAuthnException, ValueError, KeyError, TypeError):
        raise _refused() from None
    cred_id = bytes_to_base64url(verified.credential_id)
    if find_credential(cred_id) is not None:
        raise ApiError(409, "credential_exists", "This authenticator is already registered.")
    transports = credential.get("response", {}).get("transports") or []
    item = _creds()(user.id, cred_id, kind=kind, name=(name or default_name(kind))[:64],
                    public_key=bytes_to_base64url(verified.credential_public_key),
                    sign_count=verified.sign_count, transports=json.dumps([str(t) for t in transports][:8]),
                    aaguid=str(verified.aaguid), backed_up=bool(verified.credential_backed_up),
                    created_at=clock.iso())
    item.save(condition=CredentialAttrs.credential_id.does_not_exist())
    return item


def default_name(kind: str) -> str:
    return "Passkey" if kind == PASSKEY else "Security key"


def delete_credential(user_id: str, credential_id: str, kind: str) -> None:
    try:
        item = _creds().get(user_id, credential_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("credential") from None
    if item.kind != kind:
        raise not_found("credential")
    item.delete()


# --- authentication ------------------------------------------------------------------------------

def authentication_options(kind: str, user_id: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Passkey: discoverable (no allow list, UV required). Security key: the user's keys as allow list."""
    from webauthn import (  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
        generate_authentication_options,
        options_to_json,
    )
    from webauthn.helpers import base64url_to_bytes, bytes_to_base64url  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
    from webauthn.helpers.structs import (  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
        PublicKeyCredentialDescriptor,
        UserVerificationRequirement,
    )

    if kind == PASSKEY:
        options = generate_authentication_options(rp_id=rp_id(), timeout=CHALLENGE_TTL * 1000,
                                                  user_verification=UserVerificationRequirement.REQUIRED)
    else:
        assert user_id
        keys = list_credentials(user_id, SECURITY_KEY)
        if not keys:
            raise ApiError(400, "no_security_key", "No security key is registered for this account.")
        options = generate_authentication_options(
            rp_id=rp_id(), timeout=CHALLENGE_TTL * 1000,
            user_verification=UserVerificationRequirement.DISCOURAGED,
            allow_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(k.credential_id)) for k in keys])
    challenge_id = flows.put("webauthn", {"purpose": "authenticate", "kind": kind, "user_id": user_id,
                                          "challenge": bytes_to_base64url(options.challenge), **(extra or {})},
                             CHALLENGE_TTL)
    return {"challenge_id": challenge_id, "publicKey": json.loads(options_to_json(options))}


@dataclass(frozen=True)
class Authenticated:
    user_id: str
    credential_id: str
    kind: str
    amr: list[str]
    flow: dict[str, Any]


def verify_authentication(challenge_id: str, credential: dict[str, Any], kind: str) -> Authenticated:
    """Verify an assertion; returns who signed in. Every failure is the same 400."""
    from webauthn import verify_authentication_response  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
    from webauthn.helpers import base64url_to_bytes  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start
    from webauthn.helpers.exceptions import WebAuthnException  # noqa: PLC0415 - the webauthn library loads at first passkey use, not at cold start

    flow = flows.take("webauthn", challenge_id)
    if not flow or flow.get("purpose") != "authenticate" or flow.get("kind") != kind:
        raise _refused("The challenge is unknown, expired or already used.")
    cred_id = credential.get("id") if isinstance(credential, dict) else None
    stored = find_credential(cred_id) if isinstance(cred_id, str) and len(cred_id) < 1024 else None
    if stored is None or stored.kind != kind:
        raise _refused()
    if kind == SECURITY_KEY and stored.user_id != flow.get("user_id"):
        raise _refused()
    if kind == PASSKEY:
        handle = (credential.get("response") or {}).get("userHandle")
        try:
            if not handle or base64url_to_bytes(handle).decode() != stored.user_id:
                raise _refused()
        except (ValueError, UnicodeDecodeError):
            raise _refused() from None
    try:
        verified = verify_authentication_response(
            credential=credential, expected_challenge=base64url_to_bytes(flow["challenge"]),
            expected_rp_id=rp_id(), expected_origin=origin(),
            credential_public_key=base64url_to_bytes(stored.public_key),
            credential_current_sign_count=int(stored.sign_count),
            require_user_verification=(kind == PASSKEY))
    except (WebAuthnException, ValueError, KeyError, TypeError):
        raise _refused() from None
    _advance_counter(stored, int(verified.new_sign_count))
    return Authenticated(stored.user_id, stored.credential_id, kind, list(AMR[kind]), flow)


def _advance_counter(stored: CredentialAttrs, new_count: int) -> None:
    """Store the new counter only if nobody stored a newer one meanwhile (clone detection)."""
    condition = None
    if new_count > 0:
        condition = CredentialAttrs.sign_count < new_count
    try:
        stored.update(actions=[CredentialAttrs.sign_count.set(new_count),
                               CredentialAttrs.last_used_at.set(clock.iso())], condition=condition)
    except UpdateError:
        raise _refused() from None


# --- as a second factor (listed in factors.FACTORS) ---------------------------------------------------

def has_security_key(user_id: str) -> bool:
    return bool(list_credentials(user_id, SECURITY_KEY))


def delete_security_keys(user_id: str) -> int:
    """Admin MFA reset: remove every security key (passkeys stay: they are a first factor)."""
    keys = list_credentials(user_id, SECURITY_KEY)
    for key in keys:
        key.delete()
    return len(keys)

