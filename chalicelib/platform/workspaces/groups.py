"""Workspace groups: made by Admins (REST) or by the workspace's identity provider (SCIM), used in ACLs.

A group is an item of the ``directory`` table (``platform/models.py``); who belongs to it is the
``groups`` set of each membership (``core.tenancy``), which the authorisation path reads with the role on
every request, so adding or removing a member applies to the member's next request (within
``SCOPE_CACHE_SECONDS`` in other containers) on every path that matches ``group:<id>`` entries. Each edge
is also an item of its own (``gmem#<group>#<user>``), so a group's members, and deleting a group, cost
the size of that group, never of the workspace. A member joins or leaves a group in one transaction: the
``groups`` set, the edge item, the group's ``version`` and the audit event.

Names are unique in a workspace (case-insensitively, through a name claim item). A group the identity
provider manages (``source`` scim) is changed only over SCIM: REST answers 409 ``managed_by_provisioning``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from chalicelib.core import audit, clock
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.http.validation import F
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.store.tables import connection
from chalicelib.core.store.transact import Refused, Tx
from chalicelib.core.tenancy import MembershipAttrs, RequestScope, forget_scopes, memberships
from chalicelib.platform.models import (
    GroupAttrs,
    GroupMemberAttrs,
    ScimUserAttrs,
    group_members,
    groups_table,
    name_claims,
    scim_users,
)

GROUP_PREFIX = "grp#"
SCIM_USER_PREFIX = "user#"  # platform/scim/users.py: a provisioned user's record
NAME_PREFIX = "gname#"
EDGE_PREFIX = "gmem#"  # platform/models.py GroupMemberAttrs: sorts before GROUP_PREFIX, so lists of groups skip it
MAX_ATTEMPTS = 5  # a member change lost to a concurrent change of the same group reads it and tries again
MAX_NAME = 200
MAX_DESCRIPTION = 1000
MAX_GROUPS = 1000  # per workspace
CREATE_FIELDS = {"name": F(str, required=True, min_len=1, max_len=MAX_NAME, pattern=r"^.*\S.*$"),
                 "description": F(str, max_len=MAX_DESCRIPTION)}
UPDATE_FIELDS = {"name": F(str, min_len=1, max_len=MAX_NAME, pattern=r"^.*\S.*$"),
                 "description": F(str, max_len=MAX_DESCRIPTION)}


def to_public(g: GroupAttrs) -> dict[str, Any]:
    return {"id": g.group_id, "name": g.name, "description": g.description, "source": g.source,
            "external_id": g.external_id, "version": int(g.version), "created_at": g.created_at,
            "updated_at": g.updated_at}


def _name_key(name: str) -> str:
    return NAME_PREFIX + name.strip().casefold()


def name_taken() -> ApiError:
    return conflict("group_name_taken", "Another group of this workspace has this name.")


def get_group(scope: RequestScope, group_id: str) -> GroupAttrs:
    """The group, or a 404 (a malformed id never reaches DynamoDB)."""
    if not is_id(group_id, "grp"):
        raise not_found("group")
    try:
        return groups_table(scope.home).get(scope.workspace_id, GROUP_PREFIX + group_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("group") from None


def all_groups(scope: RequestScope) -> list[GroupAttrs]:
    cls = groups_table(scope.home)
    return list(cls.query(scope.workspace_id, cls.key.startswith(GROUP_PREFIX), consistent_read=True))


def list_groups(scope: RequestScope, limit: int, after: str | None) -> dict[str, Any]:
    cls = groups_table(scope.home)
    cond = cls.key > GROUP_PREFIX + after if after else cls.key.startswith(GROUP_PREFIX)
    items = [g for g in cls.query(scope.workspace_id, cond, limit=limit + 1, page_size=limit + 1)
             if g.key.startswith(GROUP_PREFIX)]
    out = paging.page(items, limit, "groups", lambda g: g.group_id)
    return {"groups": [to_public(g) for g in out.pop("_items")], **out}


def find_by_name(scope: RequestScope, name: str) -> GroupAttrs | None:
    try:
        claim = name_claims(scope.home).get(scope.workspace_id, _name_key(name), consistent_read=True)
    except DoesNotExist:
        return None
    try:
        return get_group(scope, claim.owner_id)
    except ApiError:
        return None


def _count(scope: RequestScope) -> int:
    cls = groups_table(scope.home)
    return int(cls.count(scope.workspace_id, cls.key.startswith(GROUP_PREFIX), consistent_read=True))


def create_group(scope: RequestScope, name: str, *, description: str = "", source: str = "admin",
                 external_id: str | None = None, actor: audit.Actor, caller: Any = None) -> GroupAttrs:
    """The group, its name claim and the audit event in one transaction (409 when the name is taken)."""
    workspace_id, region = scope.workspace_id, scope.home
    if _count(scope) >= MAX_GROUPS:
        raise ApiError(422, "too_many_groups", f"A workspace holds at most {MAX_GROUPS} groups.")
    cls, claims = groups_table(region), name_claims(region)
    gid, now = new_id("grp"), clock.iso()
    group = cls(workspace_id, GROUP_PREFIX + gid, group_id=gid, name=name.strip(), description=description,
                source=source, external_id=external_id, version=1, created_at=now, updated_at=now)

    def effects(tx: Tx) -> None:
        tx.save(claims(workspace_id, _name_key(name), owner_id=gid), condition=claims.key.does_not_exist())
        tx.save(group, condition=cls.key.does_not_exist())

    try:
        audit.append(region, workspace_id, "group.created", actor=actor, target={"type": "group", "id": gid},
                     details={"name": group.name, "source": source}, caller=caller, effects=effects)
    except Refused:
        raise name_taken() from None
    return group


def update_group(scope: RequestScope, group: GroupAttrs, *, name: str | None = None, description: str | None = None,
                 external_id: str | None = None, actor: audit.Actor, caller: Any = None) -> GroupAttrs:
    """Rename or describe a group (one transaction moves the name claim); bumps its version."""
    workspace_id, region = scope.workspace_id, scope.home
    cls, claims = groups_table(region), name_claims(region)
    actions: list[Any] = [cls.version.add(1), cls.updated_at.set(clock.iso())]
    changes: dict[str, Any] = {}
    if description is not None and description != group.description:
        actions.append(cls.description.set(description))
        changes["description"] = True
    if external_id is not None and external_id != (group.external_id or ""):  # "": remove it
        actions.append(cls.external_id.set(external_id) if external_id else cls.external_id.remove())
    renamed = name is not None and name.strip() != group.name
    if renamed:
        assert name is not None
        actions.append(cls.name.set(name.strip()))
        changes["name"] = {"from": group.name, "to": name.strip()}
    try:
        with TransactWrite(connection=connection(region)) as tx:
            tx.update(group, actions=actions, condition=cls.version == group.version)
            if renamed and _name_key(name or "") != _name_key(group.name):
                tx.delete(claims(workspace_id, _name_key(group.name)))
                tx.save(claims(workspace_id, _name_key(name or ""), owner_id=group.group_id),
                        condition=claims.key.does_not_exist())
    except TransactWriteError:
        current = get_group(scope, group.group_id)
        if current.version != group.version:
            raise ApiError(409, "concurrent_update", "The group changed meanwhile; read it again and retry.") from None
        raise name_taken() from None
    if changes:
        audit.append(region, workspace_id, "group.updated", actor=actor,
                     target={"type": "group", "id": group.group_id}, details=changes, caller=caller)
    return get_group(scope, group.group_id)


def delete_group(scope: RequestScope, group: GroupAttrs, *, actor: audit.Actor, caller: Any = None) -> None:
    """Delete the group (with its name claim and audit event, in one transaction), then take it out of each
    of its members: a query over the group's edges (adding a member needs the group, so none is added
    meanwhile; ACL entries naming the group match nobody from then on)."""
    workspace_id, region = scope.workspace_id, scope.home
    claims = name_claims(region)

    def effects(tx: Tx) -> None:
        tx.delete(group)
        tx.delete(claims(workspace_id, _name_key(group.name)))

    audit.append(region, workspace_id, "group.deleted", actor=actor, target={"type": "group", "id": group.group_id},
                 details={"name": group.name}, caller=caller, effects=effects)
    found = list(edges(scope, group.group_id))
    mcls, rcls = memberships(region), scim_users(region)
    for e in found:  # the edge is on the membership, else on the SCIM record of a user that is no member now
        try:
            mcls(workspace_id, e.user_id).update(actions=[mcls.groups.delete({group.group_id})],
                                                 condition=mcls.user_id.exists())
        except UpdateError:
            with contextlib.suppress(UpdateError):
                rcls(workspace_id, SCIM_USER_PREFIX + e.user_id).update(
                    actions=[rcls.groups.delete({group.group_id})], condition=rcls.key.exists())
    _delete_edges(region, found)
    forget_scopes()


def _edge_key(group_id: str, user_id: str) -> str:
    return f"{EDGE_PREFIX}{group_id}#{user_id}"


def edges(scope: RequestScope, group_id: str, after: str | None = None) -> Iterator[GroupMemberAttrs]:
    """The group's edges (members, and provisioned users that are no member now), in user id order."""
    cls = group_members(scope.home)
    prefix = _edge_key(group_id, "")
    cond = cls.key.between(prefix + after + "\x00", prefix + "\U0010ffff") if after else cls.key.startswith(prefix)
    return cls.query(scope.workspace_id, cond, consistent_read=True)


