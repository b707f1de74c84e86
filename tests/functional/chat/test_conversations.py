"""Conversation features on the caller's own chats: rename, server-side search, thumbs up/down stored on
the answer, regenerate, edit and resend; another user's chat is 404 for each, bad input changes nothing,
and a failed regenerate leaves the chat as it was."""
from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.chat import service
from chalicelib.chat.models import chats
from chalicelib.core import audit
from chalicelib.llm.providers.openai_http import ProviderError
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, bearer


@pytest.fixture
def world(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    helpers.use_providers(monkeypatch, None)
    return helpers.build(tenant)


def _call(c: Any, method: str, path: str, token: str, body: Any = None) -> Any:
    headers = {**bearer(token), "Content-Type": "application/json"}
    kwargs: dict[str, Any] = {"headers": headers}
    if body is not None:
        kwargs["body"] = json.dumps(body)
    return getattr(c.http, method.lower())(path, **kwargs)


def _chat(c: Any, token: str, question: str) -> dict[str, Any]:
    r = post(c, "/v1/chats", token, ask(question))
    assert r.status_code == 201, r.body
    return r.json_body


def _stored(tenant: Tenant, chat_id: str) -> list[dict[str, Any]]:
    return json.loads(chats(tenant.region).get(tenant.workspace_id, chat_id).messages)


def test_rename_and_search_own_chats_only(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        travel = _chat(c, world.member.token, "How is travel booked?")
        laptop = _chat(c, world.member.token, "What equipment do employees receive?")
        theirs = _chat(c, tenant.token, "How is travel booked for admins?")
        r = _call(c, "PATCH", f"/v1/chats/{travel['chat_id']}", world.member.token, {"title": "  Trip   planning "})
        assert r.status_code == 200, r.body
        assert r.json_body["title"] == "Trip planning"
        r = _call(c, "GET", "/v1/chats?q=trip+PLANNING", world.member.token)
        assert r.status_code == 200, r.body
        assert [(i["id"], i["match"]) for i in r.json_body["items"]] == [(travel["chat_id"], "title")]
        r = _call(c, "GET", "/v1/chats?q=laptop", world.member.token)  # in the answer's text, not the title
        assert [i["id"] for i in r.json_body["items"]] == [laptop["chat_id"]]
        assert r.json_body["items"][0]["match"] == "message"
        assert "laptop" in r.json_body["items"][0]["snippet"].lower()
        r = _call(c, "GET", "/v1/chats?q=admins", world.member.token)  # another user's chat is never found
        assert r.json_body["items"] == []
        assert _call(c, "GET", "/v1/chats?q=admins", tenant.token).json_body["items"][0]["id"] == theirs["chat_id"]
        # another user's chat cannot be renamed; bad titles and queries are refused
        assert _call(c, "PATCH", f"/v1/chats/{theirs['chat_id']}", world.member.token, {"title": "x"}).status_code == 404
        for bad in ({"title": ""}, {"title": "a" * 121}, {"title": "tab\u202eevil"}, {"title": 5}, {"name": "x"}):
            r = _call(c, "PATCH", f"/v1/chats/{travel['chat_id']}", world.member.token, bad)
            assert r.status_code == 400, (bad, r.body)
        assert _call(c, "GET", "/v1/chats?q=", world.member.token).status_code == 400
        assert _call(c, "GET", "/v1/chats?q=x&after=y", world.member.token).status_code == 400
    assert chats(tenant.region).get(tenant.workspace_id, travel["chat_id"]).title == "Trip planning"
    assert chats(tenant.region).get(tenant.workspace_id, theirs["chat_id"]).title.startswith("How is travel")
    actions = [e.action for e in audit.model(tenant.region).query(tenant.workspace_id)]
    assert actions.count("chat.renamed") == 1


def test_feedback_stored_on_the_answer(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        reply = _chat(c, world.member.token, "How is travel booked?")
        chat_id, msg = reply["chat_id"], reply["id"]
        path = f"/v1/chats/{chat_id}/messages/{msg}/feedback"
        r = _call(c, "PUT", path, world.member.token, {"rating": "down", "comment": "Too short"})
        assert r.status_code == 200, r.body
        answer = [m for m in _stored(tenant, chat_id) if m["id"] == msg][0]
        assert answer["feedback"]["rating"] == "down" and answer["feedback"]["comment"] == "Too short"
        assert _call(c, "GET", f"/v1/chats/{chat_id}", world.member.token).json_body["messages"][-1]["feedback"]["rating"] == "down"
        assert _call(c, "PUT", path, world.member.token, {"rating": "up"}).status_code == 200
        assert [m for m in _stored(tenant, chat_id) if m["id"] == msg][0]["feedback"]["rating"] == "up"
        assert _call(c, "PUT", path, world.member.token, {"rating": None}).status_code == 200
        assert "feedback" not in [m for m in _stored(tenant, chat_id) if m["id"] == msg][0]
        question = _stored(tenant, chat_id)[0]["id"]
        assert _call(c, "PUT", f"/v1/chats/{chat_id}/messages/{question}/feedback", world.member.token,
                     {"rating": "up"}).status_code == 409
        for bad in ({"rating": "meh"}, {}, {"rating": "up", "comment": "x" * 1001}, {"rating": "up", "x": 1}):
            assert _call(c, "PUT", path, world.member.token, bad).status_code == 400, bad
        assert _call(c, "PUT", path, tenant.token, {"rating": "up"}).status_code == 404  # not the admin's chat
        assert _call(c, "PUT", f"/v1/chats/{chat_id}/messages/msg_nope/feedback", world.member.token,
                     {"rating": "up"}).status_code == 404
    events = [e for e in audit.model(tenant.region).query(tenant.workspace_id) if e.action == "chat.feedback"]
    assert len(events) == 3
    assert all("Too short" not in (e.details or "") for e in events)  # the comment is chat content


def test_regenerate_replaces_the_last_answer(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        first = _chat(c, world.member.token, "How is travel booked?")
        second = post(c, f"/v1/chats/{first['chat_id']}/messages", world.member.token, ask("What equipment do employees receive?")).json_body
        before = _stored(tenant, first["chat_id"])
        r = post(c, f"/v1/chats/{first['chat_id']}/regenerate", world.member.token, {"model": "auto"})
        assert r.status_code == 200, r.body
        after = _stored(tenant, first["chat_id"])
        assert len(after) == len(before) == 4
        assert after[:2] == before[:2]  # the question is asked again (stored anew), the earlier turn kept
        assert after[3]["id"] == r.json_body["id"] != second["id"]
        assert after[2]["content"] == "What equipment do employees receive?"
        streamed = post(c, f"/v1/chats/{first['chat_id']}/regenerate", world.member.token, {"model": "auto", "stream": True})
        assert streamed.status_code == 200
        assert streamed.headers["Content-Type"].startswith("text/event-stream")
        assert len(_stored(tenant, first["chat_id"])) == 4
        assert post(c, f"/v1/chats/{first['chat_id']}/regenerate", tenant.token, {"model": "auto"}).status_code == 404
        assert post(c, f"/v1/chats/{first['chat_id']}/regenerate", world.member.token, {"model": "auto", "x": 1}).status_code == 400


def test_failed_regenerate_keeps_the_chat(tenant: Tenant, world: helpers.World, monkeypatch: pytest.MonkeyPatch) -> None:
    with helpers.client() as c:
        first = _chat(c, world.member.token, "How is travel booked?")
        before = _stored(tenant, first["chat_id"])

        def broken(*_a: Any, **_k: Any) -> Any:
            raise ProviderError("provider down")

        monkeypatch.setattr(service.models, "complete", broken)
        r = post(c, f"/v1/chats/{first['chat_id']}/regenerate", world.member.token, {"model": "auto"})
        assert r.status_code == 502, r.body
        assert _stored(tenant, first["chat_id"]) == before


def test_edit_and_resend_drops_what_followed(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        first = _chat(c, world.member.token, "How is travel booked?")
        post(c, f"/v1/chats/{first['chat_id']}/messages", world.member.token, ask("What equipment do employees receive?"))
        question = _stored(tenant, first["chat_id"])[0]
        path = f"/v1/chats/{first['chat_id']}/messages/{question['id']}/edit"
        r = post(c, path, world.member.token, {"model": "auto", "content": "How many vacation days do employees get?"})
        assert r.status_code == 200, r.body
        after = _stored(tenant, first["chat_id"])
        assert [m["role"] for m in after] == ["user", "assistant"]
        assert after[0]["content"] == "How many vacation days do employees get?"
        assert "thirty" in after[1]["content"].lower()
        answer_id = after[1]["id"]
        assert post(c, f"/v1/chats/{first['chat_id']}/messages/{answer_id}/edit", world.member.token,
                    {"model": "auto", "content": "x"}).status_code == 409
        assert post(c, f"/v1/chats/{first['chat_id']}/messages/{after[0]['id']}/edit", world.member.token,
                    {"model": "auto", "content": " "}).status_code == 400
        assert post(c, f"/v1/chats/{first['chat_id']}/messages/{after[0]['id']}/edit", tenant.token,
                    {"model": "auto", "content": "y"}).status_code == 404
        assert _stored(tenant, first["chat_id"]) == after
