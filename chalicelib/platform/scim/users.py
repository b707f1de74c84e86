"""SCIM Users of a workspace: provisioned accounts and the membership that follows their ``active`` flag.

Creating a user links (or creates) the platform account of its e-mail address (the primary of ``emails``,
else the first, else ``userName`` when it is an address) and, while ``active``, makes it a Member of the
workspace (``joined_via`` scim); a user sent without any address gets its id, but no account and no
membership until an update brings one; the user signs in through the workspace's SSO connection with that
address. ``active: false`` or DELETE removes the membership the way an Admin's removal does
(``workspaces/members.remove_member``: audited, the last Admin is kept, every token and session of the
user is refused in this workspace from its next request, within ``SCOPE_CACHE_SECONDS`` in other
containers); a deactivated user keeps its SCIM record so the provider can reactivate it. The resource is
stored as the provider sent it (``password`` never: it is not returned and not kept). ``userName`` is
unique in the workspace, case-insensitively. The account's e-mail address itself is the identity
service's: changing ``emails`` here does not change the address the user signs in with.
"""
from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError
from pynamodb.exceptions import DoesNotExist
from pynamodb.transactions import TransactWrite
from scim2_models import Context, EnterpriseUser, PatchOp, SCIMException, User

from chalicelib.core import audit, clock
from chalicelib.core.authz import Role
from chalicelib.core.http.errors import ApiError
from chalicelib.core.http.validation import email as valid_email
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.store.tables import connection
from chalicelib.core.store.transact import Conflict, Refused, Tx
from chalicelib.core.tenancy import forget_scopes, membership, membership_changed
from chalicelib.identity import users as accounts
from chalicelib.platform.models import ScimUserAttrs, name_claims, scim_users
from chalicelib.platform.scim import protocol
from chalicelib.platform.scim.tokens import ScimCaller
from chalicelib.platform.workspaces import groups, members
from chalicelib.platform.workspaces.service import adjust_member_count

ScimUser = User[EnterpriseUser]
USER_PREFIX = groups.SCIM_USER_PREFIX
SCHEMAS = ("urn:ietf:params:scim:schemas:core:2.0:User", "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User")
NAME_PREFIX = "uname#"
_STORED_OUT = ("id", "meta", "groups", "password")
# Entra ID adds ``emails[type eq "work"].value`` (and the like) to a user that has no such entry yet
_VALUE_PATH = re.compile(r'^(?P<attr>[A-Za-z]+)\[type eq "(?P<type>[^"]{1,64})"\]\.(?P<sub>[A-Za-z]+)$', re.I)


def _name_key(user_name: str) -> str:
    return NAME_PREFIX + user_name.strip().casefold()


def not_found() -> ApiError:
    return protocol.error(404, None, "The user does not exist in this workspace.")


def _validate(payload: Any, ctx: Context) -> Any:
    if not isinstance(payload, dict):
        raise protocol.error(400, "invalidSyntax", "The request body must be a JSON object.")
    try:
        user = ScimUser.model_validate(protocol.without_foreign_schemas(payload, SCHEMAS), scim_ctx=ctx)
    except (ValidationError, SCIMException) as exc:
        raise protocol.from_exception(exc) from None
    if not user.user_name or not str(user.user_name).strip():
        raise protocol.error(400, "invalidValue", "userName is required.")
    return user


def _stored(user: Any) -> dict[str, Any]:
    data = user.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    return {k: v for k, v in data.items() if k not in _STORED_OUT}


def _email_of(user: Any) -> str | None:
    """The address the account signs in with: the primary of ``emails``, else the first, else ``userName``
    when it is an address (None: no address yet)."""
    emails = list(user.emails or [])
    chosen = next((e for e in emails if e.primary), emails[0] if emails else None)
    for candidate in ([str(chosen.value)] if chosen is not None and chosen.value else []) + [str(user.user_name)]:
        if valid_email(candidate.strip()) is None and "@" in candidate:
            return candidate.strip()
    return None


def _account(user_id: str, address: str | None) -> Any:
    """The platform account behind a SCIM user: the one of ``user_id``, else one created with that id for
    ``address`` (None while the provider has sent no address: such a user cannot sign in and is no member)."""
    account = accounts.get_user(user_id)
    if account is not None or address is None:
        return account
    if accounts.find_by_email(address) is not None:
        raise _uniqueness("This e-mail address belongs to another account.")
    try:
        return accounts.create_user(address, user_id=user_id)
    except ApiError:
        raise _uniqueness("This e-mail address belongs to another account.") from None


