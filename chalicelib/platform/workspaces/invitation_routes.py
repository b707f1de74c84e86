"""Invitation routes: create, list, read, revoke (Admin); accept (user-level, the invited address)."""
from __future__ import annotations

from typing import Any

from chalicelib.core.audit import Actor
from chalicelib.core.authz import AUTHENTICATED, Principal
from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.errors import ApiError, not_found
from chalicelib.core.http.validation import validate
from chalicelib.core.regions import GLOBAL
from chalicelib.core.store import idempotency
from chalicelib.core.tenancy import RequestScope, region_of, workspace_scope
from chalicelib.platform.access import require_user_token
from chalicelib.platform.workspaces import invitations
from chalicelib.platform.workspaces.routes import replayed_header

api = Api("platform")


def _invited_to(workspace_id: str, *, entry: bool) -> RequestScope:
    """The scope of the workspace an invitation is for: the caller is no member there yet, so the
    workspace acts, not the caller (404 ``invitation`` when it does not exist). With ``entry`` it holds the
    directory entry; without, only the workspace's region (cached: nothing is read for it)."""
    try:
        if entry:
            return workspace_scope(workspace_id)
        return RequestScope(Principal(user_id="", workspace_id=workspace_id, roles=(), email="", amr=("system",),
                                      token_id=""), region_of(workspace_id))
    except ApiError:
        raise not_found("invitation") from None


@api.route("/v1/workspaces/{workspace_id}/invitations", methods=["POST"], permission="invitations.manage")
def create_invitation(ctx: Ctx, workspace_id: str) -> Any:
    body = validate(ctx.json(), invitations.CREATE_FIELDS)
    status, result, replayed = idempotency.run(
        ctx.scope.home, ctx.user.user_id, f"{workspace_id}#invitations.create", ctx.header(idempotency.HEADER),
        body, lambda: (201, invitations.create(ctx.scope, body, actor=Actor.of(ctx.user), caller=ctx.caller)),
        ref_of=lambda r: {"type": "invitation", "id": r["id"]},
        replay=lambda ref: (201, invitations.to_public(invitations.get(ctx.scope, ref["id"]))))
    return json_response(result, status, {
        "Location": f"/v1/workspaces/{workspace_id}/invitations/{result['id']}", **replayed_header(replayed)})


@api.route("/v1/workspaces/{workspace_id}/invitations", permission="invitations.manage")
def list_invitations(ctx: Ctx, workspace_id: str) -> Any:
    paging.check_params(ctx.query, ("limit", "after"))
    return invitations.list_invitations(ctx.scope, paging.limit(ctx.query),
                                        paging.decode("invitations", ctx.query.get("after")))


@api.route("/v1/workspaces/{workspace_id}/invitations/{invitation_id}", permission="invitations.manage")
def get_invitation(ctx: Ctx, workspace_id: str, invitation_id: str) -> Any:
    paging.check_params(ctx.query, ())
    return invitations.to_public(invitations.get(ctx.scope, invitation_id))


@api.route("/v1/workspaces/{workspace_id}/invitations/{invitation_id}", methods=["DELETE"],
           permission="invitations.manage")
def revoke_invitation(ctx: Ctx, workspace_id: str, invitation_id: str) -> Any:
    return invitations.revoke(ctx.scope, invitation_id, actor=Actor.of(ctx.user), caller=ctx.caller)


@api.route("/v1/workspaces/{workspace_id}/invitations/{invitation_id}/preview", permission=AUTHENTICATED, scope=GLOBAL)
def preview_invitation(ctx: Ctx, workspace_id: str, invitation_id: str) -> Any:
    require_user_token(ctx.user)
    paging.check_params(ctx.query, ())
    return invitations.preview(_invited_to(workspace_id, entry=True), invitation_id, ctx.user)


@api.route("/v1/workspaces/{workspace_id}/invitations/{invitation_id}/accept", methods=["POST"],
           permission=AUTHENTICATED, scope=GLOBAL)
def accept_invitation(ctx: Ctx, workspace_id: str, invitation_id: str) -> Any:
    require_user_token(ctx.user)
    validate(ctx.json(required=False), {})
    return json_response(invitations.accept(_invited_to(workspace_id, entry=False), invitation_id, ctx.user,
                                             caller=ctx.caller), 201)
