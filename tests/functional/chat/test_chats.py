"""POST /v1/chats with the built-in extractive provider: grounded answers with verified citations,
permissions before ranking, masked values kept out, lineage, audit without text, usage, streaming,
continuing, listing, reading, deleting and idempotency."""
from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import audit
from chalicelib.groups import create_app
from chalicelib.knowledge import store
from chalicelib.llm.registry import EXTRACTIVE_ID
from tests.functional.chat import helpers
from tests.functional.chat.helpers import MASKED_EMAIL, SECRET_TEXT, ask, post
from tests.functional.conftest import Tenant, bearer


@pytest.fixture
def world(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    helpers.use_providers(monkeypatch, None)
    return helpers.build(tenant)


def _stored_chunk(region: str, ws: str, cit: dict[str, Any]) -> Any:
    return store.chunk_text(region, ws, cit["source"]["dataset_id"], cit["chunk_id"])


def test_grounded_answer_cites_verbatim_quotes(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask("How many vacation days do employees get per year?"))
    assert r.status_code == 201, r.body
    body = r.json_body
    assert body["model"] == EXTRACTIVE_ID
    assert body["provider"] == "builtin"
    assert body["kind"] == "extractive"
    assert body["region"] == "us-east-1"
    assert body["routing"]["chosen"] == EXTRACTIVE_ID
    assert body["routing"]["reason"]
    assert body["message"]["role"] == "assistant"
    assert "not generated" in body["message"]["content"]
    assert body["usage"]["input_tokens"] > 0
    assert body["usage"]["output_tokens"] > 0
    assert body["citations"], body
    for cit in body["citations"]:
        chunk = _stored_chunk(tenant.region, tenant.workspace_id, cit)
        assert chunk is not None
        s, e = cit["chunk_span"]["start"], cit["chunk_span"]["end"]
        assert chunk.text[s:e] == cit["quote"]  # verbatim at its span in the stored chunk
        assert cit["span"] == {"start": chunk.start + s, "end": chunk.start + e}
        assert cit["source"]["kind"] == "dataset"
        assert cit["version"]
        assert cit["title"]
        assert f"[{cit['ref']}]" in body["message"]["content"]
    assert "thirty vacation days" in body["message"]["content"]
    assert body["grounding"]["ratio"] == 1.0


def test_member_gets_nothing_from_an_unreadable_dataset(tenant: Tenant, world: helpers.World) -> None:
    question = "What did the board decide about vacation days per year for every employee?"
    with helpers.client() as c:
        member = post(c, "/v1/chats", world.member.token, ask(question))
        admin = post(c, "/v1/chats", tenant.token, ask(question))
    assert member.status_code == 201
    assert admin.status_code == 201
    assert all(cit["source"]["dataset_id"] != world.board for cit in member.json_body["citations"])
    assert "board decided" not in member.body.decode()
    # the same question from an Admin (who may read it) does reach it: it is the best match
    assert any(cit["source"]["dataset_id"] == world.board for cit in admin.json_body["citations"])
    assert SECRET_TEXT.split(".")[0] in admin.json_body["message"]["content"]


def test_masked_value_never_in_answer_citation_stream_or_index(tenant: Tenant, world: helpers.World) -> None:
    question = f"What is the e-mail of Zelda Quark? Is it {MASKED_EMAIL[:5]}?"
    with helpers.client() as c:
        plain = post(c, "/v1/chats", tenant.token, ask(question))
        streamed = post(c, "/v1/chats", tenant.token, ask(question, stream=True))
        city = post(c, "/v1/chats", tenant.token, ask("Which city does Zelda Quark live in?"))
    assert plain.status_code == 201
    assert streamed.status_code == 201
    assert plain.json_body["notice"]["code"] == "not_in_sources"  # the e-mail is masked: no source holds it
    assert any("Zelda Quark" in cit["quote"] for cit in city.json_body["citations"])  # her row is quoted
    for body in (plain.body, streamed.body, city.body):
        assert MASKED_EMAIL.encode() not in body
    # nothing but the dataset's own synced Parquet (the data bucket) holds the clear value: not the index
    # files, the chats, the idempotency records, the audit trail or the lineage
    assert MASKED_EMAIL.encode() not in helpers.region_text(tenant.region, skip_buckets=("data",))


def test_stream_events_carry_sequence_numbers(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask("What does every employee receive on the first day?",
                                                         stream=True))
    assert r.status_code == 201
    assert r.headers["Content-Type"].startswith("text/event-stream")
    events = []
    for block in r.body.decode().strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"]), int(lines["id"])))
    kinds = [e[0] for e in events]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["citations", "message_stop"]
    assert set(kinds[1:-2]) == {"content_delta"}
    assert [e[1]["sequence"] for e in events] == list(range(1, len(events) + 1)) == [e[2] for e in events]
    text = "".join(e[1]["text"] for e in events if e[0] == "content_delta")
    assert "laptop and a monitor" in text
    assert events[-2][1]["citations"]
    assert events[-1][1]["usage"]["output_tokens"] > 0
    chat_id = events[0][1]["chat_id"]
    with helpers.client() as c:
        stored = c.http.get(f"/v1/chats/{chat_id}", headers=bearer(world.member.token)).json_body
    # deltas are the model's text as written; the citations event carries the verified answer, as stored
    assert '[1: "' in text and events[-2][1]["content"] == stored["messages"][-1]["content"] != text


def test_lineage_audit_and_usage(tenant: Tenant, world: helpers.World) -> None:
    question = "How is travel booked?"
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask(question), headers={"X-Correlation-Id": "corr-chat-1"})
        assert r.status_code == 201
        answer_id = r.json_body["id"]
        with Client(create_app("gateway")) as g:
            lin = g.http.get(f"/v1/lineage/{world.handbook}", headers=bearer(world.member.token)).json_body
        assert any(n["id"] == answer_id and n["type"] == "CHAT_ANSWER" for n in lin["nodes"])
        events = [e for e in audit.model(tenant.region).query(tenant.workspace_id) if e.action == "chat.answered"]
        assert len(events) == 1
        ev = events[0]
        assert ev.correlation_id == "corr-chat-1"
        details = json.loads(ev.details)
        assert details["model"] == EXTRACTIVE_ID
        assert details["sources"]
        assert question not in ev.details
        assert "travel desk" not in ev.details  # never message text
        assert r.json_body["message"]["content"] not in ev.details
        use = c.http.get("/v1/usage", headers=bearer(tenant.token))
        assert use.status_code == 200
        item = use.json_body["items"][0]
        assert item["model"] == EXTRACTIVE_ID
        assert item["requests"] == 1
        assert item["input_tokens"] == r.json_body["usage"]["input_tokens"]
        assert c.http.get("/v1/usage", headers=bearer(world.member.token)).status_code == 403
        for bad in ("to=", "from=20261101", "from=2026-W01-1"):  # RFC 3339 full-dates only, as documented
            assert c.http.get(f"/v1/usage?{bad}", headers=bearer(tenant.token)).status_code == 400, bad