def resource(caller: ScimCaller, rec: ScimUserAttrs, in_groups: set[str] | bool = True) -> dict[str, Any]:
    """The SCIM resource; ``groups`` (read-only: the membership's, read when ``in_groups`` is True, known
    when a set, left out when False) only on single reads."""
    data = json.loads(rec.resource or "{}")
    data.update({"id": rec.user_id, "userName": rec.user_name})
    if rec.active is not None:
        data["active"] = bool(rec.active)
    if rec.external_id:
        data["externalId"] = rec.external_id
    if in_groups is True:
        m = membership(caller.scope.workspace_id, rec.user_id) if rec.active is not False else None
        in_groups = set(m.groups or ()) if m is not None else set()
    if in_groups:
        data["groups"] = [{"value": g, "type": "direct"} for g in sorted(in_groups)]
    location = f"{protocol.base_url(caller.scope)}/Users/{rec.user_id}"
    data["meta"] = {"resourceType": "User", "created": rec.created_at, "lastModified": rec.updated_at,
                    "location": location, "version": protocol.etag(rec.version)}
    return data


def read(caller: ScimCaller, user_id: str, query: dict[str, str]) -> dict[str, Any]:
    """``GET /Users/{id}``."""
    return resource(caller, get_record(caller, user_id))


def get_record(caller: ScimCaller, user_id: str) -> ScimUserAttrs:
    if not is_id(user_id, "usr"):
        raise not_found()
    try:
        return scim_users(caller.scope.home).get(caller.scope.workspace_id, USER_PREFIX + user_id,
                                                         consistent_read=True)
    except DoesNotExist:
        raise not_found() from None


def _uniqueness(detail: str) -> ApiError:
    return protocol.error(409, "uniqueness", detail)


def create(caller: ScimCaller, payload: Any) -> dict[str, Any]:
    """``POST /Users``: the record, its name claim and the audit event in one transaction, then the
    membership (with its own event) while the user is active and has an address."""
    user = _validate(payload, Context.RESOURCE_CREATION_REQUEST)
    ws, region = caller.scope.workspace_id, caller.scope.home
    address = _email_of(user)
    claims, cls = name_claims(region), scim_users(region)
    try:  # before the account is made: a taken userName changes nothing
        claims.get(ws, _name_key(user.user_name), consistent_read=True)
        raise _uniqueness("A user with this userName already exists in this workspace.")
    except DoesNotExist:
        pass
    account = accounts.find_by_email(address) if address else None
    if account is None and address:
        try:
            account = accounts.create_user(address, display_name=(user.display_name or None))
        except ApiError:  # created concurrently
            account = accounts.find_by_email(address)
            if account is None:
                raise
    user_id = account.id if account is not None else new_id("usr")
    now = clock.iso()
    rec = cls(ws, USER_PREFIX + user_id, user_id=user_id, user_name=str(user.user_name).strip(),
              external_id=user.external_id or None, active=user.active,
              resource=json.dumps(_stored(user)), version=1, created_at=now, updated_at=now)

    def effects(tx: Tx) -> None:
        tx.save(claims(ws, _name_key(rec.user_name), owner_id=user_id), condition=claims.key.does_not_exist())
        tx.save(rec, condition=cls.key.does_not_exist())

    try:
        audit.append(region, ws, "scim.user_provisioned", actor=caller.actor,
                     target={"type": "user", "id": user_id, **({"email": account.email} if account else {})},
                     details={"active": rec.active is not False, "has_address": account is not None}, caller=None,
                     effects=effects)
    except Refused:
        raise _uniqueness("This user is already provisioned in this workspace (under its userName or its "
                          "e-mail address).") from None
    in_groups: set[str] = set()
    if rec.active is not False and account is not None:
        in_groups = _activate(caller, rec, account.email)
    return resource(caller, rec, in_groups)


