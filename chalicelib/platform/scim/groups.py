"""SCIM Groups: the workspace groups (``platform/workspaces/groups.py``) as SCIM resources.

A group the provider creates is a workspace group with ``source`` scim (REST then leaves it to the
provider). Its ``members`` are provisioned users or workspace members; a provisioned user that is no member
now (deactivated, or sent without an address) stays in its groups, which grant it nothing until it is a
member again (``workspaces/groups.py`` keeps those edges on its SCIM record). Entra ID's ``remove`` of
``members`` with a ``value`` list removes those members.
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from scim2_models import Context, Group, PatchOp, SCIMException

from chalicelib.core.http.errors import ApiError
from chalicelib.platform.models import GroupAttrs
from chalicelib.platform.scim import protocol
from chalicelib.platform.scim.tokens import ScimCaller
from chalicelib.platform.workspaces import groups

GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"


def not_found() -> ApiError:
    return protocol.error(404, None, "The group does not exist in this workspace.")


def get_group(caller: ScimCaller, group_id: str) -> GroupAttrs:
    try:
        return groups.get_group(caller.scope, group_id)
    except ApiError:
        raise not_found() from None


Members = dict[str, str]  # user id -> display


def resource(caller: ScimCaller, g: GroupAttrs, members: Members | None) -> dict[str, Any]:
    """The SCIM Group (``members`` None: left out)."""
    base = protocol.base_url(caller.scope)
    data: dict[str, Any] = {"schemas": [GROUP_SCHEMA], "id": g.group_id, "displayName": g.name}
    if g.external_id:
        data["externalId"] = g.external_id
    if members is not None:
        data["members"] = [{"value": uid, "display": shown, "type": "User", "$ref": f"{base}/Users/{uid}"}
                           for uid, shown in sorted(members.items())]
    data["meta"] = {"resourceType": "Group", "created": g.created_at, "lastModified": g.updated_at,
                    "location": f"{base}/Groups/{g.group_id}", "version": protocol.etag(g.version)}
    return data


def _members(caller: ScimCaller, g: GroupAttrs) -> Members:
    """The group's members: workspace members, and provisioned users that are none now (deactivated;
    they hold nothing until they are members again), from one query over the group's edges."""
    return {e.user_id: e.display for e in groups.edges(caller.scope, g.group_id)}


def read(caller: ScimCaller, g: GroupAttrs, query: dict[str, str] | None = None) -> dict[str, Any]:
    without = protocol.excluded(query or {}, "members")
    return resource(caller, g, None if without else _members(caller, g))


def read_one(caller: ScimCaller, group_id: str, query: dict[str, str]) -> dict[str, Any]:
    """``GET /Groups/{id}``."""
    return read(caller, get_group(caller, group_id), query)


def _validate(payload: Any, ctx: Context) -> Any:
    if not isinstance(payload, dict):
        raise protocol.error(400, "invalidSyntax", "The request body must be a JSON object.")
    try:
        group = Group.model_validate(protocol.without_foreign_schemas(payload, (GROUP_SCHEMA,)), scim_ctx=ctx)
    except (ValidationError, SCIMException) as exc:
        raise protocol.from_exception(exc) from None
    return _checked(group)


def _checked(group: Any) -> Any:
    name = (group.display_name or "").strip()
    if not name or len(name) > groups.MAX_NAME:
        raise protocol.error(400, "invalidValue", f"displayName must hold 1 to {groups.MAX_NAME} characters.")
    return group


def _values(group: Any) -> set[str]:
    return {str(m.value) for m in (group.members or []) if m.value}


def _set_members(caller: ScimCaller, g: GroupAttrs, wanted: set[str], current: Members) -> Members:
    """Make the group's members ``wanted`` (unknown users are skipped); the members after it. ``g`` then
    holds the group's new version."""
    out = dict(current)
    for user_id in sorted(set(current) - wanted):
        try:
            groups.remove_member(caller.scope, g, user_id, actor=caller.actor)
        except ApiError as err:
            if err.status != 404:
                raise
        out.pop(user_id, None)
    for user_id in sorted(wanted - set(current)):
        try:
            edge = groups.add_member(caller.scope, g, user_id, actor=caller.actor)
        except ApiError as err:
            if err.status != 404:
                raise
            if err.detail.startswith("The group"):
                raise not_found() from None
            continue
        if edge is not None:
            out[user_id] = edge.display
    return out


def create(caller: ScimCaller, payload: Any) -> dict[str, Any]:
    """``POST /Groups``: the new group's resource."""
    group = _validate(payload, Context.RESOURCE_CREATION_REQUEST)
    try:
        g = groups.create_group(caller.scope, group.display_name, source="scim",
                                external_id=group.external_id or None, actor=caller.actor)
    except ApiError as err:
        if err.code == "group_name_taken":
            raise protocol.error(409, "uniqueness", "A group with this displayName already exists.") from None
        raise
    return resource(caller, g, _set_members(caller, g, _values(group), {}))