def test_continue_list_read_delete_and_isolation(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        first = post(c, "/v1/chats", world.member.token, ask("How is travel booked?")).json_body
        chat_id = first["chat_id"]
        more = post(c, f"/v1/chats/{chat_id}/messages", world.member.token, ask("And which class is the default?"))
        assert more.status_code == 200
        assert more.json_body["chat_id"] == chat_id
        assert "Economy class" in more.json_body["message"]["content"]
        for _ in range(2):
            post(c, "/v1/chats", world.member.token, ask("What about equipment?"))
        page1 = c.http.get("/v1/chats?limit=2", headers=bearer(world.member.token)).json_body
        assert len(page1["items"]) == 2
        assert page1["has_more"]
        page2 = c.http.get(f"/v1/chats?limit=2&after={page1['next_cursor']}",
                           headers=bearer(world.member.token)).json_body
        ids = [i["id"] for i in page1["items"] + page2["items"]]
        assert len(ids) == 3 == len(set(ids))
        assert not page2["has_more"]
        read = c.http.get(f"/v1/chats/{chat_id}", headers=bearer(world.member.token)).json_body
        assert [m["role"] for m in read["messages"]] == ["user", "assistant", "user", "assistant"]
        # another user of the same workspace (even an Admin) cannot read, continue or delete it
        assert c.http.get(f"/v1/chats/{chat_id}", headers=bearer(tenant.token)).status_code == 404
        assert post(c, f"/v1/chats/{chat_id}/messages", tenant.token, ask("x")).status_code == 404
        assert c.http.delete(f"/v1/chats/{chat_id}", headers=bearer(tenant.token)).status_code == 404
        assert c.http.get("/v1/chats", headers=bearer(world.viewer.token)).status_code == 403
        assert c.http.delete(f"/v1/chats/{chat_id}", headers=bearer(world.member.token)).status_code == 204
        assert c.http.get(f"/v1/chats/{chat_id}", headers=bearer(world.member.token)).status_code == 404


def test_idempotency_key_replays_and_refuses_another_body(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        a = post(c, "/v1/chats", world.member.token, ask("How is travel booked?"), headers={"Idempotency-Key": "k1"})
        b = post(c, "/v1/chats", world.member.token, ask("How is travel booked?"), headers={"Idempotency-Key": "k1"})
        other = post(c, "/v1/chats", world.member.token, ask("Something else?"), headers={"Idempotency-Key": "k1"})
        assert a.status_code == b.status_code == 201
        assert a.json_body == b.json_body
        assert other.status_code == 409
        assert other.json_body["code"] == "idempotency_key_reused"
        assert len(c.http.get("/v1/chats", headers=bearer(world.member.token)).json_body["items"]) == 1


def test_chat_lineage_lives_as_long_as_the_chat(tenant: Tenant, world: helpers.World) -> None:
    """An answer's lineage edges carry the chat's expiry (its retention) and go when the chat is deleted."""
    from chalicelib.core import tenancy
    from chalicelib.gateway import models as gw_models

    tenancy.get_workspace(tenant.workspace_id).update(
        actions=[tenancy.WorkspaceAttrs.settings.set(json.dumps({"chat_auto_expiry": "P7D"}))])
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask("How is travel booked?"))
        assert r.status_code == 201
        answer_id, chat_id = r.json_body["id"], r.json_body["chat_id"]
        chat = c.http.get(f"/v1/chats/{chat_id}", headers=bearer(world.member.token)).json_body
        edges = [e for e in gw_models.lineage_edges(tenant.region).query(tenant.workspace_id)
                 if e.target_id == answer_id]
        assert edges
        assert {clock_iso(e.expires_at) for e in edges} == {chat["expires_at"]}
        assert c.http.delete(f"/v1/chats/{chat_id}", headers=bearer(world.member.token)).status_code == 204
    assert [e for e in gw_models.lineage_edges(tenant.region).query(tenant.workspace_id)
            if e.target_id == answer_id] == []


def clock_iso(ts: int) -> str:
    from chalicelib.core import clock

    return clock.iso(ts)
