"""A streamed answer whose reader goes away: the model's stream is closed (the model server sees its
client leave before the answer is written), the partial answer is stored marked stopped, and only what
was generated is billed. The model is a scripted OpenAI-compatible peer held at a gate, so "some pieces
written, the answer not complete" is a state of the test, not a race."""
from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from chalicelib.chat import service, usage
from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import scope_of
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask
from tests.functional.chat.test_grounding import configure
from tests.functional.conftest import Tenant
from tests.functional.models import scripted_peer

ANSWER = "Employees get thirty vacation days per year. " * 40  # 164 pieces of 11 characters


@pytest.fixture
def peer() -> Iterator[scripted_peer.ScriptedPeer]:
    p = scripted_peer.start(answer=ANSWER, gate=threading.Event(), gate_after=3, pace=0.01)
    yield p
    p.gate.set()  # type: ignore[union-attr]
    p.stop()


@pytest.fixture
def world(tenant: Tenant, peer: scripted_peer.ScriptedPeer, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    configure(monkeypatch, peer.url)
    return helpers.build(tenant)


def _principal(t: Tenant) -> Principal:
    return Principal(user_id=t.user_id, workspace_id=t.workspace_id, roles=("admin",), email=t.email,
                     amr=("pwd",), token_id="t")


def test_a_reader_that_leaves_stops_the_model_and_keeps_the_partial_answer(
        tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    p = _principal(tenant)
    live = service.start(scope_of(p), ask("How many vacation days?", stream=True))
    live.open_stream()
    events = live.events()
    seen = [next(events) for _ in range(4)]  # message_start and the three pieces before the gate
    assert [e["event"] for e in seen] == ["message_start"] + ["content_delta"] * 3
    shown = "".join(e["data"]["text"] for e in seen[1:])
    assert not peer.ended.is_set()  # the model is still writing

    live.close()  # what the server does when the reader's connection is gone
    peer.gate.set()  # type: ignore[union-attr]
    assert peer.ended.wait(30)
    assert peer.broken and peer.pieces_sent < len(range(0, len(ANSWER), 11))  # the model was stopped

    chat = service.get_chat(scope_of(p), seen[0]["data"]["chat_id"])
    stored = chat["messages"][-1]
    assert stored["id"] == seen[0]["data"]["id"] and stored["stopped"] is True
    assert stored["content"] == shown.strip() or stored["content"].startswith(shown.strip()[:20])
    assert len(stored["content"]) < len(ANSWER.strip())
    billed = usage.report(p, None, None)["totals"]
    assert 0 < billed["output_tokens"] == stored["usage"]["output_tokens"] < len(ANSWER.split())
    assert billed["requests"] == 1


def test_a_reader_that_leaves_before_the_first_event_stops_the_model_and_stores_nothing(
        tenant: Tenant, world: helpers.World, peer: scripted_peer.ScriptedPeer) -> None:
    p = _principal(tenant)
    live = service.start(scope_of(p), ask("How many vacation days?", stream=True))
    live.open_stream()
    live.events()  # handed to the server, never read: the reader left while the headers were sent
    live.close()
    peer.gate.set()  # type: ignore[union-attr]
    assert peer.ended.wait(30) and peer.broken
    assert service.list_chats(scope_of(p), {})["items"] == []