def _apply(caller: ScimCaller, g: GroupAttrs, group: Any, current: Members) -> dict[str, Any]:
    try:
        if group.display_name.strip() != g.name or (group.external_id or "") != (g.external_id or ""):
            g = groups.update_group(caller.scope, g, name=group.display_name, external_id=group.external_id or "",
                                    actor=caller.actor)
    except ApiError as err:
        if err.code == "group_name_taken":
            raise protocol.error(409, "uniqueness", "A group with this displayName already exists.") from None
        if err.code == "concurrent_update":
            raise protocol.error(412, None, "The group changed meanwhile; read it again.") from None
        raise
    return resource(caller, g, _set_members(caller, g, _values(group), current))


def replace(caller: ScimCaller, group_id: str, payload: Any, if_match: str | None) -> dict[str, Any]:
    g = get_group(caller, group_id)
    protocol.check_if_match(if_match, g.version)
    group = _validate(payload, Context.RESOURCE_REPLACEMENT_REQUEST)
    return _apply(caller, g, group, _members(caller, g))


def _member_removals(payload: Any) -> Any:
    """Entra ID's ``{"op": "Remove", "path": "members", "value": [{"value": id}]}`` as one filtered
    remove per member (RFC 7644 gives a remove no value)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("Operations"), list):
        return payload
    ops: list[Any] = []
    for op in payload["Operations"]:
        if (isinstance(op, dict) and str(op.get("op", "")).lower() == "remove" and op.get("path") == "members"
                and isinstance(op.get("value"), list)):
            for item in op["value"]:
                value = item.get("value") if isinstance(item, dict) else None
                if not isinstance(value, str) or '"' in value or "\\" in value:
                    raise protocol.error(400, "invalidValue", "Each member to remove needs a value (a user id).")
                ops.append({"op": "remove", "path": f'members[value eq "{value}"]'})
        else:
            ops.append(op)
    return {**payload, "Operations": ops}


def patch(caller: ScimCaller, group_id: str, payload: Any, if_match: str | None) -> dict[str, Any]:
    g = get_group(caller, group_id)
    protocol.check_if_match(if_match, g.version)
    current = _members(caller, g)
    data = resource(caller, g, {})
    data["members"] = [{"value": v} for v in sorted(current)]
    data.pop("meta")
    try:
        group = Group.model_validate(data)
        op = PatchOp[Group].model_validate(_member_removals(payload),  # type: ignore[misc]
                                           scim_ctx=Context.RESOURCE_PATCH_REQUEST)
        op.patch(group)
    except (ValidationError, SCIMException) as exc:
        raise protocol.from_exception(exc) from None
    return _apply(caller, g, _checked(group), current)


def delete(caller: ScimCaller, group_id: str, if_match: str | None) -> None:
    g = get_group(caller, group_id)
    protocol.check_if_match(if_match, g.version)
    groups.delete_group(caller.scope, g, actor=caller.actor)


def search(caller: ScimCaller, query: dict[str, str]) -> dict[str, Any]:
    """``GET /Groups``: ``displayName eq`` and ``externalId eq`` cheaply, any other filter by evaluation;
    members from one query over the workspace's group edges (none with ``excludedAttributes=members``)."""
    flt = protocol.parse_filter(Group, query.get("filter"))
    page = protocol.page_of(query)
    eq = protocol.equality(flt, "displayName", "externalId")
    if eq and eq[0] == "displayName":
        one = groups.find_by_name(caller.scope, eq[1])
        found = [one] if one is not None else []
    elif eq:
        found = [g for g in groups.all_groups(caller.scope) if g.external_id == eq[1]]
    else:
        found = groups.all_groups(caller.scope)
    found.sort(key=lambda g: g.group_id)
    without = protocol.excluded(query, "members")
    by_group = {} if without or not found else groups.edges_by_group(caller.scope)
    resources = [resource(caller, g, None if without else {e.user_id: e.display for e in by_group.get(g.group_id, [])})
                 for g in found]
    if flt is not None and not eq:
        resources = [r for r in resources if _matches(flt, r)]
    chosen = resources[page.start - 1: page.start - 1 + page.count]
    return protocol.list_response(chosen, len(resources), page)


def _matches(flt: Any, data: dict[str, Any]) -> bool:
    try:
        return bool(flt.match(Group.model_validate(json.loads(json.dumps(data)))))
    except (ValidationError, SCIMException):
        return False