def edges_by_group(scope: RequestScope) -> dict[str, list[GroupMemberAttrs]]:
    """Every group's edges, from one query over the workspace's edges (for lists of groups)."""
    cls = group_members(scope.home)
    out: dict[str, list[GroupMemberAttrs]] = {}
    for e in cls.query(scope.workspace_id, cls.key.startswith(EDGE_PREFIX), consistent_read=True):
        out.setdefault(e.group_id, []).append(e)
    return out


def _delete_edges(region: str, found: Iterable[GroupMemberAttrs]) -> None:
    with group_members(region).batch_write() as batch:
        for e in found:
            batch.delete(e)


def drop_edges(scope: RequestScope, user_id: str, group_ids: Iterable[str]) -> None:
    """Delete the edges of a user whose membership (and SCIM record) no longer holds these groups."""
    workspace_id, region = scope.workspace_id, scope.home
    cls = group_members(region)
    _delete_edges(region, [cls(workspace_id, _edge_key(g, user_id)) for g in sorted(set(group_ids))])


def member_ids(scope: RequestScope, group_id: str) -> list[str]:
    """The user ids of the group's members, sorted (provisioned users that are no member now included)."""
    return [e.user_id for e in edges(scope, group_id)]


def list_members(scope: RequestScope, group_id: str, limit: int, after: str | None) -> dict[str, Any]:
    """One page of the group's workspace members: its edges in pages, each page's memberships in one
    batch read (a provisioned user that is no member now is left out)."""
    get_group(scope, group_id)
    mcls = memberships(scope.home)
    found: list[MembershipAttrs] = []
    chunk: list[GroupMemberAttrs] = []

    def take() -> None:
        got = {m.user_id: m for m in mcls.batch_get([(scope.workspace_id, e.user_id) for e in chunk], consistent_read=True)}
        found.extend(got[e.user_id] for e in chunk if e.user_id in got)
        chunk.clear()

    for e in edges(scope, group_id, after):
        chunk.append(e)
        if len(chunk) > limit:
            take()
            if len(found) > limit:
                break
    if chunk and len(found) <= limit:
        take()
    out = paging.page(found[: limit + 1], limit, "group_members", lambda m: m.user_id)
    return {"members": [{"user_id": m.user_id, "email": m.email, "role": m.role} for m in out.pop("_items")], **out}


