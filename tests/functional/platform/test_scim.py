"""SCIM 2.0 provisioning through the platform app: the recorded sequences of Okta and Entra ID, tokens,
deprovisioning that ends a user's access, ETags, paging and bad input."""
from __future__ import annotations

from chalice.test import Client

from chalicelib.core import audit
from chalicelib.core.tenancy import membership, region_of
from tests.functional.conftest import Tenant, bearer
from tests.functional.platform.helpers import add_member, call, user_token
from tests.functional.platform.scim_client import APP, replay, scim, scim_token

USER = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ada@acme.example.com",
        "emails": [{"value": "ada@acme.example.com", "primary": True}], "active": True}


def test_okta_sequence(tenant: Tenant) -> None:
    with Client(APP) as c:
        saved = replay(c, tenant, scim_token(c, tenant), "okta")
    assert membership(tenant.workspace_id, saved["user"]) is None  # deactivated at the end
    actions = [e["action"] for e in audit.iter_chain(region_of(tenant.workspace_id), tenant.workspace_id)]
    assert {"scim.token_created", "scim.user_provisioned", "member.joined", "member.removed", "group.created",
            "group.member_added", "group.member_removed", "group.deleted"} <= set(actions)


def test_entra_sequence(tenant: Tenant) -> None:
    with Client(APP) as c:
        replay(c, tenant, scim_token(c, tenant), "entra")


def test_tokens_are_shown_once_checked_and_revocable(tenant: Tenant) -> None:
    member = add_member(tenant.workspace_id, "mia@acme.example.com", "member")
    with Client(APP) as c:
        token = scim_token(c, tenant)
        status, listed, _ = call(c, "GET", f"/v1/workspaces/{tenant.workspace_id}/scim/tokens", tenant.token)
        assert status == 200 and token not in str(listed) and token.split(".")[2] not in str(listed)
        assert call(c, "POST", f"/v1/workspaces/{tenant.workspace_id}/scim/tokens", member.token, {})[0] == 403
        assert scim(c, tenant, token, "GET", "/Users")[0] == 200
        for bad in (None, "nonsense", token[:-2] + "xx", tenant.token):
            status, body, headers = scim(c, tenant, bad, "GET", "/Users")
            assert status == 401 and body["status"] == "401", bad
            assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]
        token_id = listed["tokens"][0]["id"]
        assert call(c, "DELETE", f"/v1/workspaces/{tenant.workspace_id}/scim/tokens/{token_id}", tenant.token)[0] == 204
        assert scim(c, tenant, token, "GET", "/Users")[0] == 401
        assert scim(c, tenant, token, "POST", "/Users", USER)[0] == 401
    assert membership(tenant.workspace_id, "usr_none") is None


def test_a_token_serves_only_its_workspace(tenant: Tenant) -> None:
    from tests.functional.conftest import make_tenant

    other = make_tenant("bob@bravo.test", name="Bravo")
    with Client(APP) as c:
        token = scim_token(c, tenant)
        assert scim(c, other, token, "GET", "/Users")[0] == 401
        assert scim(c, other, token, "POST", "/Users", USER)[0] == 401
        gone = c.http.get("/scim/v2/ws_doesnotexist/Users", headers={"Authorization": f"Bearer {token}"})
        assert gone.status_code == 401 and b"A valid SCIM token of this workspace" in gone.body  # no such workspace


