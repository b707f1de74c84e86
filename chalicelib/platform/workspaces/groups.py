"""Workspace groups: made by Admins (REST) or by the workspace's identity provider (SCIM), used in ACLs.

A group is an item of the ``directory`` table (``platform/models.py``); who belongs to it is the
``groups`` set of each membership (``core.tenancy``), which the authorisation path reads with the role on
every request, so adding or removing a member applies to the member's next request (within
``SCOPE_CACHE_SECONDS`` in other containers) on every path that matches ``group:<id>`` entries. A member
joins or leaves a group in one transaction that also bumps the group's ``version``.

Names are unique in a workspace (case-insensitively, through a name claim item). A group the identity
provider manages (``source`` scim) is changed only over SCIM: REST answers 409 ``managed_by_provisioning``.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pynamodb.exceptions import DoesNotExist, TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.core import audit, clock
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.http.validation import F
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.store.tables import connection
from chalicelib.core.tenancy import MembershipAttrs, forget_scopes, memberships, region_of
from chalicelib.platform.models import GroupAttrs, ScimUserAttrs, groups_table, name_claims, scim_users

GROUP_PREFIX = "grp#"
SCIM_USER_PREFIX = "user#"  # platform/scim/users.py: a provisioned user's record
NAME_PREFIX = "gname#"
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


def get_group(workspace_id: str, group_id: str) -> GroupAttrs:
    """The group, or a 404 (a malformed id never reaches DynamoDB)."""
    if not is_id(group_id, "grp"):
        raise not_found("group")
    try:
        return groups_table(region_of(workspace_id)).get(workspace_id, GROUP_PREFIX + group_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("group") from None


def all_groups(workspace_id: str) -> list[GroupAttrs]:
    cls = groups_table(region_of(workspace_id))
    return list(cls.query(workspace_id, cls.key.startswith(GROUP_PREFIX), consistent_read=True))


def list_groups(workspace_id: str, limit: int, after: str | None) -> dict[str, Any]:
    cls = groups_table(region_of(workspace_id))
    cond = cls.key > GROUP_PREFIX + after if after else cls.key.startswith(GROUP_PREFIX)
    items = [g for g in cls.query(workspace_id, cond, limit=limit + 1, page_size=limit + 1)
             if g.key.startswith(GROUP_PREFIX)]
    out = paging.page(items, limit, "groups", lambda g: g.group_id)
    return {"groups": [to_public(g) for g in out.pop("_items")], **out}


def find_by_name(workspace_id: str, name: str) -> GroupAttrs | None:
    try:
        claim = name_claims(region_of(workspace_id)).get(workspace_id, _name_key(name), consistent_read=True)
    except DoesNotExist:
        return None
    try:
        return get_group(workspace_id, claim.owner_id)
    except ApiError:
        return None


def create_group(workspace_id: str, name: str, *, description: str = "", source: str = "admin",
                 external_id: str | None = None, actor: audit.Actor, caller: Any = None) -> GroupAttrs:
    region = region_of(workspace_id)
    if len(all_groups(workspace_id)) >= MAX_GROUPS:
        raise ApiError(422, "too_many_groups", f"A workspace holds at most {MAX_GROUPS} groups.")
    cls, claims = groups_table(region), name_claims(region)
    gid, now = new_id("grp"), clock.iso()
    group = cls(workspace_id, GROUP_PREFIX + gid, group_id=gid, name=name.strip(), description=description,
                source=source, external_id=external_id, version=1, created_at=now, updated_at=now)
    try:
        with TransactWrite(connection=connection(region)) as tx:
            tx.save(claims(workspace_id, _name_key(name), owner_id=gid), condition=claims.key.does_not_exist())
            tx.save(group, condition=cls.key.does_not_exist())
    except TransactWriteError:
        raise name_taken() from None
    audit.append(region, workspace_id, "group.created", actor=actor, target={"type": "group", "id": gid},
                 details={"name": group.name, "source": source}, caller=caller)
    return group


def update_group(workspace_id: str, group: GroupAttrs, *, name: str | None = None, description: str | None = None,
                 external_id: str | None = None, actor: audit.Actor, caller: Any = None) -> GroupAttrs:
    """Rename or describe a group (one transaction moves the name claim); bumps its version."""
    region = region_of(workspace_id)
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
        current = get_group(workspace_id, group.group_id)
        if current.version != group.version:
            raise ApiError(409, "concurrent_update", "The group changed meanwhile; read it again and retry.") from None
        raise name_taken() from None
    if changes:
        audit.append(region, workspace_id, "group.updated", actor=actor,
                     target={"type": "group", "id": group.group_id}, details=changes, caller=caller)
    return get_group(workspace_id, group.group_id)


def delete_group(workspace_id: str, group: GroupAttrs, *, actor: audit.Actor, caller: Any = None) -> None:
    """Delete the group, then take it out of every membership (adding a member needs the group, so none
    is added meanwhile; ACL entries naming the group match nobody from then on)."""
    region = region_of(workspace_id)
    claims = name_claims(region)
    with TransactWrite(connection=connection(region)) as tx:
        tx.delete(group)
        tx.delete(claims(workspace_id, _name_key(group.name)))
    mcls = memberships(region)
    for m in _members_query(workspace_id, group.group_id):
        m.update(actions=[mcls.groups.delete({group.group_id})])
    for rec in pending_members(workspace_id).get(group.group_id, []):
        rec.update(actions=[type(rec).groups.delete({group.group_id})])
    forget_scopes()
    audit.append(region, workspace_id, "group.deleted", actor=actor, target={"type": "group", "id": group.group_id},
                 details={"name": group.name}, caller=caller)


def _members_query(workspace_id: str, group_id: str) -> Iterable[MembershipAttrs]:
    cls = memberships(region_of(workspace_id))
    return cls.query(workspace_id, cls.user_id.startswith("usr_"), filter_condition=cls.groups.contains(group_id),
                     consistent_read=True)


def member_ids(workspace_id: str, group_id: str) -> list[str]:
    """The user ids of the group's members, sorted."""
    return sorted(m.user_id for m in _members_query(workspace_id, group_id))


