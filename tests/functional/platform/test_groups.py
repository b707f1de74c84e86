"""Workspace groups over REST, and what a group grants: a dataset ACL entry and a model allow-list entry
apply to the group's members from their next request, and stop applying when they leave the group."""
from __future__ import annotations

from chalice.test import Client

from chalicelib.core.tenancy import membership
from chalicelib.groups import create_app
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.functional.gateway.data import field, put_dataset
from tests.functional.platform.helpers import add_member, call
from tests.functional.platform.scim_client import scim, scim_token

PLATFORM = create_app("platform")
GATEWAY = create_app("gateway")


def _groups(ws: str) -> str:
    return f"/v1/workspaces/{ws}/groups"


def test_admins_manage_groups_and_members(tenant: Tenant) -> None:
    member = add_member(tenant.workspace_id, "mia@example.com", "member")
    base = _groups(tenant.workspace_id)
    with Client(PLATFORM) as c:
        status, g, _ = call(c, "POST", base, tenant.token, {"name": "Finance", "description": "the money people"})
        assert status == 201 and g["id"].startswith("grp_") and g["source"] == "admin" and g["version"] == 1
        assert call(c, "POST", base, tenant.token, {"name": " finance "})[1]["code"] == "group_name_taken"
        assert call(c, "POST", base, member.token, {"name": "Sales"})[0] == 403
        assert call(c, "GET", base, member.token)[0] == 403
        status, added, _ = call(c, "PUT", f"{base}/{g['id']}/members/{member.user_id}", tenant.token)
        assert status == 201 and added["added"] is True
        assert call(c, "PUT", f"{base}/{g['id']}/members/{member.user_id}", tenant.token)[1]["added"] is False
        status, listed, _ = call(c, "GET", f"{base}/{g['id']}/members", tenant.token)
        assert [m["user_id"] for m in listed["members"]] == [member.user_id]
        status, renamed, _ = call(c, "PATCH", f"{base}/{g['id']}", tenant.token, {"name": "Finance EU"})
        assert status == 200 and renamed["name"] == "Finance EU" and renamed["version"] == 3
        assert call(c, "POST", base, tenant.token, {"name": "Finance"})[0] == 201  # the old name is free again
        assert call(c, "DELETE", f"{base}/{g['id']}/members/{member.user_id}", tenant.token)[0] == 204
        assert membership(tenant.workspace_id, member.user_id).groups in (None, set())
        assert call(c, "PUT", f"{base}/{g['id']}/members/{member.user_id}", tenant.token)[0] == 201
        assert call(c, "DELETE", f"{base}/{g['id']}", tenant.token)[0] == 204
        assert call(c, "GET", f"{base}/{g['id']}", tenant.token)[0] == 404
        assert g["id"] not in (membership(tenant.workspace_id, member.user_id).groups or ())
        status, listed, _ = call(c, "GET", base, tenant.token)
        assert [x["name"] for x in listed["groups"]] == ["Finance"]


def test_bad_group_input_is_refused(tenant: Tenant) -> None:
    base = _groups(tenant.workspace_id)
    stranger = make_tenant("bob@bravo.example.com", name="Bravo")
    with Client(PLATFORM) as c:
        for body in ({}, {"name": ""}, {"name": "   "}, {"name": "x" * 201}, {"name": "A", "extra": 1}, {"name": 5}):
            status, problem, _ = call(c, "POST", base, tenant.token, body)
            assert status == 400 and problem["code"] == "validation_failed", body
        g = call(c, "POST", base, tenant.token, {"name": "Ops"})[1]
        assert call(c, "GET", f"{base}/grp_nope", tenant.token)[0] == 404
        assert call(c, "PUT", f"{base}/{g['id']}/members/usr_01ARZ3NDEKTSV4RRFFQ69G5FAV", tenant.token)[0] == 404
        assert call(c, "PUT", f"{base}/{g['id']}/members/{stranger.user_id}", tenant.token)[0] == 404
        assert call(c, "GET", f"{_groups(stranger.workspace_id)}/{g['id']}", stranger.token)[0] == 404
        assert call(c, "GET", f"{base}/{g['id']}", stranger.token)[0] == 404
        assert call(c, "GET", f"{base}/{g['id']}", tenant.token)[1]["version"] == 1