def test_deprovisioning_ends_the_users_access_at_once(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        status, user, _ = scim(c, tenant, token, "POST", "/Users", USER)
        assert status == 201
        own = user_token(user["id"], "ada@acme.example.com", tenant.workspace_id, "member")
        assert c.http.get(f"/v1/workspaces/{tenant.workspace_id}", headers=bearer(own)).status_code == 200
        patch = {"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                 "Operations": [{"op": "replace", "value": {"active": False}}]}
        assert scim(c, tenant, token, "PATCH", f"/Users/{user['id']}", patch)[0] == 200
        r = c.http.get(f"/v1/workspaces/{tenant.workspace_id}", headers=bearer(own))
        assert r.status_code == 403 and b"membership_revoked" in r.body
        # reactivated, then deleted: the same token works again, then never
        patch["Operations"][0]["value"] = {"active": True}
        assert scim(c, tenant, token, "PATCH", f"/Users/{user['id']}", patch)[0] == 200
        assert c.http.get(f"/v1/workspaces/{tenant.workspace_id}", headers=bearer(own)).status_code == 200
        assert scim(c, tenant, token, "DELETE", f"/Users/{user['id']}")[0] == 204
        assert c.http.get(f"/v1/workspaces/{tenant.workspace_id}", headers=bearer(own)).status_code == 403


def test_the_last_admin_cannot_be_deprovisioned(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        status, user, _ = scim(c, tenant, token, "POST", "/Users", {**USER, "userName": tenant.email,
                                                                     "emails": [{"value": tenant.email}]})
        assert status == 201 and user["id"] == tenant.user_id  # the existing account is linked
        status, body, _ = scim(c, tenant, token, "DELETE", f"/Users/{user['id']}")
        assert status == 409 and body["scimType"] == "mutability"
    assert membership(tenant.workspace_id, tenant.user_id) is not None


def test_etags_guard_changes(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        status, user, headers = scim(c, tenant, token, "POST", "/Users", USER)
        assert headers["ETag"] == user["meta"]["version"] == 'W/"1"'
        assert headers["Location"].endswith(f"/scim/v2/{tenant.workspace_id}/Users/{user['id']}")
        put = {**USER, "displayName": "Ada L."}
        status, body, _ = scim(c, tenant, token, "PUT", f"/Users/{user['id']}", put, headers={"If-Match": 'W/"7"'})
        assert status == 412 and body["status"] == "412"
        assert scim(c, tenant, token, "GET", f"/Users/{user['id']}")[1].get("displayName") is None
        status, body, headers = scim(c, tenant, token, "PUT", f"/Users/{user['id']}", put, headers={"If-Match": 'W/"1"'})
        assert status == 200 and body["displayName"] == "Ada L." and headers["ETag"] == 'W/"2"'
        assert scim(c, tenant, token, "DELETE", f"/Users/{user['id']}", headers={"If-Match": 'W/"1"'})[0] == 412


def test_filters_and_paging(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        ids = []
        for name in ("a", "b", "c"):
            body = {**USER, "userName": f"{name}@acme.example.com", "emails": [{"value": f"{name}@acme.example.com"}],
                    "externalId": f"ext-{name}"}
            ids.append(scim(c, tenant, token, "POST", "/Users", body)[1]["id"])
        status, page, _ = scim(c, tenant, token, "GET", "/Users?startIndex=2&count=1")
        assert (page["totalResults"], page["startIndex"], page["itemsPerPage"]) == (3, 2, 1)
        assert page["Resources"][0]["id"] == sorted(ids)[1]
        status, found, _ = scim(c, tenant, token, "GET", '/Users?filter=USERNAME%20eq%20%22B@ACME.EXAMPLE.COM%22')
        assert [r["id"] for r in found["Resources"]] == [ids[1]]
        status, found, _ = scim(c, tenant, token, "GET", '/Users?filter=externalId%20eq%20%22ext-c%22')
        assert [r["id"] for r in found["Resources"]] == [ids[2]]
        status, found, _ = scim(c, tenant, token, "GET", '/Users?filter=userName%20sw%20%22a%22%20or%20externalId%20eq%20%22ext-b%22')
        assert sorted(r["id"] for r in found["Resources"]) == sorted(ids[:2])
        status, body, _ = scim(c, tenant, token, "GET", "/Users?filter=userName%20eqq%20%22x%22")
        assert status == 400 and body["scimType"] == "invalidFilter"
        assert scim(c, tenant, token, "GET", "/Users?count=x")[0] == 400


def test_bad_input_changes_nothing(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        status, body, _ = scim(c, tenant, token, "POST", "/Users", raw=b"{not json")
        assert status == 400 and body["scimType"] == "invalidSyntax"
        status, body, _ = scim(c, tenant, token, "POST", "/Users", {"schemas": USER["schemas"], "active": True})
        assert status == 400 and body["scimType"] == "invalidValue"
        status, body, _ = scim(c, tenant, token, "POST", "/Users", {**USER, "emails": "x"})
        assert status == 400
        assert scim(c, tenant, token, "GET", "/Users")[1]["totalResults"] == 0
        assert scim(c, tenant, token, "POST", "/Users", USER)[0] == 201
        status, body, _ = scim(c, tenant, token, "POST", "/Users", {**USER, "userName": "ADA@acme.example.com"})
        assert status == 409 and body["scimType"] == "uniqueness"
        assert scim(c, tenant, token, "GET", "/Users/usr_01ARZ3NDEKTSV4RRFFQ69G5FAV")[0] == 404
        assert scim(c, tenant, token, "GET", "/Groups/nonsense")[0] == 404


def test_discovery(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        status, spc, _ = scim(c, tenant, token, "GET", "/ServiceProviderConfig")
        assert status == 200 and spc["patch"]["supported"] and spc["etag"]["supported"]
        assert not spc["bulk"]["supported"]
        status, types, _ = scim(c, tenant, token, "GET", "/ResourceTypes")
        assert {t["id"] for t in types["Resources"]} == {"User", "Group"}
        status, schemas, _ = scim(c, tenant, token, "GET", "/Schemas")
        assert "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User" in {s["id"] for s in schemas["Resources"]}
        assert scim(c, tenant, token, "GET", "/Schemas/urn:ietf:params:scim:schemas:core:2.0:Group")[0] == 200


def test_a_user_without_an_address_joins_when_one_arrives(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        status, user, _ = scim(c, tenant, token, "POST", "/Users", {**USER, "userName": "ada", "emails": []})
        assert status == 201 and user["active"] is True
        assert membership(tenant.workspace_id, user["id"]) is None  # no address: no account, no sign-in
        patch = {"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                 "Operations": [{"op": "add", "path": "emails", "value": [{"value": "ada@acme.example.com"}]}]}
        assert scim(c, tenant, token, "PATCH", f"/Users/{user['id']}", patch)[0] == 200
        assert membership(tenant.workspace_id, user["id"]).email == "ada@acme.example.com"
        status, other, _ = scim(c, tenant, token, "POST", "/Users", {**USER, "userName": "eve", "emails": []})
        patch["Operations"][0]["value"] = [{"value": tenant.email}]  # someone else's address
        status, body, _ = scim(c, tenant, token, "PATCH", f"/Users/{other['id']}", patch)
        assert status == 409 and body["scimType"] == "uniqueness"
        assert membership(tenant.workspace_id, other["id"]) is None
        assert "emails" not in scim(c, tenant, token, "GET", f"/Users/{other['id']}")[1]


def test_a_deactivated_user_keeps_its_groups_and_regains_them(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        user = scim(c, tenant, token, "POST", "/Users", USER)[1]
        group = scim(c, tenant, token, "POST", "/Groups", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                                                            "displayName": "Eng", "members": [{"value": user["id"]}]})[1]
        assert group["members"][0]["value"] == user["id"]
        off = {"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
               "Operations": [{"op": "replace", "path": "active", "value": False}]}
        assert scim(c, tenant, token, "PATCH", f"/Users/{user['id']}", off)[0] == 200
        assert membership(tenant.workspace_id, user["id"]) is None
        assert [m["value"] for m in scim(c, tenant, token, "GET", f"/Groups/{group['id']}")[1]["members"]] == [user["id"]]
        off["Operations"][0]["value"] = True
        assert scim(c, tenant, token, "PATCH", f"/Users/{user['id']}", off)[0] == 200
        assert membership(tenant.workspace_id, user["id"]).groups == {group["id"]}
        status, found, _ = scim(c, tenant, token, "POST", "/Users/.search",
                                {"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],
                                 "filter": 'userName eq "ada@acme.example.com"', "attributes": ["userName"]})
        assert status == 200 and found["Resources"] == [{"schemas": user["schemas"], "id": user["id"],
                                                         "userName": "ada@acme.example.com"}]
        status, got, _ = scim(c, tenant, token, "GET", f"/Users/{user['id']}?excludedAttributes=emails,name")
        assert "emails" not in got and got["userName"] == "ada@acme.example.com"


def test_erasure_removes_the_providers_record(tenant: Tenant) -> None:
    from chalicelib.residency import erasure

    with Client(APP) as c:
        token = scim_token(c, tenant)
        user = scim(c, tenant, token, "POST", "/Users", USER)[1]
        counts = erasure.erase_in_workspace(tenant.region, tenant.workspace_id, user["id"], "")
        assert counts["scim_users"] == 1 and counts["memberships"] == 1
        assert scim(c, tenant, token, "GET", f"/Users/{user['id']}")[0] == 404
        assert scim(c, tenant, token, "POST", "/Users", USER)[0] == 201  # the userName is free again
