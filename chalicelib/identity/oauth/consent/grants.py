"""Remembered consents in the global ``oauth_consents`` table: one item per user, client and workspace.

* ``covers``: the user allowed the client, in this workspace, every scope asked (``mfa`` grants nothing: it
  only asks for a stronger sign-in) and this resource (the platform API or one MCP endpoint).
* ``record``: the user allowed it (scopes and resources accumulate; an audit event in the workspace).
* ``attach_grant`` / ``still_allowed``: a code's grant is recorded under the consent at redemption, and a
  refresh needs the consent still there (and notes when it was last used).
* ``withdraw``: the user revoked the connected app: every grant issued under its consents is revoked (its
  refresh tokens fail at once and its access tokens are refused), the consents are deleted, and each
  workspace's audit trail says so.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import audit, aws, clock
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.core.tenancy import get_workspace, workspaces_of
from chalicelib.identity.models import GRANT, ConsentAttrs, FamilyAttrs, OAuthClientAttrs, state_key
from chalicelib.identity.oauth.revocation import revoke_family

NOT_A_RIGHT = frozenset({"mfa"})  # the step-up scope demands a second factor and grants nothing
PLATFORM_API = ""  # the resource of a request without ``resource``
MAX_LISTED = 200


def _model() -> type[ConsentAttrs]:
    return global_model(ConsentAttrs)


def _key(client_id: str, workspace_id: str) -> str:
    return f"{client_id}#{workspace_id}"


def rights(scopes: list[str]) -> list[str]:
    """The scopes a user is asked about (sorted)."""
    return sorted({s for s in scopes if s not in NOT_A_RIGHT})


def app_id(client_id: str) -> str:
    """The connected app's id in the account settings (client ids may be URLs: not a path segment)."""
    return "app_" + hashlib.sha256(client_id.encode()).hexdigest()[:24]


def get(user_id: str, client_id: str, workspace_id: str) -> ConsentAttrs | None:
    try:
        return _model().get(user_id, _key(client_id, workspace_id), consistent_read=True)
    except DoesNotExist:
        return None


def covers(user_id: str, client_id: str, workspace_id: str, scopes: list[str], resource: str | None) -> bool:
    item = get(user_id, client_id, workspace_id)
    return item is not None and set(rights(scopes)) <= item.scope_set and (resource or PLATFORM_API) in item.resource_list


def _audit(workspace_id: str, action: str, user: audit.Actor, item: ConsentAttrs, caller: Any,
           details: dict[str, Any]) -> None:
    if not workspace_id:
        return
    try:
        region = get_workspace(workspace_id).region
    except ApiError:
        return  # the workspace was deleted: no trail to write to
    audit.append(region, workspace_id, action, actor=user, caller=caller,
                 target={"type": "oauth_client", "id": item.client_id, "name": item.client_name},
                 details=details)


def record(user: audit.Actor, client: OAuthClientAttrs, workspace_id: str, scopes: list[str], resource: str | None,
           *, redirect_uri: str, caller: Any) -> ConsentAttrs:
    """The user allowed ``client`` these scopes and resource in ``workspace_id`` (added to what it had)."""
    old = get(user.id, client.client_id, workspace_id)
    allowed = sorted(set(rights(scopes)) | (old.scope_set if old else set()))
    resources = sorted(set(old.resource_list if old else []) | {resource or PLATFORM_API})
    item = _model()(user.id, _key(client.client_id, workspace_id), client_id=client.client_id,
                    workspace_id=workspace_id, client_name=client.name, scopes=" ".join(allowed),
                    resources=json.dumps(resources), granted_at=clock.iso(),
                    last_used_at=old.last_used_at if old else None, grants=old.grants if old else None)
    item.save()
    _audit(workspace_id, "oauth.consent_granted", user, item, caller,
           {"scopes": rights(scopes), "resource": resource or "service-api", "redirect_uri": redirect_uri,
            "registration": client.registration or "admin"})
    return item


