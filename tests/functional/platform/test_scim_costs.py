"""The AWS calls of SCIM's common operations do not grow with the workspace: each is counted in a small
workspace, then again after the workspace (and another group) gained many members."""
from __future__ import annotations

from collections import Counter
from typing import Any

from chalice.test import Client

from chalicelib.core import audit, clock
from chalicelib.core.ids import new_id
from chalicelib.core.tenancy import memberships, region_of, workspace_scope
from chalicelib.platform.workspaces import groups
from tests.functional.aws_calls import LIMITER, counting
from tests.functional.conftest import Tenant
from tests.functional.platform.scim_client import APP, scim, scim_token

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
# most AWS calls each operation may make (the request limiter's write left out): each request reads its scope
# once (the workspace's version item, core/store/scope_versions.py), and a membership change bumps the user's
BUDGET = {"POST /Users": 10, "POST /Groups": 5, "PATCH /Groups add": 6, "PATCH /Groups remove": 8,
          "GET /Groups/{id}": 5, "PATCH /Users active false": 11}


def _user(n: str) -> dict[str, Any]:
    return {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": n,
            "emails": [{"value": n, "primary": True}], "active": True}


def _round(c: Client, tenant: Tenant, token: str, tag: str) -> dict[str, int]:
    """One of each operation; the AWS calls of each."""
    out: dict[str, int] = {}
    found: dict[str, Any] = {}

    def counted(name: str, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        with counting() as seen:
            status, data, _ = scim(c, tenant, token, method, path, body)
        assert status == expect, (name, status, data)
        rest = Counter(seen)
        rest.pop(LIMITER, None)
        out[name] = sum(rest.values())
        return data

    found["user"] = counted("POST /Users", "POST", "/Users", _user(f"{tag}@acme.example.com"), 201)
    found["group"] = counted("POST /Groups", "POST", "/Groups", {"schemas": [GROUP], "displayName": f"Team {tag}"}, 201)
    gid, uid = found["group"]["id"], found["user"]["id"]
    added = counted("PATCH /Groups add", "PATCH", f"/Groups/{gid}", {"schemas": [PATCH_OP], "Operations": [
        {"op": "add", "path": "members", "value": [{"value": uid}]}]})
    assert [m["value"] for m in added["members"]] == [uid]
    shown = counted("GET /Groups/{id}", "GET", f"/Groups/{gid}")
    assert [m["value"] for m in shown["members"]] == [uid] and shown["meta"]["version"] == added["meta"]["version"]
    counted("PATCH /Users active false", "PATCH", f"/Users/{uid}", {"schemas": [PATCH_OP], "Operations": [
        {"op": "replace", "value": {"active": False}}]})
    removed = counted("PATCH /Groups remove", "PATCH", f"/Groups/{gid}", {"schemas": [PATCH_OP], "Operations": [
        {"op": "remove", "path": f'members[value eq "{uid}"]'}]})
    assert "members" not in removed or removed["members"] == []
    return out


def _grow(tenant: Tenant, count: int) -> None:
    """``count`` more members, every one in one big group."""
    ws, actor = tenant.workspace_id, audit.Actor("user", tenant.user_id, tenant.email)
    cls, now, scope = memberships(region_of(ws)), clock.iso(), workspace_scope(ws)
    big = groups.create_group(scope, "Everyone", actor=actor)
    for i in range(count):
        uid = new_id("usr")
        cls(ws, uid, role="member", email=f"m{i}@acme.example.com", joined_at=now, joined_via="seed").save()
        groups.add_member(scope, big, uid, actor=actor)


def test_scim_calls_do_not_grow_with_the_workspace(tenant: Tenant) -> None:
    with Client(APP) as c:
        token = scim_token(c, tenant)
        assert scim(c, tenant, token, "GET", "/Users")[0] == 200  # the token's last use is written once
        small = _round(c, tenant, token, "small")
        _grow(tenant, 25)
        assert scim(c, tenant, token, "GET", "/Users?count=1")[0] == 200  # the same caches as the first round
        large = _round(c, tenant, token, "large")
    assert large == small, (small, large)
    over = {k: v for k, v in small.items() if v > BUDGET[k]}
    assert not over, (over, sorted(small.items()))
