"""Presets: saved instructions a person starts a chat (or an agent definition) from.

A preset is private (``scope: private``: its owner alone sees it; another user's, Admins included, is 404)
or shared with the workspace (``scope: workspace``: every member who chats reads it; Admins alone create,
change and delete it, audited as ``preset.*``). Names are unique per owner (the user, or the workspace).
Starting a chat from a preset copies its instructions into the chat as its system instructions
(``chat/service.start``): they are the person's own instructions, and retrieved documents stay data
inside their delimiters as for any answer.
"""
from __future__ import annotations

import unicodedata
from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import audit, clock
from chalicelib.core.audit import Actor, CallerLike
from chalicelib.core.authz import Principal, require
from chalicelib.core.http.errors import ApiError, forbidden, not_found, validation_error
from chalicelib.core.http.validation import F, validate
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.tenancy import RequestScope
from chalicelib.llm.models import PresetAttrs, presets

WORKSPACE = "workspace"
SCOPES = ("private", WORKSPACE)
NAME_MAX = 100
INSTRUCTIONS_MAX = 8000
MAX_PER_OWNER = 100
MANAGE_SHARED = "workspace.update"  # Admins create, change and delete the workspace's presets
FIELDS = {"name": F(str, required=True, min_len=1, max_len=NAME_MAX),
          "instructions": F(str, required=True, min_len=1, max_len=INSTRUCTIONS_MAX),
          "scope": F(str, enum=SCOPES)}
PATCH_FIELDS = {"name": F(str, min_len=1, max_len=NAME_MAX),
                "instructions": F(str, min_len=1, max_len=INSTRUCTIONS_MAX)}


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    errors = []
    if "name" in body:
        name = " ".join(body["name"].split())
        if not name or any(unicodedata.category(ch) in ("Cc", "Cf") for ch in name):
            errors.append({"field": "name", "message": f"must be 1 to {NAME_MAX} printable characters"})
        body["name"] = name
    if "instructions" in body and not body["instructions"].strip():
        errors.append({"field": "instructions", "message": "must not be blank"})
    if errors:
        raise validation_error(errors)
    return body


def to_public(item: PresetAttrs) -> dict[str, Any]:
    return {"id": item.id, "name": item.name, "instructions": item.instructions,
            "scope": WORKSPACE if item.owner == WORKSPACE else "private", "created_by": item.created_by,
            "created_at": item.created_at, "updated_at": item.updated_at}


def _owned(scope: RequestScope, owner: str) -> list[PresetAttrs]:
    cls = presets(scope.home)
    return list(cls.query(scope.workspace_id, cls.id.startswith("pre_"), filter_condition=cls.owner == owner,
                          consistent_read=True))


