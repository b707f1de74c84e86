"""Answer modes: a workspace that allows general answers (``answer_mode: knowledge_first``) lets a chat
(``mode: general_allowed``) answer from the model's general knowledge when its sources do not, labelled
``origin: general``, without citations, never counted as supported. The model is a scripted
OpenAI-compatible peer; the handbook says employees get thirty vacation days (tests/functional/chat/helpers.py)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.core import audit
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.chat.test_grounding import configure
from tests.functional.conftest import Tenant, bearer
from tests.functional.models import scripted_peer

GENERAL_TEXT = "The moon is about 384,400 kilometres from the Earth. It orbits the Earth in about 27 days."
QUESTION = "How far away is the moon?"


@pytest.fixture
def peer() -> Iterator[scripted_peer.ScriptedPeer]:
    p = scripted_peer.start(answer=GENERAL_TEXT)
    yield p
    p.stop()


@pytest.fixture
def world(tenant: Tenant, peer: scripted_peer.ScriptedPeer, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    configure(monkeypatch, peer.url)
    return helpers.build(tenant)


def set_mode(c: Any, tenant: Tenant, value: str | None) -> Any:
    return c.http.patch(f"/v1/workspaces/{tenant.workspace_id}",
                        headers={**bearer(tenant.token), "Content-Type": "application/json"},
                        body=json.dumps({"answer_mode": value}))


def test_a_chat_may_not_allow_general_answers_where_the_workspace_does_not(world: helpers.World) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask(QUESTION, mode="general_allowed"))
        assert r.status_code == 403 and r.json_body["code"] == "general_answers_not_allowed"
        assert r.headers["Content-Type"].startswith("application/problem+json")
        assert c.http.get("/v1/chats", headers=bearer(world.member.token)).json_body["items"] == []  # nothing stored
        bad = post(c, "/v1/chats", world.member.token, ask(QUESTION, mode="anything"))
        assert bad.status_code == 400 and bad.json_body["errors"][0]["field"] == "mode"
        chat = post(c, "/v1/chats", world.member.token, ask(QUESTION)).json_body
        assert chat["notice"]["code"] == "unsupported" and "origin" not in chat  # knowledge only: never general
        assert "384,400" not in chat["message"]["content"]
        patch = c.http.patch(f"/v1/chats/{chat['chat_id']}", headers={**bearer(world.member.token),
                             "Content-Type": "application/json"}, body=json.dumps({"mode": "general_allowed"}))
        assert patch.status_code == 403 and patch.json_body["code"] == "general_answers_not_allowed"
        # a Member cannot allow general answers for the workspace
        assert set_mode(c, world.tenant, "knowledge_first").status_code == 200
        member_patch = c.http.patch(f"/v1/workspaces/{world.tenant.workspace_id}",
                                    headers={**bearer(world.member.token), "Content-Type": "application/json"},
                                    body=json.dumps({"answer_mode": "knowledge_only"}))
        assert member_patch.status_code == 403
        assert set_mode(c, world.tenant, "everything").status_code == 400


def test_a_general_answer_is_labelled_uncited_and_never_counted_as_supported_on_both_apis(
        world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    with helpers.client() as c:
        ws = set_mode(c, world.tenant, "knowledge_first").json_body
        assert ws["settings"]["answer_mode"] == "knowledge_first"
        r = post(c, "/v1/chats", world.member.token, ask(QUESTION, mode="general_allowed"))
        assert r.status_code == 201, r.body
        body = r.json_body
        assert body["origin"] == "general" and body["notice"]["code"] == "general_answer"
        assert body["message"]["content"] == GENERAL_TEXT and body["citations"] == []
        g = body["grounding"]
        assert {s["status"] for s in g["per_sentence"]} == {"general"}
        assert all(s["origin"] == "general" for s in g["per_sentence"])
        assert (g["grounded_sentences"], g["sentences"], g["general_sentences"], g["ratio"]) == (0, 0, 2, 0.0)
        system = [m["content"] for m in peer.calls[-1]["body"]["messages"] if m["role"] == "system"]
        assert any("general knowledge" in s for s in system)
        stored = c.http.get(f"/v1/chats/{body['chat_id']}", headers=bearer(world.member.token)).json_body
        assert stored["mode"] == "general_allowed" and stored["messages"][-1]["origin"] == "general"
        answered = [e for e in audit.iter_chain(world.tenant.region, world.tenant.workspace_id)
                    if e["action"] == "chat.answered"]
        assert answered[-1]["details"]["origin"] == "general"
        # a chat that did not choose general answers never gets one, even where the workspace allows them
        default = post(c, "/v1/chats", world.member.token, ask(QUESTION)).json_body
        assert "origin" not in default and default["notice"]["code"] == "unsupported"
        assert default["grounding"]["unsupported_sentences"] == 2
        # a supported answer in the same chat stays a sources answer
        peer.answer = "Employees get thirty vacation days per year."
        again = post(c, f"/v1/chats/{body['chat_id']}/messages", world.member.token,
                     ask("How many vacation days do employees get?")).json_body
        assert "origin" not in again and again["grounding"]["ratio"] == 1.0 and again["citations"]
        # the workspace stops allowing general answers: the chat answers from its sources only again
        peer.answer = GENERAL_TEXT
        set_mode(c, world.tenant, "knowledge_only")
        last = post(c, f"/v1/chats/{body['chat_id']}/messages", world.member.token, ask(QUESTION)).json_body
        assert "origin" not in last and last["notice"]["code"] == "unsupported"
        # the mode is chosen at creation or by PATCH, not per message
        late = post(c, f"/v1/chats/{body['chat_id']}/messages", world.member.token,
                    ask(QUESTION, mode="knowledge"))
        assert late.status_code == 400 and late.json_body["errors"][0]["field"] == "mode"
        # the OpenAI-compatible API: the same answer, labelled in its extra fields
        set_mode(c, world.tenant, "knowledge_first")
        r = post(c, "/v1/chat/completions", world.member.token, ask(QUESTION, mode="general_allowed"))
        assert r.status_code == 200, r.body
        body = r.json_body
        assert body["choices"][0]["message"]["content"] == GENERAL_TEXT
        assert body["origin"] == "general" and body["notice"]["code"] == "general_answer"
        assert body["citations"] == [] and body["grounding"]["grounded_sentences"] == 0
        plain = post(c, "/v1/chat/completions", world.member.token, ask(QUESTION)).json_body
        assert plain["origin"] == "sources" and "384,400" not in plain["choices"][0]["message"]["content"]


def test_the_extractive_path_never_answers_generally_nor_passes_off_quotes_beside_the_point(
        tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, None)  # no generative model: extractive answers
    world = helpers.build(tenant)
    with helpers.client() as c:
        set_mode(c, tenant, "knowledge_first")
        body = post(c, "/v1/chats", world.member.token, ask(QUESTION, mode="general_allowed")).json_body
        assert body["kind"] == "extractive" and "origin" not in body
        assert body["notice"]["code"] == "not_in_sources"
        # a true quote (100% of its sentences backed) that says nothing of Berlin does not pass for an answer
        body = post(c, "/v1/chats", world.member.token,
                    ask("How many vacation days do employees get per year in Berlin?")).json_body
        g = body["grounding"]
        assert body["kind"] == "extractive" and g["ratio"] == 1.0  # the quote itself is verbatim
        assert g["answers_question"] is False and g["question_terms_not_quoted"] == ["berlin"]
        assert "do not mention berlin" in body["notice"]["message"]
        plain = post(c, "/v1/chats", world.member.token, ask("How many vacation days do employees get per year?"))
        assert plain.json_body["grounding"]["answers_question"] is True
        assert "do not mention" not in plain.json_body["notice"]["message"]
