"""The official ``mcp`` Python client against `make run`'s stack over HTTP, in both protocol revisions: it
discovers the identity service from the MCP endpoint's protected resource metadata (after a 401), registers
itself (dynamic client registration), signs a user in with the authorization code + PKCE and ``resource``,
lists the tools and calls each. A Member gets masked values and no Admin-only document, a Viewer may not
sync, a removed member is refused at once, tokens do not pass between the MCP endpoint and the REST API, and
an EU workspace's call at the US endpoint answers 421."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
import requests
from mcp import Client
from mcp.client import session as mcp_session
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPError

from tests.integration.conftest import ROOT, RunningPlatform
from tests.integration.sessions import authorize_allowing, email_code_session

pytestmark = pytest.mark.integration
REDIRECT = "http://127.0.0.1:9/callback"  # never visited: the redirect's Location is read
MODES = ("legacy", "2026-07-28")  # 2025-11-25 (initialize) and the stateless revision
TOOLS = {"search_datasets", "get_dataset_schema", "get_lineage", "query", "search_knowledge", "list_connectors"}

ADD_MEMBER = """
import json, sys
from infra.demo_token import load_run_info, point_at
point_at(load_run_info())
from chalicelib.core import clock
from chalicelib.core.tenancy import memberships, region_of
from chalicelib.identity import users
email, role, ws = sys.argv[1:4]
user = users.find_by_email(email) or users.create_user(email, email_verified=True)
memberships(region_of(ws))(ws, user.id, role=role, email=email, joined_at=clock.iso()).save()
print(json.dumps({"user_id": user.id}))
"""


def add_member(platform: RunningPlatform, role: str) -> dict[str, str]:
    """A new user who is ``role`` in the demo workspace (what an accepted invitation leaves), signed in."""
    email = f"mcp-{role}-{''.join(chr(97 + b % 26) for b in uuid.uuid4().bytes[:8])}@example.com"  # no digits
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"LOCAL_STATE_DIR": str(platform.state_dir), "RESOURCE_PREFIX": "aiplat"})
    done = subprocess.run([sys.executable, "-c", ADD_MEMBER, email, role, platform.demo["workspace_id"]], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    user_id = json.loads(done.stdout.strip().splitlines()[-1])["user_id"]
    return {"email": email, "user_id": user_id, "cookie": email_code_session(platform, email)}


class Storage:
    """The client's token storage (in memory)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@asynccontextmanager
