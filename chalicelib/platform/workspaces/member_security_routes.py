"""Admin actions on a member's sign-in security at {base_url}/v1 (permission ``members.manage``):
clear a lockout now, and reset the member's MFA. Both are audited in the workspace's trail.

Both act on the whole account, so they are allowed only for an account the workspace owns
(``identity.account.ownership``); an MFA reset also refuses every token the member holds
(``tokens.bump_epoch``): they were issued under the factors just removed."""
from __future__ import annotations

from typing import Any

from chalicelib.core import audit
from chalicelib.core.http.api import Api, Ctx
from chalicelib.core.http.errors import not_found
from chalicelib.core.http.validation import validate
from chalicelib.core.ids import is_id
from chalicelib.core.tenancy import membership
from chalicelib.core.tokens import bump_epoch
from chalicelib.identity.account.ownership import require_owner
from chalicelib.identity.mfa import factors as mfa
from chalicelib.identity.signin import lockout

api = Api("platform")


def _target(ctx: Ctx, workspace_id: str, user_id: str) -> Any:
    validate(ctx.json(required=False), {})  # no body fields; anything sent is refused
    if not is_id(user_id, "usr"):
        raise not_found("member")
    member = membership(workspace_id, user_id)
    if member is None:
        raise not_found("member")
    require_owner(workspace_id, user_id, member.email)
    return member


@api.route("/v1/workspaces/{workspace_id}/members/{user_id}/unlock", methods=["POST"], permission="members.manage")
def unlock_member(ctx: Ctx, workspace_id: str, user_id: str) -> Any:
    member = _target(ctx, workspace_id, user_id)
    was_locked = lockout.unlock(user_id)
    audit.append(ctx.scope.home, workspace_id, "member.unlocked", actor=audit.Actor.of(ctx.user),
                 target={"type": "user", "id": user_id, "email": member.email},
                 details={"was_locked": was_locked}, caller=ctx.caller)
    return {"user_id": user_id, "locked": False, "was_locked": was_locked}


@api.route("/v1/workspaces/{workspace_id}/members/{user_id}/mfa/reset", methods=["POST"], permission="members.manage")
def reset_member_mfa(ctx: Ctx, workspace_id: str, user_id: str) -> Any:
    member = _target(ctx, workspace_id, user_id)
    had = mfa.methods(user_id)
    mfa.reset(user_id)
    bump_epoch(user_id)
    audit.append(ctx.scope.home, workspace_id, "member.mfa_reset", actor=audit.Actor.of(ctx.user),
                 target={"type": "user", "id": user_id, "email": member.email},
                 details={"removed_methods": had}, caller=ctx.caller)
    return {"user_id": user_id, "mfa_methods": mfa.methods(user_id), "removed_methods": had}