def test_groups_the_identity_provider_manages_are_changed_only_over_scim(tenant: Tenant) -> None:
    with Client(PLATFORM) as c:
        token = scim_token(c, tenant)
        status, g, _ = scim(c, tenant, token, "POST", "/Groups", {
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "Engineering"})
        assert status == 201
        base = _groups(tenant.workspace_id)
        status, listed, _ = call(c, "GET", f"{base}/{g['id']}", tenant.token)
        assert listed["source"] == "scim"
        for method, path, body in (("PATCH", f"{base}/{g['id']}", {"name": "x"}), ("DELETE", f"{base}/{g['id']}", None),
                                   ("PUT", f"{base}/{g['id']}/members/{tenant.user_id}", None)):
            status, problem, _ = call(c, method, path, tenant.token, body)
            assert status == 409 and problem["code"] == "managed_by_provisioning", method
        status, body, _ = scim(c, tenant, token, "POST", "/Groups", {
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "engineering"})
        assert status == 409 and body["scimType"] == "uniqueness"


def test_a_group_grants_a_dataset_and_models_until_the_member_leaves_it(tenant: Tenant) -> None:
    member = add_member(tenant.workspace_id, "mia@example.com", "member")
    base = _groups(tenant.workspace_id)
    with Client(PLATFORM) as c, Client(GATEWAY) as gw:
        g = call(c, "POST", base, tenant.token, {"name": "Finance"})[1]
        ds = put_dataset(tenant.workspace_id, tenant.region, "ledger", [field("amount", "INTEGER")], [(1,)],
                         acl=[{"type": "role", "id": "admin"}, {"type": "group", "id": g["id"]}])
        allow = {"roles": {"member": [], f"group:{g['id']}": ["builtin/extractive"]}}
        assert call(c, "PUT", "/v1/models/allow-list", tenant.token, allow)[0] == 200

        def sees() -> tuple[int, list[str]]:
            status = gw.http.get(f"/v1/catalog/datasets/{ds}", headers=bearer(member.token)).status_code
            models = [m["id"] for m in call(c, "GET", "/v1/models", member.token)[1]["items"]]
            return status, models

        assert sees() == (404, [])
        assert call(c, "PUT", f"{base}/{g['id']}/members/{member.user_id}", tenant.token)[0] == 201
        assert sees() == (200, ["builtin/extractive"])  # the same token, from its next request
        assert call(c, "DELETE", f"{base}/{g['id']}/members/{member.user_id}", tenant.token)[0] == 204
        assert sees() == (404, [])
        bad = {"roles": {"group:grp_nope": []}}
        assert call(c, "PUT", "/v1/models/allow-list", tenant.token, bad)[0] == 400


