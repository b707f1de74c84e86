"""The MCP endpoint in process (Chalice test client, moto): both protocol eras, tools generated from the OpenAPI
document and run through the REST views (masking, ACLs, roles), audience-restricted tokens in both
directions, the 401/403 challenges, routing-header checks, audit and lineage of every call."""
from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import audit
from chalicelib.core.tenancy import memberships, region_of, scope_of, workspaces
from chalicelib.core.tokens import mcp_resource
from chalicelib.gateway import demo
from chalicelib.gateway.mcp import routes as mcp_routes
from chalicelib.gateway.mcp import tools
from chalicelib.groups import create_app
from chalicelib.identity.oauth.signing import issue_access_token
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import token_for

MODERN, LEGACY = "2026-07-28", "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "1"}}


def mcp_token(tenant: Tenant, user_id: str, email: str, role: str, amr: tuple[str, ...] = ("pwd", "mfa")) -> str:
    token, _ = issue_access_token(user_id=user_id, email=email, workspace_id=tenant.workspace_id, roles=[role],
                                  amr=list(amr), audience=mcp_resource())
    return token


def rpc(c: Client, token: str | None, method: str, params: dict[str, Any] | None = None, *, modern: bool = True,
        headers: dict[str, str] | None = None, rid: int = 1) -> Any:
    params = dict(params or {})
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         **(bearer(token) if token else {})}
    if modern:
        params["_meta"] = META
        h.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": method})
        if method == "tools/call":
            h["Mcp-Name"] = params["name"]
    elif method != "initialize":
        h["MCP-Protocol-Version"] = LEGACY
    h.update(headers or {})
    return c.http.post("/mcp", headers=h, body=json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                                            "params": params}))


@pytest.fixture
def world(tenant: Tenant) -> dict[str, Any]:
    seeded = demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    member = token_for(tenant.workspace_id, "member")
    viewer = token_for(tenant.workspace_id, "viewer")
    return {"customers": seeded["datasets"][0]["id"], "admin": mcp_token(tenant, tenant.user_id, tenant.email, "admin"),
            "member": mcp_token(tenant, member.user_id, member.email, "member"), "member_user": member,
            "viewer": mcp_token(tenant, viewer.user_id, viewer.email, "viewer")}


def result(r: Any) -> dict[str, Any]:
    assert r.status_code == 200, r.body
    body = json.loads(r.body)
    assert "error" not in body, body
    return body["result"]


def test_protected_resource_metadata_and_401_challenge(tenant: Tenant) -> None:
    with Client(create_app("gateway")) as c:
        meta = json.loads(c.http.get(mcp_routes.METADATA_PATH).body)
        assert meta["resource"] == mcp_resource() and meta["authorization_servers"]
        found = result(rpc(c, None, "server/discover"))  # describes the server: answered before any sign-in
        assert MODERN in found["supportedVersions"] and found["capabilities"]["tools"]
        for method in ("tools/list", "initialize", "ping"):
            r = rpc(c, None, method, modern=method != "initialize")
            assert r.status_code == 401, method
        r = rpc(c, None, "tools/list")
        assert r.status_code == 401
        challenge = r.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer ") and f'resource_metadata="{mcp_routes.resource_metadata_url()}"' in challenge
        assert "error=" not in challenge  # no credentials sent: no error code (RFC 6750 section 3.1)