async def signed_in(url: str, cookie: str, mode: str, storage: Storage | None = None,
                    sign_in_seconds: float = 0) -> AsyncIterator[Client]:
    """An MCP client of ``url`` whose OAuth flow signs in the browser session ``cookie`` (taking at least
    ``sign_in_seconds``, as a person at the browser does)."""
    storage = storage or Storage()
    seen: dict[str, str] = {}

    async def redirect_handler(authorization_url: str) -> None:
        seen["authorize"] = authorization_url
        await asyncio.sleep(sign_in_seconds)
        seen["location"] = authorize_allowing(cookie, authorization_url)  # the user allows it

    async def callback_handler() -> AuthorizationCodeResult:
        params = {k: v[0] for k, v in parse_qs(urlsplit(seen["location"]).query).items()}
        assert "code" in params, params
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT], grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none",
                                            client_name="mcp integration test"),
        storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    async with httpx2.AsyncClient(auth=provider, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            client.seen = seen  # type: ignore[attr-defined]
            client.storage = storage  # type: ignore[attr-defined]
            yield client


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def admin_cookie(platform: RunningPlatform) -> str:
    return email_code_session(platform, platform.demo["email"])  # the demo user: e-mail code + TOTP


def mcp_url(platform: RunningPlatform, region: str = "us-east-1") -> str:
    return platform.regions[region]["gateway"] + "/mcp"


def data(result: Any) -> dict[str, Any]:
    assert result.is_error is False, result
    return dict(result.structured_content)


@pytest.mark.parametrize("mode", MODES)
def test_sign_in_list_and_call_each_tool(platform: RunningPlatform, admin_cookie: str, mode: str) -> None:
    async def scenario() -> dict[str, Any]:
        async with signed_in(mcp_url(platform), admin_cookie, mode) as client:
            out: dict[str, Any] = {"version": client.protocol_version, "seen": client.seen}
            out["tools"] = {t.name for t in (await client.list_tools()).tools}  # 2026-07-28: the first request
            out["token"] = client.storage.tokens.access_token
            found = data(await client.call_tool("search_datasets", {"q": "customers"}))
            customers = next(d["id"] for d in found["items"] if d["name"] == "customers")
            out["schema"] = data(await client.call_tool("get_dataset_schema", {"dataset_id": customers}))
            out["lineage"] = data(await client.call_tool("get_lineage", {"dataset_id": customers, "depth": 2}))
            out["query"] = data(await client.call_tool("query", {"sql": "SELECT email FROM customers LIMIT 3"}))
            out["knowledge"] = data(await client.call_tool("search_knowledge", {"q": "return an order", "k": 3}))
            out["connectors"] = data(await client.call_tool("list_connectors", {}))
            conn = out["connectors"]["connectors"][0]["id"]
            key = f"mcp-{mode}-{uuid.uuid4().hex[:6]}"
            first = data(await client.call_tool("sync_connector", {"connector_id": conn, "idempotency_key": key}))
            again = data(await client.call_tool("sync_connector", {"connector_id": conn, "idempotency_key": key}))
            out["syncs"] = (first["id"], again["id"])
            return out

    out = run(scenario())
    assert out["version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    authorize = parse_qs(urlsplit(out["seen"]["authorize"]).query)
    assert authorize["resource"] == [mcp_url(platform)] and authorize["code_challenge_method"] == ["S256"]
    assert parse_qs(urlsplit(out["seen"]["location"]).query)["iss"] == [platform.urls["identity"]]  # RFC 9207
    assert claims(out["token"])["aud"] == mcp_url(platform)
    assert out["tools"] == TOOLS | {"sync_connector"}  # the demo user is an Admin
    assert {f["name"] for f in out["schema"]["fields"]} >= {"email"}
    assert out["lineage"]["nodes"]
    assert out["query"]["rows"] and all(set(row[0]) <= set("*@.abcdefghijklmnopqrstuvwxyz0123456789-_")
                                        for row in out["query"]["rows"])
    assert any("30 days" in item["text"] for item in out["knowledge"]["items"])
    assert out["syncs"][0] == out["syncs"][1]  # the same key returns the same run


def test_default_mode_uses_the_stateless_revision_when_sign_in_outlasts_the_probe(
        platform: RunningPlatform, admin_cookie: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's default ``auto`` mode probes ``server/discover`` with a 10 s timeout; a person signing in
    takes longer. The probe is answered before any sign-in, so the client adopts 2026-07-28 and signs in on
    its first tool request (the probe's timeout shortened here to stand for the person's minutes)."""
    monkeypatch.setattr(mcp_session, "DISCOVER_TIMEOUT_SECONDS", 1.0)

    async def scenario() -> tuple[str, bool, set[str]]:
        async with signed_in(mcp_url(platform), admin_cookie, "auto", sign_in_seconds=1.5) as client:
            adopted = client.session.initialize_result is None  # no initialize handshake was sent
            return client.protocol_version, adopted, {t.name for t in (await client.list_tools()).tools}

    version, adopted, names = run(scenario())
    assert version == "2026-07-28" and adopted
    assert names == TOOLS | {"sync_connector"}


def test_member_masked_values_and_no_restricted_document(platform: RunningPlatform, admin_cookie: str) -> None:
    member = add_member(platform, "member")
    gateway = platform.urls["gateway"]
    api = {"Authorization": f"Bearer {platform.demo['api_token']}"}
    hits = requests.get(gateway + "/v1/knowledge/search", params={"q": "enterprise plan", "k": 10}, headers=api,
                        timeout=30).json()["items"]
    source = next(h["citation"]["source"] for h in hits if h["citation"]["title"] == "plans.md")
    r = requests.put(f"{gateway}/v1/knowledge/datasets/{source['dataset_id']}/documents/{source['id']}/acl",
                     headers=api, json={"acl": [{"type": "role", "id": "admin"}]}, timeout=30)
    assert r.status_code == 200, r.text

    async def scenario() -> dict[str, Any]:
        async with signed_in(mcp_url(platform), member["cookie"], "2026-07-28") as client:
            return {"tools": {t.name for t in (await client.list_tools()).tools},
                    "query": data(await client.call_tool("query", {"sql": "SELECT email FROM customers LIMIT 5"})),
                    "knowledge": data(await client.call_tool("search_knowledge", {"q": "enterprise plan", "k": 10}))}

    out = run(scenario())
    assert out["tools"] == TOOLS
    assert out["query"]["rows"] and all("*" in row[0] for row in out["query"]["rows"])  # MASK for a Member
    assert source["id"] not in json.dumps(out["knowledge"])  # the Admin-only document is not among the hits


def test_viewer_may_not_sync(platform: RunningPlatform) -> None:
    viewer = add_member(platform, "viewer")

    async def scenario() -> tuple[set[str], str]:
        async with signed_in(mcp_url(platform), viewer["cookie"], "legacy") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            with pytest.raises(MCPError) as refused:
                await client.call_tool("sync_connector", {"connector_id": "conn_01J0000000000000000000000",
                                                          "idempotency_key": "viewer-1"})
            return tools, str(refused.value)

    tools, refused = run(scenario())
    assert tools == {"list_connectors"} and "Unknown tool" in refused


def test_removed_member_is_refused_at_once(platform: RunningPlatform) -> None:
    member = add_member(platform, "member")
    storage = Storage()

    async def first() -> None:
        async with signed_in(mcp_url(platform), member["cookie"], "2026-07-28", storage) as client:
            data(await client.call_tool("list_connectors", {}))

    run(first())
    assert storage.tokens is not None
    r = requests.delete(f"{platform.urls['platform']}/workspaces/{platform.demo['workspace_id']}/members/"
                        f"{member['user_id']}", headers={"Authorization": f"Bearer {platform.demo['api_token']}"},
                        timeout=30)
    assert r.status_code in (200, 204), r.text
    # the live membership is read on every request: the bound is zero (docs/security.md, "Revocation cache")
    r = requests.post(mcp_url(platform), headers={"Authorization": f"Bearer {storage.tokens.access_token}",
                                                  "Content-Type": "application/json"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
    assert r.status_code == 403 and r.json()["code"] == "membership_revoked"


def test_no_token_passthrough(platform: RunningPlatform, admin_cookie: str) -> None:
    r = requests.post(mcp_url(platform), headers={"Authorization": f"Bearer {platform.demo['api_token']}"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
    assert r.status_code == 401  # a platform API token (aud service-api) is not for the MCP resource
    assert 'resource_metadata="' + platform.urls["gateway"] + '/.well-known/oauth-protected-resource/mcp"' \
        in r.headers["WWW-Authenticate"]
    storage = Storage()

    async def sign_in() -> None:
        async with signed_in(mcp_url(platform), admin_cookie, "legacy", storage) as client:
            await client.list_tools()

    run(sign_in())
    token = storage.tokens.access_token  # type: ignore[union-attr]
    for url in (platform.urls["gateway"] + "/v1/catalog/datasets", platform.urls["platform"] + "/me"):
        assert requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code == 401


def _token_for(platform: RunningPlatform, cookie: str, workspace_id: str, resource: str) -> str:
    """The authorization code flow by hand (PKCE, ``resource``, ``workspace_id``) with a registered client."""
    import hashlib
    import secrets

    identity = platform.urls["identity"]
    client = requests.post(identity + "/oauth2/register", json={"redirect_uris": [REDIRECT],
                                                                "token_endpoint_auth_method": "none"},
                           timeout=30).json()
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    location = authorize_allowing(cookie, identity + "/oauth2/authorize?" + urlencode({
        "client_id": client["client_id"], "redirect_uri": REDIRECT, "response_type": "code", "state": "s",
        "code_challenge": challenge, "code_challenge_method": "S256", "resource": resource,
        "workspace_id": workspace_id}))
    code = parse_qs(urlsplit(location).query)["code"][0]
    r = requests.post(identity + "/oauth2/token", data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier,
        "client_id": client["client_id"], "resource": resource}, timeout=30)
    assert r.status_code == 200, r.text
    return str(r.json()["access_token"])


def test_eu_workspace_at_the_us_endpoint_is_421(platform: RunningPlatform, admin_cookie: str) -> None:
    eu_ws, eu_mcp = platform.demo["eu_workspace_id"], mcp_url(platform, "eu-central-1")
    token = _token_for(platform, admin_cookie, eu_ws, eu_mcp)
    assert claims(token)["aud"] == eu_mcp and claims(token)["workspace_id"] == eu_ws

    async def call(url: str) -> set[str]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:  # type: ignore[arg-type]
                return {t.name for t in (await client.list_tools()).tools}

    assert run(call(eu_mcp)) == TOOLS | {"sync_connector"}  # served by the EU endpoint
    with pytest.raises(Exception):  # noqa: B017 - the client surfaces the HTTP 421 as a transport error
        run(call(mcp_url(platform)))
    r = requests.post(mcp_url(platform), headers={"Authorization": f"Bearer {token}"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
    assert r.status_code == 421 and r.json()["gateway_url"] == platform.regions["eu-central-1"]["gateway"]
