"""Model connections from the API: an Admin creates, tests, lists, uses and removes an OpenAI-compatible
endpoint (a scripted peer on loopback, declared in OUTBOUND_ALLOW as make run declares its own server);
the key is KMS ciphertext never returned, logged or audited in clear; test connection names the exact
failure; an EU workspace is refused a non-EU connection; a Member can neither see nor change them; and
the endpoint URL goes through the outbound checks (negative test for each refused address)."""
from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.core import aws
from chalicelib.core.config import settings
from chalicelib.core.http.outbound import Refused
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.functional.gateway.data import token_for
from tests.functional.models import scripted_peer

KEY = "sk-connection-secret-4242"


@pytest.fixture
def peer(monkeypatch: pytest.MonkeyPatch) -> Iterator[scripted_peer.ScriptedPeer]:
    p = scripted_peer.start(models=["small", "tiny"], key=KEY, answer="Employees get thirty vacation days per year.")
    monkeypatch.setenv("OUTBOUND_ALLOW", f"127.0.0.1:{p.port}")
    settings.cache_clear()
    yield p
    p.stop()


@pytest.fixture
def world(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    helpers.use_providers(monkeypatch, None)
    return helpers.build(tenant)


def create(c: Any, token: str, body: dict[str, Any]) -> Any:
    return post(c, "/v1/models/connections", token, body)


def audit_details(t: Tenant) -> list[dict[str, Any]]:
    ddb = aws.client("dynamodb", t.region)
    items = ddb.query(TableName=aws.table_name("audit_events"), KeyConditionExpression="workspace_id = :w",
                      ExpressionAttributeValues={":w": {"S": t.workspace_id}})["Items"]
    return [json.loads(json.dumps(i, default=str)) for i in items]


def test_create_test_list_use_and_remove(tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with helpers.client() as c:
        made = create(c, tenant.token, {"name": "team-llm", "kind": "openai", "region": "us-east",
                                        "base_url": peer.url + "/v1/", "api_key": KEY})
        stored = aws.client("dynamodb", tenant.region).scan(TableName=aws.table_name("model_access"))["Items"]
        listed = c.http.get("/v1/models/connections", headers=bearer(tenant.token))
        tested = post(c, "/v1/models/connections/team-llm/test", tenant.token, {})
        models = c.http.get("/v1/models", headers=bearer(world.member.token)).json_body
        chat = post(c, "/v1/chats", world.member.token, ask("How many vacation days do employees get?"))
        removed = c.http.delete("/v1/models/connections/team-llm", headers=bearer(tenant.token))
        after = c.http.get("/v1/models", headers=bearer(world.member.token)).json_body
        gone = post(c, "/v1/chats", world.member.token, ask("Vacation days?", model="team-llm/small"))
    assert made.status_code == 201, made.body
    conn = made.json_body
    assert conn["base_url"] == peer.url and conn["region"] == "us-east-1" and conn["has_key"] is True
    assert [m["id"] for m in conn["models"]] == ["small", "tiny"]  # listed from the endpoint
    assert conn["model_ids"] == ["team-llm/small", "team-llm/tiny"]
    assert [i["name"] for i in listed.json_body["items"]] == ["team-llm"]
    assert tested.status_code == 200 and tested.json_body["ok"] is True, tested.body
    assert [ch["step"] for ch in tested.json_body["checks"]] == ["list_models", "chat"]
    # one model list: the connection's models first under auto, the built-in extractive provider last
    assert [m["id"] for m in models["items"]] == ["team-llm/small", "team-llm/tiny", "builtin/extractive"]
    assert models["items"][0]["connection"] == "team-llm" and models["generative_available"] is True
    assert chat.status_code == 201, chat.body
    assert chat.json_body["model"] == "team-llm/small" and chat.json_body["kind"] == "generative"
    assert peer.calls[-1]["auth"] == f"Bearer {KEY}" and peer.calls[-1]["body"]["model"] == "small"
    assert chat.json_body["grounding"]["per_sentence"][0]["status"] == "supported"
    assert removed.status_code == 204
    assert [m["id"] for m in after["items"]] == ["builtin/extractive"] and "notice" in after
    assert gone.status_code == 400 and gone.json_body["code"] == "unknown_model"
    # the key is never returned, logged or audited in clear (only has_key)
    out = capsys.readouterr()
    audited = audit_details(tenant)
    actions = [json.dumps(a) for a in audited]
    for text in [made.body.decode(), listed.body.decode(), tested.body.decode(), json.dumps(models),
                 chat.body.decode(), out.out, out.err, *actions]:
        assert KEY not in text
    names = [a for a in actions if "models.connection_" in a]
    assert len(names) == 3 and all("has_key" in a for a in names)  # created, tested, deleted
    assert KEY not in json.dumps(stored) and "api_key_ciphertext" in json.dumps(stored)


@pytest.mark.parametrize("case,code,step", [
    ("wrong_key", "unauthorized", "list_models"),
    ("no_models_route", "not_found", "list_models"),
    ("web_page", "not_openai", "list_models"),
    ("model_missing", "model_missing", "models"),
    ("unreachable", "unreachable", "list_models"),
])
def test_test_connection_says_exactly_what_failed(tenant: Tenant, world: helpers.World,
                                                  peer: scripted_peer.ScriptedPeer, case: str, code: str,
                                                  step: str) -> None:
    body = {"name": "probe", "kind": "openai", "region": "us-east-1", "base_url": peer.url, "api_key": KEY,
            "models": ["small"]}
    if case == "wrong_key":
        body["api_key"] = "sk-wrong"
    if case == "model_missing":
        body["models"] = ["small", "large-v9"]
    with helpers.client() as c:
        assert create(c, tenant.token, body).status_code == 201
        peer.models = None if case == "no_models_route" else peer.models
        peer.html = case == "web_page"
        if case == "unreachable":
            peer.stop()
        result = post(c, "/v1/models/connections/probe/test", tenant.token, {}).json_body
    assert result["ok"] is False
    failed = [ch for ch in result["checks"] if not ch["ok"]]
    assert (failed[0]["step"], failed[0]["code"]) == (step, code), result
    if case == "unreachable":
        peer.server = type("Stopped", (), {"shutdown": lambda s: None, "server_close": lambda s: None})()


def test_an_eu_workspace_is_refused_a_connection_outside_eu_central(stack: None, peer: scripted_peer.ScriptedPeer
                                                                     ) -> None:
    eu = make_tenant("eu-admin@example.com", residency="eu-central", name="Euro")
    with helpers.client() as c:
        refused = create(c, eu.token, {"name": "us-llm", "kind": "openai", "region": "us-east",
                                       "base_url": peer.url, "models": ["small"]})
        listed = c.http.get("/v1/models/connections", headers=bearer(eu.token)).json_body
        bedrock = create(c, eu.token, {"name": "claude", "kind": "bedrock", "region": "us-east-1",
                                       "models": ["anthropic.claude-3-haiku-20240307-v1:0"]})
        allowed = create(c, eu.token, {"name": "eu-claude", "kind": "bedrock", "region": "eu-central",
                                       "models": ["anthropic.claude-3-haiku-20240307-v1:0"]})
        profile = create(c, eu.token, {"name": "eu-profile", "kind": "bedrock", "region": "eu-central",
                                       "models": ["eu.anthropic.claude-3-haiku-20240307-v1:0"]})
    assert refused.status_code == 422 and refused.json_body["code"] == "connection_region_not_allowed"
    assert "eu-central" in refused.json_body["detail"]
    assert listed["items"] == []  # nothing stored
    assert bedrock.status_code == 422
    assert allowed.status_code == 201 and allowed.json_body["region"] == "eu-central-1"
    assert profile.status_code == 400  # a cross-region inference profile could leave the region


def test_a_member_can_neither_see_nor_change_connections(tenant: Tenant, world: helpers.World,
                                                         peer: scripted_peer.ScriptedPeer) -> None:
    member = token_for(tenant.workspace_id, "member")
    with helpers.client() as c:
        assert create(c, tenant.token, {"name": "team-llm", "kind": "openai", "region": "us-east",
                                        "base_url": peer.url, "api_key": KEY, "models": ["small"]}).status_code == 201
        answers = [c.http.get("/v1/models/connections", headers=bearer(member.token)),
                   c.http.get("/v1/models/connections/team-llm", headers=bearer(member.token)),
                   create(c, member.token, {"name": "mine", "kind": "openai", "region": "us-east",
                                            "base_url": peer.url, "models": ["small"]}),
                   c.http.patch("/v1/models/connections/team-llm", headers={**bearer(member.token),
                                "Content-Type": "application/json"}, body=json.dumps({"api_key": "x" * 8})),
                   post(c, "/v1/models/connections/team-llm/test", member.token, {}),
                   c.http.delete("/v1/models/connections/team-llm", headers=bearer(member.token))]
        still = c.http.get("/v1/models/connections", headers=bearer(tenant.token)).json_body
    assert [a.status_code for a in answers] == [403] * 6
    assert [i["name"] for i in still["items"]] == ["team-llm"] and still["items"][0]["has_key"] is True


def test_edit_replaces_the_key_and_models_and_bad_input_changes_nothing(
        tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    with helpers.client() as c:
        create(c, tenant.token, {"name": "team-llm", "kind": "openai", "region": "us-east", "base_url": peer.url,
                                 "models": ["small"]})
        edited = c.http.patch("/v1/models/connections/team-llm", headers={**bearer(tenant.token),
                              "Content-Type": "application/json"},
                              body=json.dumps({"api_key": KEY, "models": [{"id": "tiny", "timeout_seconds": 5,
                                                                           "max_answer_tokens": 64}]}))
        bad = [create(c, tenant.token, {"name": "Bad Name", "kind": "openai", "region": "us-east",
                                        "base_url": peer.url, "models": ["x"]}),
               create(c, tenant.token, {"name": "team-llm", "kind": "openai", "region": "us-east",
                                        "base_url": peer.url, "models": ["x"]}),
               create(c, tenant.token, {"name": "other", "kind": "openai", "region": "us-east",
                                        "base_url": "ftp://example.com", "models": ["x"]}),
               create(c, tenant.token, {"name": "other", "kind": "openai", "region": "us-east",
                                        "base_url": "https://user:pw@example.com", "models": ["x"]}),
               create(c, tenant.token, {"name": "other", "kind": "openai", "region": "mars", "base_url": peer.url}),
               create(c, tenant.token, {"name": "builtin", "kind": "openai", "region": "us-east",
                                        "base_url": peer.url, "models": ["x"]})]
        tested = post(c, "/v1/models/connections/team-llm/test", tenant.token, {}).json_body
        listed = c.http.get("/v1/models/connections", headers=bearer(tenant.token)).json_body
    assert edited.status_code == 200, edited.body
    assert edited.json_body["has_key"] is True and edited.json_body["model_ids"] == ["team-llm/tiny"]
    assert [b.status_code for b in bad] == [400, 409, 400, 400, 400, 409]
    assert tested["ok"] is True
    assert [i["name"] for i in listed["items"]] == ["team-llm"]
    assert listed["items"][0]["models"] == [{"id": "tiny", "timeout_seconds": 5, "max_answer_tokens": 64}]


# --- the endpoint URL goes through the outbound checks ---------------------------------------------------

@pytest.mark.parametrize("url,declared", [
    ("http://127.0.0.1:{port}", ""),  # loopback, not declared
    ("http://10.0.0.5:8080", "127.0.0.1:{port}"),  # private
    ("http://192.168.1.20", ""),
    ("http://[::1]:{port}", ""),
    ("http://169.254.169.254", "169.254.0.0/16"),  # metadata: refused even when declared
    ("http://[fe80::1]:8080", "fe80::/10"),  # link-local: refused even when declared
    ("http://[::ffff:169.254.169.254]", ""),  # metadata behind an IPv4-mapped address
    ("http://0.0.0.0:{port}", "0.0.0.0/0"),
])
def test_refused_endpoint_addresses(tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer,
                                    monkeypatch: pytest.MonkeyPatch, url: str, declared: str) -> None:
    monkeypatch.setenv("OUTBOUND_ALLOW", declared.format(port=peer.port))
    settings.cache_clear()
    with helpers.client() as c:
        r = create(c, tenant.token, {"name": "probe", "kind": "openai", "region": "us-east",
                                     "base_url": url.format(port=peer.port), "models": ["small"]})
        listed = c.http.get("/v1/models/connections", headers=bearer(tenant.token)).json_body
    assert r.status_code == 422 and r.json_body["code"] == "endpoint_refused", r.body
    assert listed["items"] == []
    assert peer.calls == []


def test_a_host_resolving_to_a_private_address_is_refused(tenant: Tenant, world: helpers.World,
                                                          peer: scripted_peer.ScriptedPeer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("10.1.2.3", 443))])
    with helpers.client() as c:
        r = create(c, tenant.token, {"name": "probe", "kind": "openai", "region": "us-east",
                                     "base_url": "https://models.example.com", "models": ["small"]})
    assert r.status_code == 422 and "private address" in r.json_body["detail"]


def test_dns_rebinding_after_creation_is_refused_at_use(tenant: Tenant, world: helpers.World,
                                                        peer: scripted_peer.ScriptedPeer,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The host resolved to a public address when declared, and to the loopback peer's address later
    (not declared for this host's port): the chat request is refused before any byte is sent."""
    answers = iter([[(2, 1, 6, "", ("93.184.216.34", peer.port))]])
    monkeypatch.setattr(socket, "getaddrinfo",
                        lambda *a, **k: next(answers, [(2, 1, 6, "", ("127.0.0.2", peer.port))]))
    with helpers.client() as c:
        made = create(c, tenant.token, {"name": "rebind", "kind": "openai", "region": "us-east",
                                        "base_url": f"http://models.example.com:{peer.port}", "models": ["small"]})
        chat = post(c, "/v1/chats", world.member.token, ask("Vacation days?", model="rebind/small"))
    assert made.status_code == 201
    assert chat.status_code == 502 and chat.json_body["failure"] == "endpoint_refused", chat.body
    assert peer.calls == []


def test_declared_entries_allow_only_their_address_and_port(monkeypatch: pytest.MonkeyPatch) -> None:
    import ipaddress

    from chalicelib.core.http import outbound

    monkeypatch.setenv("OUTBOUND_ALLOW", "127.0.0.1:8080, 10.20.0.0/16")

    settings.cache_clear()
    ok = [("127.0.0.1", 8080), ("10.20.3.4", 1), ("93.184.216.34", 443)]
    refused = [("127.0.0.1", 8081), ("127.0.0.2", 8080), ("10.21.0.1", 80), ("169.254.169.254", 80)]
    for addr, port in ok:
        outbound.check_address(ipaddress.ip_address(addr), "h", port)
    for addr, port in refused:
        with pytest.raises(Refused):
            outbound.check_address(ipaddress.ip_address(addr), "h", port)


def test_a_bedrock_connection_is_offered_and_its_test_names_the_failure(tenant: Tenant, world: helpers.World) -> None:
    """A Bedrock model in the workspace's region: no URL or key; routed like any model. moto does not
    serve Bedrock's runtime, so the test reports the provider's failure (the request shape is checked with
    botocore's Stubber in tests/unit/models/test_bedrock.py)."""
    with helpers.client() as c:
        made = create(c, tenant.token, {"name": "team-claude", "kind": "bedrock", "region": "us-east",
                                        "models": [{"id": "anthropic.claude-3-haiku-20240307-v1:0", "tool_use": True}]})
        with_url = create(c, tenant.token, {"name": "other", "kind": "bedrock", "region": "us-east",
                                            "base_url": "https://example.com", "models": ["x"]})
        models = c.http.get("/v1/models", headers=bearer(world.member.token)).json_body
        tested = post(c, "/v1/models/connections/team-claude/test", tenant.token, {}).json_body
    assert made.status_code == 201 and made.json_body["has_key"] is False and "base_url" not in made.json_body
    assert with_url.status_code == 400
    ids = [m["id"] for m in models["items"]]
    assert ids[0] == "team-claude/anthropic.claude-3-haiku-20240307-v1:0"
    assert models["items"][0]["provider_kind"] == "bedrock" and models["items"][0]["capabilities"]["tool_use"]
    assert tested["ok"] is False and tested["checks"][0]["step"] == "chat"


def test_an_agent_may_use_any_model_get_models_offers_connections_included(
        tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    agent = {"name": "Team agent", "instructions": "Answer.", "tools": ["catalog_search"]}
    with helpers.client() as c:
        before = post(c, "/v1/agents", tenant.token, {**agent, "model": "team-llm/small"})
        assert create(c, tenant.token, {"name": "team-llm", "kind": "openai", "region": "us-east",
                                        "base_url": peer.url + "/v1/", "api_key": KEY}).status_code == 201
        offered = [m["id"] for m in c.http.get("/v1/models", headers=bearer(tenant.token)).json_body["items"]]
        made = post(c, "/v1/agents", tenant.token, {**agent, "model": "team-llm/small"})
        unknown = post(c, "/v1/agents", tenant.token, {**agent, "model": "team-llm/huge"})
        renamed = c.http.patch(f"/v1/agents/{made.json_body['id']}", headers={**bearer(tenant.token),
                               "Content-Type": "application/json"}, body=json.dumps({"model": "team-llm/tiny"}))
    assert "team-llm/small" in offered
    assert before.status_code == 400 and before.json_body["errors"][0]["field"] == "model"  # not connected yet
    assert made.status_code == 201, made.body
    assert made.json_body["model"] == "team-llm/small"
    assert unknown.status_code == 400 and unknown.json_body["errors"][0]["field"] == "model"
    assert renamed.status_code == 200 and renamed.json_body["model"] == "team-llm/tiny"


# --- model servers on this machine: LOCAL_ENDPOINTS=1 under make run ---------------------------------------

def patch(c: Any, token: str, name: str, body: dict[str, Any]) -> Any:
    return c.http.patch(f"/v1/models/connections/{name}", headers={**bearer(token), "Content-Type": "application/json"},
                        body=json.dumps(body))


def test_a_model_server_on_this_machine_needs_the_switch_and_the_refusal_names_it(
        tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    body = {"name": "mine", "kind": "openai", "region": "us-east", "base_url": peer.url, "models": ["small"],
            "api_key": KEY}
    monkeypatch.setenv("OUTBOUND_ALLOW", "")
    settings.cache_clear()
    with helpers.client() as c:
        refused = create(c, tenant.token, body)
        off = c.http.get("/v1/models/connections", headers=bearer(tenant.token)).json_body
    assert refused.status_code == 422 and refused.json_body["code"] == "endpoint_refused"
    assert "private address on this machine" in refused.json_body["detail"]
    assert "LOCAL_ENDPOINTS=1" in refused.json_body["detail"] and "docs/api/models.md" in refused.json_body["detail"]
    assert off["items"] == [] and off["local_endpoints"] is False and peer.calls == []

    monkeypatch.setenv("LOCAL_ENDPOINTS", "1")
    settings.cache_clear()
    with helpers.client() as c:
        made = create(c, tenant.token, body)
        on = c.http.get("/v1/models/connections", headers=bearer(tenant.token)).json_body
        chat = post(c, "/v1/chats", world.member.token, ask("Vacation days?", model="mine/small"))
        metadata = create(c, tenant.token, {**body, "name": "meta", "base_url": "http://169.254.169.254"})
        private = create(c, tenant.token, {**body, "name": "lan", "base_url": "http://10.0.0.5:8080"})
    assert made.status_code == 201, made.body
    assert on["local_endpoints"] is True and [i["name"] for i in on["items"]] == ["mine"]
    assert chat.status_code == 201 and "thirty" in json.dumps(chat.json_body), chat.body
    # the switch admits loopback only: metadata, link-local and other private networks stay refused
    assert metadata.status_code == 422 and "always refused" in metadata.json_body["detail"]
    assert private.status_code == 422 and "private network" in private.json_body["detail"]


def test_the_switch_is_ignored_outside_the_local_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_ENDPOINTS", "1")
    monkeypatch.setenv("STAGE", "prod")
    settings.cache_clear()
    try:
        assert settings().local_endpoints is False
    finally:
        monkeypatch.delenv("STAGE")
        settings.cache_clear()


def test_an_admin_edits_url_key_models_and_name_audited_and_the_key_never_returned(
        tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer,
        capsys: pytest.CaptureFixture[str]) -> None:
    member = token_for(tenant.workspace_id, "member")
    with helpers.client() as c:
        assert create(c, tenant.token, {"name": "team-llm", "kind": "openai", "region": "us-east",
                                        "base_url": "https://93.184.216.34", "api_key": KEY,
                                        "models": ["small"]}).status_code == 201
        by_member = patch(c, member.token, "team-llm", {"base_url": peer.url})
        bad = [patch(c, tenant.token, "team-llm", {"base_url": "http://169.254.169.254"}),
               patch(c, tenant.token, "team-llm", {"base_url": "ftp://example.com"}),
               patch(c, tenant.token, "team-llm", {"name": "Bad Name"}),
               patch(c, tenant.token, "team-llm", {"name": "builtin"}),
               patch(c, tenant.token, "team-llm", {"models": []}),
               patch(c, tenant.token, "team-llm", {"colour": "red"}),
               patch(c, tenant.token, "nope", {"name": "other"})]
        unchanged = c.http.get("/v1/models/connections/team-llm", headers=bearer(tenant.token)).json_body
        edited = patch(c, tenant.token, "team-llm", {"base_url": peer.url + "/v1", "name": "renamed",
                                                     "models": ["tiny", "small"]})
        gone = c.http.get("/v1/models/connections/team-llm", headers=bearer(tenant.token))
        tested = post(c, "/v1/models/connections/renamed/test", tenant.token, {}).json_body
    assert by_member.status_code == 403
    assert [b.status_code for b in bad] == [422, 400, 400, 409, 400, 400, 404], [b.body for b in bad]
    assert unchanged["base_url"] == "https://93.184.216.34" and unchanged["model_ids"] == ["team-llm/small"]
    assert edited.status_code == 200, edited.body
    assert edited.json_body["base_url"] == peer.url and edited.json_body["has_key"] is True
    assert edited.json_body["model_ids"] == ["renamed/tiny", "renamed/small"]
    assert gone.status_code == 404
    assert tested["ok"] is True  # the key, re-encrypted under the new name, still reaches the endpoint
    assert KEY not in edited.body.decode() if isinstance(edited.body, bytes) else KEY not in edited.body
    events = audit_details(tenant)
    updated = [e for e in events if e["action"]["S"] == "models.connection_updated"]
    assert len(updated) == 1 and KEY not in json.dumps(events)
    assert "renamed_from" in json.dumps(updated[0]) and "team-llm" in json.dumps(updated[0])
    assert KEY not in capsys.readouterr().out