def test_no_token_passthrough_in_either_direction(tenant: Tenant, world: dict[str, Any]) -> None:
    with Client(create_app("gateway")) as c:
        r = rpc(c, tenant.token, "tools/list")  # a platform API token (aud service-api)
        assert r.status_code == 401 and 'error="invalid_token"' in r.headers["WWW-Authenticate"]
        r = c.http.get("/v1/catalog/datasets", headers=bearer(world["admin"]))  # an MCP token at REST
        assert r.status_code == 401
        r = c.http.post("/graphql", headers={**bearer(world["admin"]), "Content-Type": "application/json"},
                        body=json.dumps({"query": "{ datasets(first: 1) { totalCount } }"}))
        assert r.status_code == 401
    with Client(create_app("platform")) as c:
        assert c.http.get("/v1/me", headers=bearer(world["admin"])).status_code == 401


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "2025-11-25"])
def test_both_eras_list_and_call(tenant: Tenant, world: dict[str, Any], modern: bool) -> None:
    with Client(create_app("gateway")) as c:
        if modern:
            found = result(rpc(c, world["member"], "server/discover"))
            assert MODERN in found["supportedVersions"] and LEGACY in found["supportedVersions"]
            assert found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
        else:
            init = result(rpc(c, world["member"], "initialize", {
                "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}},
                modern=False))
            assert init["protocolVersion"] == LEGACY and "tools" in init["capabilities"]
        listed = result(rpc(c, world["member"], "tools/list", modern=modern))
        names = {t["name"] for t in listed["tools"]}
        assert names == {"search_datasets", "get_dataset_schema", "get_lineage", "query", "search_knowledge",
                         "list_connectors"}  # no sync for a Member
        query = next(t for t in listed["tools"] if t["name"] == "query")
        assert query["inputSchema"]["required"] == ["sql"] and "answer" not in query["inputSchema"]["properties"]
        called = result(rpc(c, world["member"], "tools/call", {"name": "query", "arguments": {
            "sql": "SELECT email FROM customers ORDER BY 1 LIMIT 2"}}, modern=modern))
        assert called["isError"] is False
        rows = called["structuredContent"]["rows"]
        assert rows and all(set(row[0][:-4]) == {"*"} for row in rows)  # masked for a Member, as over REST
        assert json.loads(called["content"][0]["text"]) == called["structuredContent"]


def test_generated_schemas_follow_the_openapi_document() -> None:
    schema = tools.inputs("search_datasets").schema
    assert schema["properties"]["classification"]["enum"] == ["PUBLIC", "INTERNAL", "CONFIDENTIAL", "PII"]
    assert schema["properties"]["limit"]["maximum"] == 100 and "search" not in schema["properties"]
    assert tools.inputs("get_lineage").schema["required"] == ["dataset_id"]
    assert tools.inputs("sync_connector").schema["required"] == ["idempotency_key", "connector_id"]
    assert tools.permission(tools.BY_NAME["sync_connector"]) == "connectors.manage"


def test_viewer_cannot_sync_and_admin_sync_is_idempotent(tenant: Tenant, world: dict[str, Any]) -> None:
    from chalicelib.gateway.ingest import connectors

    conn = connectors.list_connectors(scope_of(_principal(tenant)))[0]["id"]
    with Client(create_app("gateway")) as c:
        names = {t["name"] for t in result(rpc(c, world["viewer"], "tools/list"))["tools"]}
        assert names == {"list_connectors"}  # a Viewer reads dashboards only
        r = rpc(c, world["viewer"], "tools/call", {"name": "sync_connector",
                                                   "arguments": {"connector_id": conn, "idempotency_key": "k1"}})
        assert r.status_code == 400 and json.loads(r.body)["error"]["code"] == -32602
        args = {"connector_id": conn, "idempotency_key": "k1", "mode": "FULL_REFRESH"}
        first = result(rpc(c, world["admin"], "tools/call", {"name": "sync_connector", "arguments": args}))
        again = result(rpc(c, world["admin"], "tools/call", {"name": "sync_connector", "arguments": args}, rid=2))
        assert first["isError"] is False and first["structuredContent"]["id"] == again["structuredContent"]["id"]
        other = result(rpc(c, world["admin"], "tools/call", {"name": "sync_connector", "arguments": {
            **args, "mode": "INCREMENTAL"}}, rid=3))
        assert other["isError"] is True and other["structuredContent"]["code"] == "idempotency_key_reused"
    events = [e for e in audit.iter_chain(tenant.region, tenant.workspace_id) if e["action"] == "mcp.tool_called"]
    assert [e["details"].get("error_code") for e in events] == ["forbidden", None, None, "idempotency_key_reused"]


def _principal(tenant: Tenant) -> Any:
    from chalicelib.core.tokens import verifier

    return verifier().principal(tenant.token)


def test_header_mismatch_bad_params_and_unknown_method(world: dict[str, Any]) -> None:
    with Client(create_app("gateway")) as c:
        r = rpc(c, world["member"], "tools/list", headers={"Mcp-Method": "tools/call"})
        assert r.status_code == 400 and json.loads(r.body)["error"]["code"] == -32020
        r = rpc(c, world["member"], "tools/call", {"name": "query", "arguments": {"sql": "SELECT 1"}},
                headers={"Mcp-Name": "list_connectors"})
        assert json.loads(r.body)["error"]["code"] == -32020
        r = rpc(c, world["member"], "tools/list", headers={"MCP-Protocol-Version": "2025-11-25"})
        assert json.loads(r.body)["error"]["code"] == -32020
        r = rpc(c, world["member"], "resources/list")
        assert r.status_code == 404 and json.loads(r.body)["error"]["code"] == -32601
        r = rpc(c, world["member"], "tools/call", {"name": "query", "arguments": {"sql": 5}})
        assert result(r)["isError"] is True  # the operation's own validation, as a tool error
        r = rpc(c, world["member"], "tools/call", {"name": "query", "arguments": {"sql": "SELECT 1", "x": 1}})
        assert result(r)["structuredContent"]["errors"][0]["field"] == "x"
        r = c.http.post("/mcp", headers={**bearer(world["member"]), "Content-Type": "application/json"}, body=b"{")
        assert r.status_code == 400 and json.loads(r.body)["error"]["code"] == -32700
        r = c.http.post("/mcp", headers={**bearer(world["member"]), "Content-Type": "application/json"},
                        body=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        assert r.status_code == 202
        r = c.http.post("/mcp", headers={**bearer(world["member"]), "Content-Type": "application/json",
                                         "Origin": "https://evil.example"}, body=b"{}")
        assert r.status_code == 403
        assert c.http.get("/mcp", headers=bearer(world["member"])).status_code == 405


def test_removed_member_is_refused_and_mfa_step_up(tenant: Tenant, world: dict[str, Any]) -> None:
    member = world["member_user"]
    with Client(create_app("gateway")) as c:
        assert rpc(c, world["member"], "tools/list").status_code == 200
        memberships(region_of(tenant.workspace_id)).get(tenant.workspace_id, member.user_id).delete()
        r = rpc(c, world["member"], "tools/list")
        assert r.status_code == 403 and json.loads(r.body)["code"] == "membership_revoked"
        weak = mcp_token(tenant, tenant.user_id, tenant.email, "admin", amr=("pwd",))
        assert rpc(c, weak, "tools/list").status_code == 200
        workspaces().get(tenant.workspace_id).update(actions=[workspaces().enforce_mfa.set(True)])
        r = rpc(c, weak, "tools/list")
        assert r.status_code == 403
        challenge = r.headers["WWW-Authenticate"]
        assert 'error="insufficient_scope"' in challenge and "mfa" in challenge and "resource_metadata=" in challenge


def test_calls_are_audited_without_arguments_and_in_lineage(tenant: Tenant, world: dict[str, Any]) -> None:
    secret = "SELECT email FROM customers WHERE email = 'zz-literal@example.com'"
    with Client(create_app("gateway")) as c:
        called = result(rpc(c, world["admin"], "tools/call", {"name": "query", "arguments": {"sql": secret}},
                            headers={"X-Correlation-Id": "mcp-audit-check-1"}))
        recorded = called["_meta"]["aiplat/call"]
        assert recorded["datasets"] == [world["customers"]] and recorded["correlation_id"] == "mcp-audit-check-1"
        graph = json.loads(c.http.get(f"/v1/lineage/{world['customers']}", headers=bearer(tenant.token)).body)
        assert any(n["type"] == "MCP_TOOL_CALL" and n["id"] == recorded["call_id"] for n in graph["nodes"])
        # a tool call is private to its caller, as a chat answer is: another reader of the dataset never sees it
        member = world["member_user"].token
        other = json.loads(c.http.get(f"/v1/lineage/{world['customers']}", headers=bearer(member)).body)
        assert other["nodes"] and recorded["call_id"] not in json.dumps(other)
    events = [e for e in audit.iter_chain(tenant.region, tenant.workspace_id) if e["action"] == "mcp.tool_called"]
    assert len(events) == 1
    assert "zz-literal" not in json.dumps(events) and "SELECT" not in json.dumps(events)
    details = events[0]["details"]
    assert details["tool"] == "query" and details["datasets"] == [world["customers"]] and details["row_count"] == 0
    assert events[0]["correlation_id"] == "mcp-audit-check-1" and details["client"] == "pytest"
