"""Domain-join: a workspace Admin turns it on for the domain of their own verified e-mail address;
then any user whose VERIFIED e-mail is in that domain may join as a Member. Joining is a user-level
action: it is called with any valid sign-in token of the user, whichever workspace that token is for."""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist, TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.core import audit
from chalicelib.core.authz import Role
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.store.tables import connection
from chalicelib.core.tenancy import WorkspaceAttrs, membership, membership_changed, workspaces
from chalicelib.core.workspace_settings import settings_of
from chalicelib.identity import users
from chalicelib.platform.models import domain_index
from chalicelib.platform.workspaces import members
from chalicelib.platform.workspaces.service import adjust_member_count, token_exchange_hint


def verified_domain(user_id: str) -> str | None:
    """The domain of the user's e-mail when the directory says it is verified."""
    user = users.get_user(user_id)
    if user is None or not user.email_verified or "@" not in user.email:
        return None
    return user.email.rsplit("@", 1)[1].lower()


def _open_for(ws: WorkspaceAttrs, domain: str) -> bool:
    dj = settings_of(ws).get("domain_join") or {}
    return bool(dj.get("enabled")) and dj.get("domain") == domain


def joinable(user_id: str) -> list[dict[str, Any]]:
    domain = verified_domain(user_id)
    if not domain:
        return []
    try:
        ids = sorted(domain_index().get(f"domain#{domain}", consistent_read=True).workspace_ids or ())
    except DoesNotExist:
        return []
    out = []
    for ws in workspaces().batch_get(ids):
        if _open_for(ws, domain) and membership(ws.id, user_id) is None:
            out.append({"id": ws.id, "name": ws.name, "slug": ws.slug, "residency": ws.residency,
                        "domain": domain, "role_on_join": Role.MEMBER.value})
    return sorted(out, key=lambda w: w["id"])


def join(workspace_id: str, user_id: str, *, caller: Any = None) -> dict[str, Any]:
    """Make the user a Member; 404 unless domain-join is on for the user's verified domain."""
    user = users.get_user(user_id)
    domain = verified_domain(user_id)
    try:
        ws = workspaces().get(workspace_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("workspace") from None
    if user is None or not domain or not _open_for(ws, domain):
        raise not_found("workspace")  # the same answer whether it exists or not
    if membership(workspace_id, user_id) is not None:
        raise conflict("already_member", "You are already a member of this workspace.")
    try:
        with TransactWrite(connection=connection(ws.region)) as tx:
            members.add_member_tx(tx, ws.region, workspace_id, user_id, user.email, Role.MEMBER.value, "domain_join")
    except TransactWriteError:
        raise conflict("already_member", "You are already a member of this workspace.") from None
    membership_changed(user_id)
    adjust_member_count(workspace_id, 1)
    audit.append(ws.region, workspace_id, "member.joined", actor=audit.Actor("user", user_id, user.email),
                 target={"type": "user", "id": user_id, "email": user.email},
                 details={"via": "domain_join", "domain": domain, "role": Role.MEMBER.value}, caller=caller)
    m = membership(workspace_id, user_id)
    if m is None:  # pragma: no cover - just written
        raise ApiError(500, "internal_error", "An internal error occurred.")
    return {"workspace_id": workspace_id, "membership": members.to_public(m),
            "token_exchange": token_exchange_hint(workspace_id)}
