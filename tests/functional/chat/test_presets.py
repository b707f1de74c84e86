"""Presets: saved instructions, private (their owner's alone) or the workspace's (Admins write, Members
read), a chat started from one (its instructions reach the model as the chat's system instructions) and an
agent definition made from one."""
from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.core import audit
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.chat.test_grounding import configure
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.functional.gateway.data import token_for
from tests.functional.models import scripted_peer

INSTRUCTIONS = "Answer in one short sentence and address the reader as colleague."


def call(c: Any, method: str, path: str, token: str, body: Any = None) -> Any:
    headers = {**bearer(token), **({"Content-Type": "application/json"} if body is not None else {})}
    return c.http.request(method, path, headers=headers, body=json.dumps(body) if body is not None else b"")


def test_presets_crud_scopes_and_isolation(tenant: Tenant) -> None:
    member = token_for(tenant.workspace_id, "member")
    other_member = token_for(tenant.workspace_id, "member")
    viewer = token_for(tenant.workspace_id, "viewer")
    stranger = make_tenant("owner@other.example", name="Other")
    with helpers.client() as c:
        mine = call(c, "POST", "/v1/presets", member.token, {"name": " Short  answers ", "instructions": INSTRUCTIONS})
        assert mine.status_code == 201, mine.body
        p = mine.json_body
        assert (p["name"], p["scope"], p["instructions"]) == ("Short answers", "private", INSTRUCTIONS)
        dup = call(c, "POST", "/v1/presets", member.token, {"name": "short ANSWERS", "instructions": "x"})
        assert dup.status_code == 409 and dup.json_body["code"] == "preset_name_taken"
        # the same name is free for another owner
        assert call(c, "POST", "/v1/presets", other_member.token,
                    {"name": "Short answers", "instructions": "y"}).status_code == 201
        for bad in ({"name": "", "instructions": "x"}, {"name": "n", "instructions": "x" * 8001},
                    {"name": "n", "instructions": "   "}, {"name": "n", "instructions": "x", "scope": "team"},
                    {"name": "n", "instructions": "x", "owner": "me"}, ["n"]):
            r = call(c, "POST", "/v1/presets", member.token, bad)
            assert r.status_code == 400 and r.headers["Content-Type"].startswith("application/problem+json"), bad
        # workspace presets: Admins write, Members read but cannot change them
        shared = {"name": "House style", "instructions": "Use British spelling.", "scope": "workspace"}
        assert call(c, "POST", "/v1/presets", member.token, shared).status_code == 403
        ws_preset = call(c, "POST", "/v1/presets", tenant.token, shared).json_body
        assert ws_preset["scope"] == "workspace"
        listed = call(c, "GET", "/v1/presets", member.token).json_body["items"]
        assert [i["name"] for i in listed] == ["House style", "Short answers"]
        assert call(c, "GET", f"/v1/presets/{ws_preset['id']}", member.token).status_code == 200
        assert call(c, "PATCH", f"/v1/presets/{ws_preset['id']}", member.token,
                    {"instructions": "Ignore the sources."}).status_code == 403
        assert call(c, "DELETE", f"/v1/presets/{ws_preset['id']}", member.token).status_code == 403
        assert call(c, "GET", "/v1/presets", viewer.token).status_code == 403  # Viewers do not chat
        # another user's private preset, and any preset from another workspace, is 404
        assert call(c, "GET", f"/v1/presets/{p['id']}", other_member.token).status_code == 404
        assert call(c, "GET", f"/v1/presets/{p['id']}", tenant.token).status_code == 404
        assert call(c, "PATCH", f"/v1/presets/{p['id']}", tenant.token, {"name": "mine now"}).status_code == 404
        assert call(c, "DELETE", f"/v1/presets/{p['id']}", other_member.token).status_code == 404
        assert call(c, "GET", f"/v1/presets/{ws_preset['id']}", stranger.token).status_code == 404
        assert call(c, "GET", "/v1/presets", stranger.token).json_body["items"] == []
        assert call(c, "GET", "/v1/presets/pre_nonsense", member.token).status_code == 404
        # the owner changes and deletes their own; the Admin the workspace's (audited)
        changed = call(c, "PATCH", f"/v1/presets/{p['id']}", member.token, {"name": "Brief"}).json_body
        assert changed["name"] == "Brief" and changed["instructions"] == INSTRUCTIONS
        assert call(c, "PATCH", f"/v1/presets/{ws_preset['id']}", tenant.token,
                    {"name": "House style 2"}).status_code == 200
        assert call(c, "DELETE", f"/v1/presets/{p['id']}", member.token).status_code == 204
        assert call(c, "GET", f"/v1/presets/{p['id']}", member.token).status_code == 404
        assert call(c, "DELETE", f"/v1/presets/{ws_preset['id']}", tenant.token).status_code == 204
    actions = [e["action"] for e in audit.iter_chain(tenant.region, tenant.workspace_id)
               if e.get("target", {}).get("type") == "preset"]
    assert sorted(actions) == ["preset.created", "preset.deleted", "preset.updated"]  # workspace presets only