def _holder(scope: RequestScope, user_id: str) -> MembershipAttrs | ScimUserAttrs:
    """Where the user's group edges live: the membership, else (a provisioned user that is no member
    now) its SCIM record; 404 for anyone else."""
    workspace_id, region = scope.workspace_id, scope.home
    if not is_id(user_id, "usr"):
        raise not_found("member")
    try:
        return memberships(region).get(workspace_id, user_id, consistent_read=True)
    except DoesNotExist:
        pass
    try:
        return scim_users(region).get(workspace_id, SCIM_USER_PREFIX + user_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("member") from None


def _change(scope: RequestScope, group: GroupAttrs, user_id: str, add: bool, *, actor: audit.Actor,
            caller: Any) -> GroupMemberAttrs | None:
    """Add (or remove) one member: the holder's ``groups`` set, the group's edge, the group's version and
    the audit event in one transaction. Returns the edge (None when nothing changed); ``group`` then holds
    the new version. 404 when the user is neither a member of the workspace nor provisioned there, or
    when the group was deleted meanwhile."""
    workspace_id, region = scope.workspace_id, scope.home
    gcls, ecls = groups_table(region), group_members(region)
    m = _holder(scope, user_id)
    if (group.group_id in (m.groups or ())) == add:
        return None
    mcls = type(m)
    action = mcls.groups.add({group.group_id}) if add else mcls.groups.delete({group.group_id})
    display = m.email if isinstance(m, MembershipAttrs) else m.user_name
    edge = ecls(workspace_id, _edge_key(group.group_id, user_id), group_id=group.group_id, user_id=user_id,
                display=display)
    for _ in range(MAX_ATTEMPTS):
        now = clock.iso()

        def effects(tx: Tx, now: str = now) -> None:
            tx.update(m, actions=[action], condition=mcls.workspace_id.exists(), tag="holder")
            if add:
                tx.save(edge)
            else:
                tx.delete(edge)
            tx.update(group, actions=[gcls.version.add(1), gcls.updated_at.set(now)],
                      condition=gcls.version == group.version, tag="group")

        try:
            audit.append(region, workspace_id, "group.member_added" if add else "group.member_removed", actor=actor,
                         target={"type": "user", "id": user_id}, details={"group_id": group.group_id}, caller=caller,
                         effects=effects)
        except Refused as refused:
            current = get_group(scope, group.group_id)  # 404 when it was deleted meanwhile
            if "holder" in refused.tags:
                raise not_found("member") from None
            group.version, group.updated_at = current.version, current.updated_at  # changed meanwhile: again
            continue
        group.version, group.updated_at = int(group.version) + 1, now
        forget_scopes()  # this container applies the change from its next request
        return edge
    raise ApiError(409, "concurrent_update", "The group changed meanwhile; retry.")


def add_member(scope: RequestScope, group: GroupAttrs, user_id: str, *, actor: audit.Actor,
               caller: Any = None) -> GroupMemberAttrs | None:
    """Add the user to the group: its edge, or None when it was in the group already."""
    return _change(scope, group, user_id, True, actor=actor, caller=caller)


def remove_member(scope: RequestScope, group: GroupAttrs, user_id: str, *, actor: audit.Actor,
                  caller: Any = None) -> bool:
    return _change(scope, group, user_id, False, actor=actor, caller=caller) is not None


def editable(group: GroupAttrs) -> GroupAttrs:
    """The group, when REST may change it (409 for one the identity provider manages over SCIM)."""
    if group.source == "scim":
        raise conflict("managed_by_provisioning", "Your identity provider manages this group over SCIM: change it "
                                                  "there.")
    return group
