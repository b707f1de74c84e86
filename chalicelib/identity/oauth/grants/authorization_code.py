"""The ``authorization_code`` grant (RFC 6749 section 4.1 with PKCE S256, RFC 7636; PKCE is optional
only for confidential clients, see ``oauth/authorize.py``).

Codes are 256-bit, stored hashed, single use, 60 seconds. A second use of a code revokes every token
issued from it (its grant) and is refused. The grant lives at most ``REFRESH_FAMILY_TTL_SECONDS``.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import AUTH_CODE, GRANT, CodeAttrs, FamilyAttrs, OAuthClientAttrs, state_key
from chalicelib.identity.oauth.clients import calling_client, is_first_party
from chalicelib.identity.oauth.consent import grants as consents
from chalicelib.identity.oauth.errors import oauth_error
from chalicelib.identity.oauth.issuing import issue
from chalicelib.identity.oauth.resources import same_resource
from chalicelib.identity.oauth.revocation import end_session, revoke_family
from chalicelib.identity.opaque import digest, same

NAME = "authorization_code"
REFRESH_FAMILY_TTL_SECONDS = 30 * 24 * 3600
_PKCE_RE = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")


def _s256(verifier_value: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier_value.encode("ascii")).digest()).rstrip(b"=").decode()


def _consume_code(code: str) -> CodeAttrs:
    """The code's record, marked used; a second use revokes its grant. Refusals are ``invalid_grant``."""
    cls = global_model(CodeAttrs)
    pk = state_key(AUTH_CODE, digest(code))
    try:
        item = cls.get(pk, consistent_read=True)
    except DoesNotExist:
        raise oauth_error(400, "invalid_grant", "The authorization code is not valid.") from None
    try:
        cls(pk).update(actions=[cls.used.set(True)], condition=cls.used.does_not_exist())
    except UpdateError as err:
        if condition_failed(err):  # second use: revoke everything issued from this code
            revoke_family(item.family_id, "code_reuse")
            end_session(item.session_id, "code_reuse", item.user_id)
            raise oauth_error(400, "invalid_grant", "The authorization code was already used; the tokens issued "
                                                    "from it have been revoked.") from None
        raise
    return item


def _check_code_binding(item: CodeAttrs, client_id: str, form: dict[str, str]) -> None:
    """Expiry, client, redirect URI and the PKCE verifier must all match the authorization request."""
    if item.code_expires_at <= clock.now():
        raise oauth_error(400, "invalid_grant", "The authorization code has expired.")
    if item.client_id != client_id:
        raise oauth_error(400, "invalid_grant", "The authorization code was issued to another client.")
    if form.get("redirect_uri") != item.redirect_uri:
        raise oauth_error(400, "invalid_grant", "redirect_uri does not match the authorization request.")
    code_verifier = form.get("code_verifier") or ""
    if item.code_challenge is None:  # a confidential client that sent no code_challenge
        if code_verifier:
            raise oauth_error(400, "invalid_grant", "code_verifier was sent but the authorization request had no "
                                                    "code_challenge.")
        return
    if not _PKCE_RE.match(code_verifier):
        raise oauth_error(400, "invalid_grant", "code_verifier is missing or malformed (PKCE is required).")
    if not same(_s256(code_verifier), item.code_challenge):
        raise oauth_error(400, "invalid_grant", "code_verifier does not match the code_challenge.")


def grant(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    caller = calling_client(form, client)
    code = form.get("code") or ""
    if not code or len(code) > 128:
        raise oauth_error(400, "invalid_request", "code is required.")
    item = _consume_code(code)
    _check_code_binding(item, caller.client_id, form)
    resource = same_resource(item.resource, form)
    if not is_first_party(caller) and not consents.attach_grant(item.user_id, caller.client_id, item.workspace_id,
                                                                item.family_id):
        raise oauth_error(400, "invalid_grant", "The user no longer allows this application; ask again.")
    ends = int(clock.now()) + REFRESH_FAMILY_TTL_SECONDS
    global_model(FamilyAttrs)(state_key(GRANT, item.family_id), client_id=caller.client_id, user_id=item.user_id,
                              ends_at=ends, expires_at=ends + 3600).save(condition=FamilyAttrs.pk.does_not_exist())
    return issue(client_id=caller.client_id, family_id=item.family_id, user_id=item.user_id,
                 workspace_id=item.workspace_id, amr=list(json.loads(item.amr_json)), scope=item.scope,
                 auth_time=int(item.auth_time), session_id=item.session_id, nonce=item.nonce,
                 refresh="refresh_token" in caller.grants, family_ends_at=ends, resource=resource)