def members_by_group(workspace_id: str) -> dict[str, list[MembershipAttrs]]:
    """Every group's members, from one read of the workspace's memberships (for lists of groups)."""
    out: dict[str, list[MembershipAttrs]] = {}
    cls = memberships(region_of(workspace_id))
    for m in cls.query(workspace_id, cls.user_id.startswith("usr_"), consistent_read=True):
        for gid in m.groups or ():
            out.setdefault(gid, []).append(m)
    return out


def list_members(workspace_id: str, group_id: str, limit: int, after: str | None) -> dict[str, Any]:
    get_group(workspace_id, group_id)
    found = [m for m in _members_query(workspace_id, group_id) if after is None or m.user_id > after]
    found.sort(key=lambda m: m.user_id)
    out = paging.page(found[: limit + 1], limit, "group_members", lambda m: m.user_id)
    return {"members": [{"user_id": m.user_id, "email": m.email, "role": m.role} for m in out.pop("_items")], **out}


def _holder(workspace_id: str, user_id: str) -> MembershipAttrs | ScimUserAttrs:
    """Where the user's group edges live: the membership, else (a provisioned user that is no member
    now) its SCIM record; 404 for anyone else."""
    region = region_of(workspace_id)
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


def pending_members(workspace_id: str) -> dict[str, list[ScimUserAttrs]]:
    """group id -> the provisioned users in it that are no member now (SCIM shows them; they hold nothing)."""
    cls = scim_users(region_of(workspace_id))
    out: dict[str, list[ScimUserAttrs]] = {}
    for rec in cls.query(workspace_id, cls.key.startswith(SCIM_USER_PREFIX), filter_condition=cls.groups.exists(),
                         consistent_read=True):
        for gid in rec.groups or ():
            out.setdefault(gid, []).append(rec)
    return out


def _change(workspace_id: str, group: GroupAttrs, user_id: str, add: bool) -> bool:
    """Add (or remove) one member in one transaction with the group's version bump; False when nothing
    changed. 404 when the user is neither a member of the workspace nor provisioned there."""
    region = region_of(workspace_id)
    gcls = groups_table(region)
    m = _holder(workspace_id, user_id)
    if (group.group_id in (m.groups or ())) == add:
        return False
    mcls = type(m)
    action = mcls.groups.add({group.group_id}) if add else mcls.groups.delete({group.group_id})
    try:
        with TransactWrite(connection=connection(region)) as tx:
            tx.update(m, actions=[action], condition=mcls.workspace_id.exists())
            tx.update(group, actions=[gcls.version.add(1), gcls.updated_at.set(clock.iso())],
                      condition=gcls.key.exists())
    except TransactWriteError:
        get_group(workspace_id, group.group_id)  # 404 when it was deleted meanwhile
        raise not_found("member") from None
    forget_scopes()  # this container applies the change from its next request
    return True


def add_member(workspace_id: str, group: GroupAttrs, user_id: str, *, actor: audit.Actor, caller: Any = None) -> bool:
    changed = _change(workspace_id, group, user_id, True)
    if changed:
        audit.append(region_of(workspace_id), workspace_id, "group.member_added", actor=actor,
                     target={"type": "user", "id": user_id}, details={"group_id": group.group_id}, caller=caller)
    return changed


def remove_member(workspace_id: str, group: GroupAttrs, user_id: str, *, actor: audit.Actor,
                  caller: Any = None) -> bool:
    changed = _change(workspace_id, group, user_id, False)
    if changed:
        audit.append(region_of(workspace_id), workspace_id, "group.member_removed", actor=actor,
                     target={"type": "user", "id": user_id}, details={"group_id": group.group_id}, caller=caller)
    return changed


def editable(group: GroupAttrs) -> GroupAttrs:
    """The group, when REST may change it (409 for one the identity provider manages over SCIM)."""
    if group.source == "scim":
        raise conflict("managed_by_provisioning", "Your identity provider manages this group over SCIM: change it "
                                                  "there.")
    return group