def _visible(scope: RequestScope, preset_id: str) -> PresetAttrs:
    """The preset the caller may read: theirs, or the workspace's; 404 otherwise (any other user's or
    workspace's, or a malformed id)."""
    if not is_id(preset_id, "pre"):
        raise not_found("preset")
    cls = presets(scope.home)
    try:
        item = cls.get(scope.workspace_id, preset_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("preset") from None
    if item.owner not in (WORKSPACE, scope.principal.user_id):
        raise not_found("preset")
    return item


def _may_change(principal: Principal, item: PresetAttrs) -> None:
    if item.owner == WORKSPACE and not principal.can(MANAGE_SHARED):
        raise forbidden()


def _unique(scope: RequestScope, owner: str, name: str, other_than: str | None = None) -> list[PresetAttrs]:
    held = _owned(scope, owner)
    if any(p.name.casefold() == name.casefold() and p.id != other_than for p in held):
        raise ApiError(409, "preset_name_taken", f"A preset named {name!r} exists already; choose another name.")
    return held


def _audit(scope: RequestScope, item: PresetAttrs, action: str, caller: CallerLike | None,
           details: dict[str, Any] | None = None) -> None:
    if item.owner == WORKSPACE:  # private presets are the person's own, like their chats
        audit.append(scope.home, scope.workspace_id, action, actor=Actor.of(scope.principal),
                     target={"type": "preset", "id": item.id}, details=details or {}, caller=caller)


def list_presets(scope: RequestScope, query: dict[str, str]) -> dict[str, Any]:
    """The caller's private presets and the workspace's, by name (``scope`` narrows to one kind)."""
    require(scope.principal, "chat.use")
    unknown = [{"field": k[:64], "message": "is not a known parameter"} for k in query if k != "scope"]
    kind = query.get("scope")
    if kind is not None and kind not in SCOPES:
        unknown.append({"field": "scope", "message": "must be private or workspace"})
    if unknown:
        raise validation_error(unknown)
    owners = [o for o, s in ((scope.principal.user_id, "private"), (WORKSPACE, WORKSPACE)) if kind in (None, s)]
    items = [p for o in owners for p in _owned(scope, o)]
    items.sort(key=lambda p: (p.owner != WORKSPACE, p.name.casefold()))
    return {"items": [to_public(p) for p in items], "has_more": False, "next_cursor": None}


def create(scope: RequestScope, body: Any, caller: CallerLike | None = None) -> dict[str, Any]:
    principal = scope.principal
    require(principal, "chat.use")
    body = _clean(dict(validate(body, FIELDS)))
    owner = WORKSPACE if body.get("scope") == WORKSPACE else principal.user_id
    if owner == WORKSPACE and not principal.can(MANAGE_SHARED):
        raise forbidden()
    if len(_unique(scope, owner, body["name"])) >= MAX_PER_OWNER:
        raise ApiError(409, "too_many_presets", f"At most {MAX_PER_OWNER} presets per person and per workspace; "
                       "delete one first.")
    now = clock.iso()
    item = presets(scope.home)(
        scope.workspace_id, new_id("pre"), owner=owner, name=body["name"], instructions=body["instructions"],
        user_id=None if owner == WORKSPACE else principal.user_id, created_by=principal.user_id, created_at=now,
        updated_at=now)
    item.save(condition=PresetAttrs.id.does_not_exist())
    _audit(scope, item, "preset.created", caller, {"name": item.name})
    return to_public(item)


def get(scope: RequestScope, preset_id: str) -> dict[str, Any]:
    require(scope.principal, "chat.use")
    return to_public(_visible(scope, preset_id))


def instructions_of(scope: RequestScope, preset_id: Any) -> tuple[str, str]:
    """``(id, instructions)`` of a preset the caller may use, for a new chat or agent (400 for a value that
    is no preset id, 404 for one the caller cannot read)."""
    if not isinstance(preset_id, str):
        raise validation_error([{"field": "preset_id", "message": "must be a preset id (pre_...)"}])
    item = _visible(scope, preset_id)
    return item.id, item.instructions


def update(scope: RequestScope, preset_id: str, body: Any, caller: CallerLike | None = None) -> dict[str, Any]:
    principal = scope.principal
    require(principal, "chat.use")
    body = _clean(dict(validate(body, PATCH_FIELDS)))
    if not body:
        raise validation_error([{"field": "body", "message": "must change name or instructions"}])
    item = _visible(scope, preset_id)
    _may_change(principal, item)
    if "name" in body:
        _unique(scope, item.owner, body["name"], other_than=item.id)
    cls = presets(scope.home)
    actions: list[Any] = [cls.updated_at.set(clock.iso())]
    actions += [getattr(cls, k).set(v) for k, v in body.items()]
    item.update(actions=actions, condition=cls.owner == item.owner)
    _audit(scope, item, "preset.updated", caller, {"fields": sorted(body), "name": item.name})
    return to_public(item)


def delete(scope: RequestScope, preset_id: str, caller: CallerLike | None = None) -> None:
    principal = scope.principal
    require(principal, "chat.use")
    item = _visible(scope, preset_id)
    _may_change(principal, item)
    item.delete(condition=PresetAttrs.owner == item.owner)
    _audit(scope, item, "preset.deleted", caller, {"name": item.name})