def attach_grant(user_id: str, client_id: str, workspace_id: str, family_id: str) -> bool:
    """Record a new grant under the consent (False: the consent is gone, the code must not be redeemed)."""
    cls = _model()
    try:
        cls(user_id, _key(client_id, workspace_id)).update(
            actions=[cls.grants.add({family_id}), cls.last_used_at.set(clock.iso())], condition=cls.key.exists())
    except UpdateError as err:
        if condition_failed(err):
            return False
        raise
    return True


def still_allowed(user_id: str, client_id: str, workspace_id: str) -> bool:
    """A refresh of a third-party grant: the consent must still exist; notes the use."""
    cls = _model()
    try:
        cls(user_id, _key(client_id, workspace_id)).update(actions=[cls.last_used_at.set(clock.iso())],
                                                            condition=cls.key.exists())
    except UpdateError as err:
        if condition_failed(err):
            return False
        raise
    return True


def list_for(user_id: str) -> list[ConsentAttrs]:
    return list(_model().query(user_id, limit=MAX_LISTED))


def _workspace_name(workspace_id: str) -> str:
    try:
        return get_workspace(workspace_id).name if workspace_id else ""
    except ApiError:
        return ""


def connected_apps(user_id: str, client_of: Any) -> list[dict[str, Any]]:
    """The account settings' list: each app the user allowed, with what it may do per workspace and when it
    was last used. ``client_of``: client id -> its registration (or None when it no longer exists)."""
    roles = {w["workspace_id"]: w["role"] for w in workspaces_of(user_id)}
    apps: dict[str, dict[str, Any]] = {}
    for item in list_for(user_id):
        app = apps.get(item.client_id)
        if app is None:
            client = client_of(item.client_id)
            app = apps[item.client_id] = {
                "id": app_id(item.client_id), "client_id": item.client_id,
                "name": client.name if client else item.client_name,
                "self_declared": bool(client is None or (client.registration or "admin") != "admin"),
                "redirect_hosts": sorted({urlsplit(u).netloc for u in client.redirects}) if client else [],
                "last_used_at": None, "workspaces": []}
        app["workspaces"].append({
            "workspace_id": item.workspace_id, "workspace_name": _workspace_name(item.workspace_id),
            "role": roles.get(item.workspace_id), "scopes": sorted(item.scope_set),
            "resources": [r or "service-api" for r in item.resource_list], "granted_at": item.granted_at,
            "last_used_at": item.last_used_at})
        if item.last_used_at and (app["last_used_at"] or "") < item.last_used_at:
            app["last_used_at"] = item.last_used_at
    return sorted(apps.values(), key=lambda a: (a["name"].lower(), a["id"]))


def _revoke_grant(family_id: str) -> None:
    try:
        family = global_model(FamilyAttrs).get(state_key(GRANT, family_id), consistent_read=True)
    except DoesNotExist:
        return  # expired and purged: nothing left to refuse
    if not family.revoked:
        revoke_family(family_id, "consent_withdrawn")


def _delete(item: ConsentAttrs) -> set[str]:
    """Delete the consent; the grants it held at that instant (one call: a grant attached a moment before
    is in the answer, one attached after finds no consent and is refused)."""
    ddb = aws.client("dynamodb", settings().global_region)
    old = ddb.delete_item(TableName=aws.table_name(ConsentAttrs.TABLE),
                          Key={"user_id": {"S": item.user_id}, "key": {"S": item.key}}, ReturnValues="ALL_OLD")
    return set(old.get("Attributes", {}).get("grants", {}).get("SS", []))


def withdraw(user: audit.Actor, wanted_app_id: str, *, caller: Any) -> list[ConsentAttrs]:
    """Revoke the connected app ``wanted_app_id`` of the user: its grants and consents (every workspace)."""
    removed = [c for c in list_for(user.id) if app_id(c.client_id) == wanted_app_id]
    for item in removed:
        item.grants = _delete(item)
        for family_id in item.grants:
            _revoke_grant(family_id)
        _audit(item.workspace_id, "oauth.consent_withdrawn", user, item, caller,
               {"scopes": sorted(item.scope_set), "grants_revoked": len(item.grants or ())})
    return removed