def _activate(caller: ScimCaller, rec: ScimUserAttrs, email: str) -> set[str]:
    """Make the user a Member (the membership and its audit event in one transaction); the groups its
    record held while it was none move to the membership in it. The member's groups after it."""
    ws, region = caller.scope.workspace_id, caller.scope.home
    moved = set(rec.groups or ())

    def effects(tx: Tx) -> None:
        members.add_member_tx(tx, region, ws, rec.user_id, email, Role.MEMBER.value, "scim", moved)
        if moved:
            tx.update(rec, actions=[type(rec).groups.remove()], condition=type(rec).key.exists(), tag="record")

    try:
        audit.append(region, ws, "member.joined", actor=caller.actor,
                     target={"type": "user", "id": rec.user_id, "email": email},
                     details={"via": "scim", "role": Role.MEMBER.value}, effects=effects)
    except Refused:  # a member already (joined meanwhile), or the record went
        m = membership(ws, rec.user_id)
        return set(m.groups or ()) if m is not None else set()
    membership_changed(rec.user_id)
    adjust_member_count(ws, 1)
    forget_scopes()
    return moved


def _deactivate(caller: ScimCaller, user_id: str) -> set[str]:
    """Remove the membership; its groups (and their edges) go back to the user's SCIM record (they grant
    nothing there). The groups moved."""
    ws, region = caller.scope.workspace_id, caller.scope.home
    m = membership(ws, user_id)
    if m is None:
        return set()
    cls = scim_users(region)
    moved = set(m.groups or ())
    if moved:
        cls(ws, USER_PREFIX + user_id).update(actions=[cls.groups.set(moved)])
    try:
        members.remove_member(caller.scope, user_id, actor=caller.actor, keep_groups=True, target=m)
    except ApiError as err:
        if moved:
            cls(ws, USER_PREFIX + user_id).update(actions=[cls.groups.remove()])
        if err.code == "last_admin":
            raise protocol.error(409, "mutability", "This user is the workspace's last Admin: make another member "
                                                    "Admin before deactivating it.") from None
        if err.status != 404:
            raise
        return set()
    return moved


def _save(caller: ScimCaller, rec: ScimUserAttrs, user: Any) -> ScimUserAttrs:
    """Write the new state of ``rec`` (conditional on its version), move its name claim, then make the
    membership follow ``active``."""
    ws, region = caller.scope.workspace_id, caller.scope.home
    claims, cls = name_claims(region), scim_users(region)
    new_name = str(user.user_name).strip()
    active = user.active is not False
    account = _account(rec.user_id, _email_of(user)) if active else None  # before the write: a 409 changes nothing
    now, stored = clock.iso(), json.dumps(_stored(user))
    actions: list[Any] = [cls.user_name.set(new_name), cls.resource.set(stored),
                          cls.active.set(user.active) if user.active is not None else cls.active.remove(),
                          cls.version.add(1), cls.updated_at.set(now)]
    actions.append(cls.external_id.set(user.external_id) if user.external_id else cls.external_id.remove())
    turned = active != (rec.active is not False)

    def effects(tx: Tx) -> None:
        tx.update(rec, actions=actions, condition=cls.version == rec.version)
        if _name_key(new_name) != _name_key(rec.user_name):
            tx.delete(claims(ws, _name_key(rec.user_name)))
            tx.save(claims(ws, _name_key(new_name), owner_id=rec.user_id), condition=claims.key.does_not_exist())

    try:
        if turned:  # the change and its audit event in one transaction
            audit.append(region, ws, "scim.user_activated" if active else "scim.user_deactivated", actor=caller.actor,
                         target={"type": "user", "id": rec.user_id}, effects=effects)
        else:
            tx = Tx(region)
            effects(tx)
            tx.commit()
    except (Refused, Conflict):
        current = get_record(caller, rec.user_id)
        if current.version != rec.version:
            raise protocol.error(412, None, "The user changed meanwhile; read it again.") from None
        raise _uniqueness("A user with this userName already exists in this workspace.") from None
    if active and account is not None and membership(ws, rec.user_id) is None:
        # also a user whose first address just arrived; the record read now holds its groups
        _activate(caller, scim_users(region).get(ws, USER_PREFIX + rec.user_id, consistent_read=True), account.email)
    if turned and not active:
        _deactivate(caller, rec.user_id)
    return cls(ws, rec.key, user_id=rec.user_id, user_name=new_name, external_id=user.external_id or None,
               active=user.active, resource=stored, version=int(rec.version) + 1, created_at=rec.created_at,
               updated_at=now)


