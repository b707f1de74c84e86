"""Members of a workspace: list, change role, remove, join by domain.

The last Admin can never be removed or demoted. The check is part of the write: the change is a
DynamoDB transaction that also asserts (ConditionCheck) that another member is still an Admin.
Transactions are serializable, so two concurrent demotions of the last two Admins cannot both pass.
"""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from chalicelib.core import audit, clock
from chalicelib.core.authz import ROLE_VALUES, Role
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.http.validation import F
from chalicelib.core.store.tables import connection
from chalicelib.core.store.transact import Tx
from chalicelib.core.tenancy import MembershipAttrs, RequestScope, forget_scopes, membership_changed, memberships
from chalicelib.platform.workspaces import groups
from chalicelib.platform.workspaces.service import adjust_member_count

ROLE_FIELDS = {"role": F(str, required=True, enum=ROLE_VALUES)}
MAX_TX_ATTEMPTS = 3
USER_PREFIX = "usr_"


def to_public(m: MembershipAttrs) -> dict[str, Any]:
    return {"user_id": m.user_id, "email": m.email, "role": m.role, "joined_at": m.joined_at,
            "joined_via": m.joined_via}


def list_members(scope: RequestScope, limit: int, after: str | None) -> dict[str, Any]:
    cls = memberships(scope.home)
    cond = cls.user_id > after if after else cls.user_id.startswith(USER_PREFIX)
    items = list(cls.query(scope.workspace_id, cond, limit=limit + 1, page_size=limit + 1))
    out = paging.page(items, limit, "members", lambda m: m.user_id)
    return {"members": [to_public(m) for m in out.pop("_items")], **out}


def get_member(scope: RequestScope, user_id: str) -> MembershipAttrs:
    cls = memberships(scope.home)
    try:
        return cls.get(scope.workspace_id, user_id, consistent_read=True)
    except cls.DoesNotExist:
        raise not_found("member") from None


def _other_admin(cls: type[MembershipAttrs], workspace_id: str, user_id: str) -> MembershipAttrs | None:
    for m in cls.query(workspace_id, filter_condition=(cls.role == Role.ADMIN.value) & (cls.user_id != user_id),
                       consistent_read=True):
        return m
    return None


def last_admin() -> ApiError:
    return conflict("last_admin", "A workspace must keep at least one Admin: make another member Admin first.")


def _guarded_write(scope: RequestScope, target: MembershipAttrs, write: Any) -> None:
    """Run ``write(tx)`` in a transaction; when ``target`` is an Admin also assert another Admin stays."""
    workspace_id, region = scope.workspace_id, scope.home
    cls = memberships(region)
    for _ in range(MAX_TX_ATTEMPTS):
        other = _other_admin(cls, workspace_id, target.user_id) if target.role == Role.ADMIN.value else None
        if target.role == Role.ADMIN.value and other is None:
            raise last_admin()
        try:
            with TransactWrite(connection=connection(region)) as tx:
                write(tx)
                if other is not None:
                    tx.condition_check(cls, workspace_id, other.user_id, condition=cls.role == Role.ADMIN.value)
            membership_changed(target.user_id)  # every container applies the change from its next request
            return
        except TransactWriteError:
            target = get_member(scope, target.user_id)  # re-read and decide again
    raise last_admin()


def change_role(scope: RequestScope, user_id: str, role: str, *, actor: audit.Actor,
                caller: Any = None) -> MembershipAttrs:
    target = get_member(scope, user_id)
    if target.role == role:
        return target
    previous = target.role
    cls = memberships(scope.home)

    def write(tx: TransactWrite) -> None:
        tx.update(target, actions=[cls.role.set(role), cls.role_since.set(clock.iso())], condition=cls.role == target.role)

    if role == Role.ADMIN.value:  # a promotion can never remove the last Admin
        try:
            target.update(actions=[cls.role.set(role), cls.role_since.set(clock.iso())], condition=cls.user_id.exists())
        except UpdateError:
            raise not_found("member") from None
    else:
        _guarded_write(scope, target, write)
    audit.append(scope.home, scope.workspace_id, "member.role_changed", actor=actor,
                 target={"type": "user", "id": user_id, "email": target.email},
                 details={"from": previous, "to": role}, caller=caller)
    return get_member(scope, user_id)


def remove_member(scope: RequestScope, user_id: str, *, actor: audit.Actor, caller: Any = None,
                  keep_groups: bool = False, target: MembershipAttrs | None = None) -> None:
    """Remove the membership (``target``: as just read); its group edges go too, unless ``keep_groups``
    (SCIM deactivation moved them to the user's SCIM record)."""
    target = target or get_member(scope, user_id)
    cls = memberships(scope.home)

    def write(tx: TransactWrite) -> None:
        tx.delete(target, condition=cls.role == target.role)

    _guarded_write(scope, target, write)
    if target.groups and not keep_groups:
        groups.drop_edges(scope, user_id, target.groups)
    adjust_member_count(scope.workspace_id, -1)
    audit.append(scope.home, scope.workspace_id, "member.removed", actor=actor,
                 target={"type": "user", "id": user_id, "email": target.email},
                 details={"role": target.role}, caller=caller)


def add_member_tx(tx: TransactWrite | Tx, region: str, workspace_id: str, user_id: str, email: str, role: str,
                  via: str, group_ids: set[str] | None = None) -> None:
    """Add a membership (in ``group_ids``, whose edges exist) inside ``tx``, in the workspace's ``region``
    (fails the transaction when the user already is a member)."""
    cls = memberships(region)
    now = clock.iso()
    tx.save(cls(workspace_id, user_id, role=role, email=email, joined_at=now, joined_via=via, role_since=now,
                groups=group_ids or None), condition=cls.user_id.does_not_exist())
    forget_scopes()  # nothing reads the membership before the commit; every read after it is fresh (the
    # caller calls ``tenancy.membership_changed`` once it committed)
