"""The ``refresh_token`` grant (RFC 6749 section 6): opaque tokens, stored hashed, rotated on every use.

The grant lives at most 30 days from the sign-in. Reusing an already-rotated refresh token revokes the
grant: every refresh token and every access token issued in it, and signs out the session the
grant came from (every token of that session, exchanged ones included).

A request the grant cannot serve (a wider ``scope``: ``invalid_scope``; another ``resource``:
``invalid_target``) is refused before the token is rotated, so the token still works for a proper
refresh. A third-party client's grant needs the user's consent still in place (``oauth/consent/``).
"""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import GRANT, REFRESH, FamilyAttrs, OAuthClientAttrs, RefreshAttrs, state_key
from chalicelib.identity.oauth.clients import calling_client, is_first_party
from chalicelib.identity.oauth.consent import grants as consents
from chalicelib.identity.oauth.errors import oauth_error
from chalicelib.identity.oauth.issuing import issue
from chalicelib.identity.oauth.resources import same_resource
from chalicelib.identity.oauth.revocation import end_session, revoke_family
from chalicelib.identity.opaque import digest

NAME = "refresh_token"


def _read(rt: str, client_id: str) -> RefreshAttrs:
    """The refresh token's record (not yet rotated)."""
    try:
        item = global_model(RefreshAttrs).get(state_key(REFRESH, digest(rt)), consistent_read=True)
    except DoesNotExist:
        raise oauth_error(400, "invalid_grant", "The refresh token is not valid.") from None
    if item.client_id != client_id:
        raise oauth_error(400, "invalid_grant", "The refresh token was issued to another client.")
    return item


def _rotate(item: RefreshAttrs) -> RefreshAttrs:
    """Mark the refresh token used; a reuse revokes the whole grant."""
    cls = global_model(RefreshAttrs)
    try:
        cls(item.pk).update(actions=[cls.used.set(True)], condition=cls.used.does_not_exist())
    except UpdateError as err:
        if condition_failed(err):  # a rotated token came back: assume theft, revoke the whole family
            revoke_family(item.family_id, "refresh_reuse")
            end_session(item.session_id, "refresh_reuse", item.user_id)
            raise oauth_error(400, "invalid_grant", "The refresh token was already used; the grant has been "
                                                    "revoked. Sign in again.") from None
        raise
    if item.expires_at <= clock.now():
        raise oauth_error(400, "invalid_grant", "The refresh token has expired; sign in again.")
    return item


def _check_grant_live(family_id: str) -> None:
    try:
        family = global_model(FamilyAttrs).get(state_key(GRANT, family_id), consistent_read=True)
    except DoesNotExist:
        raise oauth_error(400, "invalid_grant", "The grant no longer exists.") from None
    if family.revoked:
        raise oauth_error(400, "invalid_grant", "This grant has been revoked.")


def _narrowed_scope(granted: str, asked: str | None) -> str:
    if not asked:
        return granted
    if not set(asked.split()) <= set(granted.split()):
        raise oauth_error(400, "invalid_scope", "A refresh cannot widen the scope.")
    return " ".join(s for s in granted.split() if s in asked.split())


def grant(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    caller = calling_client(form, client)
    if "refresh_token" not in caller.grants:
        raise oauth_error(400, "unauthorized_client", "This client may not use refresh tokens.")
    rt = form.get("refresh_token") or ""
    if not rt.startswith("rt_") or len(rt) > 128:
        raise oauth_error(400, "invalid_grant", "The refresh token is not valid.")
    item = _read(rt, caller.client_id)
    if not item.used:  # checked before rotating; a reused token goes on to its reuse handling whatever it asks
        _narrowed_scope(item.scope, form.get("scope"))
        same_resource(item.resource, form)
    _rotate(item)
    _check_grant_live(item.family_id)
    scope = _narrowed_scope(item.scope, form.get("scope"))
    resource = same_resource(item.resource, form)
    if not is_first_party(caller) and not consents.still_allowed(item.user_id, caller.client_id, item.workspace_id):
        revoke_family(item.family_id, "consent_withdrawn")
        raise oauth_error(400, "invalid_grant", "The user no longer allows this application; ask again.")
    return issue(client_id=caller.client_id, family_id=item.family_id, user_id=item.user_id,
                 workspace_id=item.workspace_id, amr=list(json.loads(item.amr_json)), scope=scope,
                 auth_time=int(item.auth_time), session_id=item.session_id, nonce=None, refresh=True,
                 family_ends_at=int(item.expires_at), user_epoch=int(item.user_epoch or 0), resource=resource)