def test_a_groups_members_follow_the_membership_lifecycle(tenant: Tenant) -> None:
    """Each group edge is an item of its own: it stays while a provisioned user is deactivated (SCIM still
    shows it, REST lists members only), moves back on reactivation, and goes with the membership, the SCIM
    user and the group."""
    from chalicelib.core.tenancy import workspace_scope
    from chalicelib.platform.workspaces import groups

    ws, base = tenant.workspace_id, _groups(tenant.workspace_id)
    scope = workspace_scope(ws)
    patch = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
    mia, leo = add_member(ws, "mia@example.com", "member"), add_member(ws, "leo@example.com", "member")
    with Client(PLATFORM) as c:
        token = scim_token(c, tenant)
        ada = scim(c, tenant, token, "POST", "/Users", {
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ada@example.com"})[1]
        g = scim(c, tenant, token, "POST", "/Groups", {
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "Ops",
            "members": [{"value": u} for u in (mia.user_id, leo.user_id, ada["id"])]})[1]
        assert sorted(m["value"] for m in g["members"]) == sorted([mia.user_id, leo.user_id, ada["id"]])
        active = {"schemas": [patch], "Operations": [{"op": "replace", "value": {"active": False}}]}
        assert scim(c, tenant, token, "PATCH", f"/Users/{ada['id']}", active)[0] == 200
        assert membership(ws, ada["id"]) is None
        shown = scim(c, tenant, token, "GET", f"/Groups/{g['id']}")[1]
        assert {m["value"]: m["display"] for m in shown["members"]}[ada["id"]] == "ada@example.com"
        page1 = call(c, "GET", f"{base}/{g['id']}/members?limit=1", tenant.token)[1]
        page2 = call(c, "GET", f"{base}/{g['id']}/members?limit=1&after={page1['next_cursor']}", tenant.token)[1]
        assert [m["user_id"] for m in page1["members"] + page2["members"]] == sorted([mia.user_id, leo.user_id])
        assert page2["has_more"] is False
        active["Operations"][0]["value"]["active"] = True
        assert scim(c, tenant, token, "PATCH", f"/Users/{ada['id']}", active)[0] == 200
        assert membership(ws, ada["id"]).groups == {g["id"]}
        assert call(c, "DELETE", f"/v1/workspaces/{ws}/members/{mia.user_id}", tenant.token)[0] == 204
        assert scim(c, tenant, token, "DELETE", f"/Users/{ada['id']}")[0] == 204
        assert groups.member_ids(scope, g["id"]) == [leo.user_id]
        assert [m["value"] for m in scim(c, tenant, token, "GET", f"/Groups/{g['id']}")[1]["members"]] == [leo.user_id]
        assert scim(c, tenant, token, "DELETE", f"/Groups/{g['id']}")[0] == 204
        assert groups.member_ids(scope, g["id"]) == [] and not membership(ws, leo.user_id).groups


def test_a_member_change_on_a_stale_group_reads_it_again_and_a_deleted_group_is_404(tenant: Tenant) -> None:
    from chalicelib.core.audit import Actor
    from chalicelib.core.http.errors import ApiError
    from chalicelib.core.tenancy import workspace_scope
    from chalicelib.platform.workspaces import groups

    ws, actor = tenant.workspace_id, Actor("user", tenant.user_id, tenant.email)
    scope = workspace_scope(ws)
    mia, leo = add_member(ws, "mia@example.com", "member"), add_member(ws, "leo@example.com", "member")
    g = groups.create_group(scope, "Ops", actor=actor)
    stale = groups.get_group(scope, g.group_id)
    assert groups.add_member(scope, g, mia.user_id, actor=actor) is not None and g.version == 2
    edge = groups.add_member(scope, stale, leo.user_id, actor=actor)  # version 1 is gone: read again, then add
    assert edge is not None and edge.display == "leo@example.com" and stale.version == 3
    assert groups.get_group(scope, g.group_id).version == 3 and groups.member_ids(scope, g.group_id) == sorted(
        [mia.user_id, leo.user_id])
    groups.delete_group(scope, groups.get_group(scope, g.group_id), actor=actor)
    try:
        groups.add_member(scope, stale, mia.user_id, actor=actor)
        raise AssertionError("adding a member to a deleted group must be refused")
    except ApiError as err:
        assert err.status == 404
    assert not membership(ws, mia.user_id).groups and groups.member_ids(scope, g.group_id) == []


def test_erasing_a_user_erases_their_group_edges(tenant: Tenant) -> None:
    """An edge holds the member's address (its display): erasure takes it with the membership."""
    from chalicelib.core.audit import Actor
    from chalicelib.core.tenancy import workspace_scope
    from chalicelib.platform.workspaces import groups
    from chalicelib.residency import erasure

    ws = tenant.workspace_id
    scope = workspace_scope(ws)
    mia = add_member(ws, "mia@example.com", "member")
    g = groups.create_group(scope, "Ops", actor=Actor("user", tenant.user_id, tenant.email))
    groups.add_member(scope, g, mia.user_id, actor=Actor("user", tenant.user_id, tenant.email))
    assert groups.member_ids(scope, g.group_id) == [mia.user_id]
    erasure.erase_in_workspace(tenant.region, ws, mia.user_id, "", "mia@example.com")
    assert groups.member_ids(scope, g.group_id) == [] and membership(ws, mia.user_id) is None