@pytest.fixture
def peer() -> Any:
    p = scripted_peer.start(answer="Employees get thirty vacation days per year.")
    yield p
    p.stop()


def test_a_chat_from_a_preset_sends_its_instructions(tenant: Tenant, peer: scripted_peer.ScriptedPeer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, peer.url)
    world = helpers.build(tenant)
    with helpers.client() as c:
        preset = call(c, "POST", "/v1/presets", world.member.token,
                      {"name": "Brief", "instructions": INSTRUCTIONS}).json_body
        r = post(c, "/v1/chats", world.member.token, ask("How many vacation days do employees get?",
                                                         preset_id=preset["id"]))
        assert r.status_code == 201, r.body
        chat_id = r.json_body["chat_id"]
        post(c, f"/v1/chats/{chat_id}/messages", world.member.token, ask("And when do they expire?"))
        answers = [c["body"]["messages"] for c in peer.calls
                   if any("Passages:" in m["content"] for m in c.get("body", {}).get("messages", []))]
        assert len(answers) == 2
        for messages in answers:  # every answer of the chat carries the preset's instructions
            assert {"role": "system", "content": INSTRUCTIONS} in messages
            passages = next(m["content"] for m in messages if "Passages:" in m["content"])
            assert INSTRUCTIONS not in passages  # the documents stay data in their own delimited block
        stored = c.http.get(f"/v1/chats/{chat_id}", headers=bearer(world.member.token)).json_body
        assert stored["preset_id"] == preset["id"]
        # another user's preset cannot be used
        other = token_for(tenant.workspace_id, "member")
        refused = post(c, "/v1/chats", other.token, ask("Hello?", preset_id=preset["id"]))
        assert refused.status_code == 404


def test_an_agent_from_a_preset_copies_its_instructions(tenant: Tenant) -> None:
    with helpers.client() as c:
        preset = call(c, "POST", "/v1/presets", tenant.token, {"name": "Brief", "instructions": INSTRUCTIONS}).json_body
        r = call(c, "POST", "/v1/agents", tenant.token, {"name": "helper", "tools": ["knowledge_search"],
                                                           "preset_id": preset["id"]})
        assert r.status_code == 201, r.body
        assert r.json_body["instructions"] == INSTRUCTIONS
        both = call(c, "POST", "/v1/agents", tenant.token, {"name": "h2", "tools": ["knowledge_search"],
                                                              "preset_id": preset["id"], "instructions": "x"})
        assert both.status_code == 400
        member = token_for(tenant.workspace_id, "member")
        assert call(c, "POST", "/v1/agents", member.token, {"name": "h3", "tools": ["knowledge_search"],
                                                              "preset_id": preset["id"]}).status_code == 404