def replace(caller: ScimCaller, user_id: str, payload: Any, if_match: str | None) -> dict[str, Any]:
    rec = get_record(caller, user_id)
    protocol.check_if_match(if_match, rec.version)
    return resource(caller, _save(caller, rec, _validate(payload, Context.RESOURCE_REPLACEMENT_REQUEST)))


def _value_paths(payload: Any, current: dict[str, Any]) -> Any:
    """Entra ID's ``add``/``replace`` of ``emails[type eq "work"].value`` on a user without such an entry
    becomes an ``add`` of the entry (RFC 7644 would answer ``noTarget``)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("Operations"), list):
        return payload
    ops = []
    for op in payload["Operations"]:
        if isinstance(op, dict) and isinstance(op.get("path"), str) and str(op.get("op", "")).lower() in ("add", "replace"):
            m = _VALUE_PATH.match(op["path"])
            if m:
                entries = current.get(m["attr"]) or []
                if not any(isinstance(e, dict) and str(e.get("type", "")).lower() == m["type"].lower() for e in entries):
                    op = {"op": "add", "path": m["attr"], "value": [{"type": m["type"], m["sub"]: op.get("value")}]}
        ops.append(op)
    return {**payload, "Operations": ops}


def patch(caller: ScimCaller, user_id: str, payload: Any, if_match: str | None) -> dict[str, Any]:
    rec = get_record(caller, user_id)
    protocol.check_if_match(if_match, rec.version)
    current = resource(caller, rec, False)
    current.pop("meta", None)
    current.pop("groups", None)
    try:
        user = ScimUser.model_validate(current)
        op = PatchOp[ScimUser].model_validate(_value_paths(payload, current),  # type: ignore[misc]
                                              scim_ctx=Context.RESOURCE_PATCH_REQUEST)
        op.patch(user)
    except (ValidationError, SCIMException) as exc:
        raise protocol.from_exception(exc) from None
    if not user.user_name or not str(user.user_name).strip():
        raise protocol.error(400, "invalidValue", "userName is required.")
    return resource(caller, _save(caller, rec, user))


def delete(caller: ScimCaller, user_id: str, if_match: str | None) -> None:
    rec = get_record(caller, user_id)
    protocol.check_if_match(if_match, rec.version)
    moved = _deactivate(caller, rec.user_id)
    ws, region = caller.scope.workspace_id, caller.scope.home
    groups.drop_edges(caller.scope, rec.user_id, moved | set(rec.groups or ()))
    claims = name_claims(region)
    with TransactWrite(connection=connection(region)) as tx:
        tx.delete(rec)
        tx.delete(claims(ws, _name_key(rec.user_name)))
    audit.append(region, ws, "scim.user_deleted", actor=caller.actor, target={"type": "user", "id": rec.user_id})


def all_records(caller: ScimCaller) -> list[ScimUserAttrs]:
    cls = scim_users(caller.scope.home)
    return list(cls.query(caller.scope.workspace_id, cls.key.startswith(USER_PREFIX), consistent_read=True))


def search(caller: ScimCaller, query: dict[str, str]) -> dict[str, Any]:
    """``GET /Users``: filtered (``userName eq`` and ``externalId eq`` cheaply, any other filter by
    evaluation), ordered by id, one ``startIndex``/``count`` page."""
    flt = protocol.parse_filter(ScimUser, query.get("filter"))
    page = protocol.page_of(query)
    eq = protocol.equality(flt, "userName", "externalId")
    if eq and eq[0] == "userName":
        try:
            claim = name_claims(caller.scope.home).get(caller.scope.workspace_id, _name_key(eq[1]),
                                                              consistent_read=True)
            found = [get_record(caller, claim.owner_id)]
        except (DoesNotExist, ApiError):
            found = []
    elif eq:
        found = [r for r in all_records(caller) if r.external_id == eq[1]]
    else:
        found = all_records(caller)
    found.sort(key=lambda r: r.user_id)
    resources = [resource(caller, r, False) for r in found] if flt is None or eq else \
        [x for x in (resource(caller, r, False) for r in found) if _matches(flt, x)]
    chosen = resources[page.start - 1: page.start - 1 + page.count]
    return protocol.list_response(chosen, len(resources), page)


def _matches(flt: Any, data: dict[str, Any]) -> bool:
    try:
        return bool(flt.match(ScimUser.model_validate(data)))
    except (ValidationError, SCIMException):
        return False
