"""Grounding of generative answers, computed by the service whatever the model writes, and the chat's
bad-input paths against a model endpoint. The model is a scripted OpenAI-compatible peer (a test double
of the model only: a real model cannot be made to answer these exact sentences); retrieval, routing, the
provider, attribution and storage are the real code. The handbook says: "Employees get thirty vacation
days per year. Unused days expire in March." (tests/functional/chat/helpers.py)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, bearer
from tests.functional.models import scripted_peer

MODEL = "team/small"


@pytest.fixture
def peer() -> Iterator[scripted_peer.ScriptedPeer]:
    p = scripted_peer.start()
    yield p
    p.stop()


def configure(monkeypatch: pytest.MonkeyPatch, url: str, **model: Any) -> None:
    helpers.use_providers(monkeypatch, {"preference": [MODEL], "providers": [
        {"id": "team", "kind": "openai", "endpoints": {"us-east-1": {"base_url": url}},
         "models": [{"id": "small", "context_tokens": 16000, **model}]}]})


@pytest.fixture
def world(tenant: Tenant, peer: scripted_peer.ScriptedPeer, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    configure(monkeypatch, peer.url)
    return helpers.build(tenant)


def answer(world: helpers.World, question: str, **extra: Any) -> Any:
    with helpers.client() as c:
        return post(c, "/v1/chats", world.member.token, ask(question, **extra))


def statuses(body: dict[str, Any]) -> list[str]:
    return [s["status"] for s in body["grounding"]["per_sentence"]]


def test_a_supported_answer_without_markers_is_attributed_with_verified_quotes(
        world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = "Employees get thirty vacation days per year. Unused days expire in March."
    r = answer(world, "How many vacation days do employees get?")
    assert r.status_code == 201, r.body
    body = r.json_body
    assert statuses(body) == ["supported", "supported"]
    g = body["grounding"]
    assert (g["ratio"], g["low"], g["sentences"]) == (1.0, False, 2) and g["method"]["rules"]
    assert "notice" not in body and body["message"]["content"] == peer.answer
    cite = body["citations"][0]
    assert cite["attributed"] and cite["verified"] and cite["source"]["dataset_id"] == world.handbook
    assert {"version", "chunk_id", "span", "chunk_span"} <= set(cite)
    # the quote is verbatim in the stored passage at its span
    first = g["per_sentence"][0]
    assert body["message"]["content"][first["start"]:first["end"]].startswith("Employees get thirty")
    assert first["quote"].endswith("Employees get thirty vacation days per year.")


def test_a_partly_supported_answer_marks_each_sentence_and_flags_the_invented_figure(
        world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = ("Employees get thirty vacation days per year. Unused days expire in March. "
                   "Managers get 45 extra vacation days per year. The cafeteria serves sushi on Fridays.")
    body = answer(world, "How many vacation days do employees get?").json_body
    assert statuses(body) == ["supported", "supported", "unsupported", "unsupported"]
    invented = body["grounding"]["per_sentence"][2]
    assert invented["numbers_not_in_sources"] == ["45"]
    assert body["grounding"]["ratio"] == 0.5 and body["grounding"]["low"] is False
    assert "notice" not in body


def test_low_grounding_says_so_and_shows_the_best_quotes(world: helpers.World,
                                                         peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = ("Employees get thirty vacation days per year. Managers get 45 extra days. "
                   "Days can be sold back for cash. The policy dates from 1987.")
    body = answer(world, "How many vacation days do employees get?").json_body
    assert statuses(body) == ["supported", "unsupported", "unsupported", "unsupported"]
    assert body["grounding"]["low"] is True and body["notice"]["code"] == "low_grounding"
    content = body["message"]["content"]
    assert content.startswith("Only part of this answer is supported") and "grounding 25%" in content
    assert "Best matching quotes from your sources:" in content
    assert any(c.get("best_quote") and "thirty vacation days" in c["quote"] for c in body["citations"])
    for s in body["grounding"]["per_sentence"]:  # spans point into the content shown
        assert content[s["start"]:s["end"]].strip()


def test_an_answer_with_no_support_is_not_shown_as_fact(world: helpers.World,
                                                        peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = "The moon is made of green cheese. Astronauts eat it on Tuesdays."
    body = answer(world, "How many vacation days do employees get?").json_body
    assert statuses(body) == ["unsupported", "unsupported"]
    assert body["grounding"]["ratio"] == 0.0 and body["grounding"]["spans_of"] == "unverified_answer"
    assert body["notice"]["code"] == "unsupported"
    assert "green cheese" not in body["message"]["content"]
    assert body["unverified_answer"] == peer.answer
    assert "thirty vacation days" in body["message"]["content"]  # the best quote instead
    assert all(c.get("best_quote") for c in body["citations"])


def test_a_stored_chat_keeps_the_marks(world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = "Employees get thirty vacation days per year. Managers get 45 extra days."
    made = answer(world, "How many vacation days do employees get?").json_body
    with helpers.client() as c:
        chat = c.http.get(f"/v1/chats/{made['chat_id']}", headers=bearer(world.member.token)).json_body
    assert [s["status"] for s in chat["messages"][-1]["grounding"]["per_sentence"]] == ["supported", "unsupported"]


# --- bad input from the model endpoint: a clear error, no answer stored ------------------------------------

def _no_chats(world: helpers.World) -> bool:
    """No answer was stored: each chat holds only its questions (recorded before the model was asked),
    and takes new messages again."""
    with helpers.client() as c:
        items = c.http.get("/v1/chats", headers=bearer(world.member.token)).json_body["items"]
        chats = [c.http.get(f"/v1/chats/{i['id']}", headers=bearer(world.member.token)).json_body for i in items]
    return all("answering" not in ch and {m["role"] for m in ch["messages"]} == {"user"} for ch in chats)


def test_an_unreachable_endpoint(world: helpers.World, peer: scripted_peer.ScriptedPeer,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    url = peer.url
    peer.stop()
    configure(monkeypatch, url)
    r = answer(world, "How many vacation days?")
    assert r.status_code == 502 and r.json_body["failure"] == "unreachable"
    assert "unreachable" in r.json_body["detail"]
    assert _no_chats(world)
    peer.server = type("Stopped", (), {"shutdown": lambda s: None, "server_close": lambda s: None})()


def test_a_slow_endpoint_past_its_timeout(world: helpers.World, peer: scripted_peer.ScriptedPeer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, peer.url, timeout_seconds=1)
    peer.delay = 2.5
    for stream in (False, True):
        r = answer(world, "How many vacation days?", stream=stream)
        assert r.status_code == 504 and r.json_body["code"] == "model_timeout", r.body
        assert "within 1 s" in r.json_body["detail"]
    assert _no_chats(world)


def test_a_malformed_stream(world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    """The break comes after the answer's text: the stream has begun, so the failure is its last event
    (the problem, with the failure), and nothing is stored."""
    peer.malformed = True
    r = answer(world, "How many vacation days?", stream=True)
    blocks = [dict(line.split(": ", 1) for line in b.splitlines()) for b in r.body.decode().strip().split("\n\n")]
    assert r.status_code == 201 and [b["event"] for b in blocks][0] == "message_start"
    assert blocks[-1]["event"] == "error" and "citations" not in [b["event"] for b in blocks]
    problem = json.loads(blocks[-1]["data"])
    assert problem["status"] == 502 and problem["failure"] == "malformed_stream"
    assert _no_chats(world)


def test_an_answer_that_is_not_a_chat_completion(world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    peer.html = True
    r = answer(world, "How many vacation days?")
    assert r.status_code == 502 and r.json_body["failure"] == "not_openai"
    assert _no_chats(world)


def test_the_answer_token_cap_is_sent(world: helpers.World, peer: scripted_peer.ScriptedPeer,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, peer.url, max_answer_tokens=64)
    answer(world, "How many vacation days?")
    assert peer.calls[-1]["body"]["max_tokens"] == 64


def test_without_a_generative_model_the_reply_says_how_to_connect_one(
        world: helpers.World, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, None)
    with helpers.client() as c:
        models = c.http.get("/v1/models", headers=bearer(world.member.token)).json_body
    body = answer(world, "How many vacation days do employees get?").json_body
    assert body["kind"] == "extractive" and body["notice"]["code"] == "no_generative_model"
    assert "POST /v1/models/connections" in body["notice"]["message"]
    assert models["generative_available"] is False and "LOCAL_MODEL" in models["notice"]


# --- support means entailment: wrong answers in the sources' wording, correct short answers ----------------

def _check_citations(body: dict[str, Any]) -> None:
    for cite in body["citations"]:  # every citation shown is verified: its quote stands at its span
        assert cite["verified"] is True and cite["quote"].strip()
        assert len(cite["quote"]) < 200  # a sentence of the passage, never a whole unrelated paragraph


def test_support_means_the_passage_entails_the_sentence(world: helpers.World,
                                                        peer: scripted_peer.ScriptedPeer) -> None:
    # the marker after the period, as the prompt asks: two sentences; an invented person is not supported
    peer.answer = ("Employees get thirty vacation days per year.[1] "
                   "Travel is booked through the travel desk by Maria Lopez.[2]")
    body = answer(world, "How many vacation days do employees get, and who books travel?").json_body
    per = body["grounding"]["per_sentence"]
    assert statuses(body) == ["supported", "unsupported"] and body["grounding"]["sentences"] == 2
    assert per[1]["terms_not_in_passage"] == ["Maria", "Lopez"] and per[1]["decided_by"] == "rules"
    assert "[1]" not in body["message"]["content"] and "[2]" not in body["message"]["content"]  # bare: dropped
    assert [c.get("attributed") for c in body["citations"]] == [True]  # only the supported sentence's quote
    assert body["citations"][0]["quote"].endswith("Employees get thirty vacation days per year.")
    _check_citations(body)

    # a real figure of the sources, in another sentence's role
    peer.answer = "Unused vacation days expire after thirty days."
    body = answer(world, "When do unused vacation days expire?").json_body
    assert statuses(body) == ["unsupported"] and body["notice"]["code"] == "unsupported"
    assert "figure_of_another_statement" in body["grounding"]["per_sentence"][0]["reasons"]

    # negation flipped
    peer.answer = "Economy class is not the default for travel."
    assert statuses(answer(world, "Which class is the default for travel?").json_body) == ["unsupported"]


def test_a_short_correct_answer_is_shown_as_supported(world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = "Lisbon."
    body = answer(world, "Which city does Zelda Quark live in?").json_body
    assert statuses(body) == ["supported"] and body["grounding"]["ratio"] == 1.0
    assert "notice" not in body and body["message"]["content"] == "Lisbon."
    assert "Lisbon" in body["citations"][0]["quote"]
    _check_citations(body)


# --- the model's entailment check after the rules --------------------------------------------------------

def _judge(refuse: str) -> Any:
    """The scripted model as checker: 'no' for statements holding ``refuse``, 'yes' for the others."""
    def reply(body: dict[str, Any]) -> str | None:
        ask_ = body["messages"][-1]["content"]
        if not body["messages"][0]["content"].startswith("You check a statement"):
            return None
        statement = ask_.split("\nStatement: ", 1)[1]
        return "no" if refuse in statement else "Yes."
    return reply


def test_the_model_confirms_or_refuses_what_the_rules_support(world: helpers.World,
                                                              peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = "Employees get thirty vacation days per year. Unused days expire in March."
    peer.reply = _judge("expire")
    body = answer(world, "How many vacation days do employees get?").json_body
    per = body["grounding"]["per_sentence"]
    assert [(p["status"], p["decided_by"]) for p in per] == [("supported", "model"), ("unsupported", "model")]
    assert per[1]["reasons"] == ["model_not_entailed"]
    check = body["grounding"]["model_check"]
    assert (check["model"], check["calls"]) == (MODEL, 2) and body["grounding"]["method"]["model"] == MODEL
    checks = [c for c in peer.calls if c["body"] and c["body"]["messages"][0]["content"].startswith("You check")]
    assert len(checks) == 2 and all(c["body"]["max_tokens"] == 3 for c in checks)
    assert "<<DATA " in checks[0]["body"]["messages"][1]["content"]  # the passage goes as untrusted data
    # the same statement and passage again: the verdicts come from the cache, no new call
    body = answer(world, "How many vacation days do employees get?").json_body
    assert body["grounding"]["model_check"]["calls"] == 0 and body["grounding"]["model_check"]["cached"] == 2
    assert len([c for c in peer.calls if c["body"] and c["body"]["messages"][0]["content"].startswith("You check")]) == 2
    with helpers.client() as c:  # the check's tokens are in the usage report, under the model that checked
        use = c.http.get("/v1/usage", headers=bearer(world.tenant.token)).json_body["items"]
    mine = [u for u in use if u["model"] == MODEL]
    assert mine and mine[0]["input_tokens"] == 2 * 100 + 2 * 100 and mine[0]["requests"] == 2


def test_an_admin_designates_the_checking_model_or_turns_it_off(world: helpers.World,
                                                                peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = "Employees get thirty vacation days per year."
    peer.reply = _judge("thirty")
    ws = world.tenant.workspace_id

    def patch(value: Any) -> Any:
        with helpers.client() as c:
            return c.http.patch(f"/v1/workspaces/{ws}", headers={**bearer(world.tenant.token),
                                                                 "Content-Type": "application/json"},
                                body=json.dumps({"grounding_check_model": value}))

    assert patch(12).status_code == 400  # not a model id: nothing changes
    assert patch("off").status_code == 200
    body = answer(world, "How many vacation days do employees get?").json_body
    assert body["grounding"]["per_sentence"][0]["decided_by"] == "rules" and "model_check" not in body["grounding"]
    assert patch("team/none").status_code == 200  # a model this workspace cannot use: the answering model checks
    body = answer(world, "How many vacation days do employees get?").json_body
    assert "team/none cannot check here" in body["grounding"]["model_check"]["note"]
    assert body["grounding"]["per_sentence"][0]["status"] == "unsupported"
    with helpers.client() as c:
        assert c.http.patch(f"/v1/workspaces/{ws}", headers={**bearer(world.member.token),
                                                             "Content-Type": "application/json"},
                            body=json.dumps({"grounding_check_model": "off"})).status_code == 403


def test_a_cheaper_designated_model_checks_and_is_billed_apart(tenant: Tenant, peer: scripted_peer.ScriptedPeer,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, {"preference": [MODEL], "providers": [
        {"id": "team", "kind": "openai", "endpoints": {"us-east-1": {"base_url": peer.url}},
         "models": [{"id": "small", "context_tokens": 16000}, {"id": "cheap", "context_tokens": 4000}]}]})
    world = helpers.build(tenant)
    peer.answer = "Employees get thirty vacation days per year."
    peer.reply = _judge("nothing refused")
    with helpers.client() as c:
        assert c.http.patch(f"/v1/workspaces/{tenant.workspace_id}", body=json.dumps(
            {"grounding_check_model": "team/cheap"}), headers={**bearer(tenant.token),
                                                               "Content-Type": "application/json"}).status_code == 200
    body = answer(world, "How many vacation days do employees get?").json_body
    assert body["model"] == MODEL and body["grounding"]["model_check"]["model"] == "team/cheap"
    assert body["grounding"]["per_sentence"][0]["decided_by"] == "model"
    check = [c for c in peer.calls if c["body"] and c["body"]["messages"][0]["content"].startswith("You check")]
    assert [c["body"]["model"] for c in check] == ["cheap"]
    with helpers.client() as c:
        use = {u["model"]: u for u in c.http.get("/v1/usage", headers=bearer(tenant.token)).json_body["items"]}
    assert use["team/cheap"]["input_tokens"] == 100 and use[MODEL]["input_tokens"] == 100
