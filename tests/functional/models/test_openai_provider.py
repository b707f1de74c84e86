"""An OpenAI-compatible provider configured as US-only, reached over real HTTP on loopback: the US
workspace's ``auto`` request uses it (plain and streamed); the EU workspace never sees it listed and
never calls it. Its key is stored as KMS ciphertext and never returned."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.llm import secrets
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.functional.models import openai_peer

MODEL = "us-llm/small"


@pytest.fixture
def peer() -> Iterator[openai_peer.Peer]:
    p = openai_peer.start()
    yield p
    p.stop()


@pytest.fixture
def configured(tenant: Tenant, peer: openai_peer.Peer, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    ciphertext = secrets.encrypt("us-east-1", "us-llm", openai_peer.KEY)
    helpers.use_providers(monkeypatch, {"preference": [MODEL, "builtin/extractive"], "providers": [
        {"id": "us-llm", "kind": "openai",
         "endpoints": {"us-east-1": {"base_url": peer.url, "api_key_ciphertext": ciphertext}},
         "models": [{"id": "small", "name": "Small", "context_tokens": 16000, "streaming": True}]}]})
    world = helpers.build(tenant)
    eu = make_tenant("eu-owner@example.com", residency="eu-central", name="Euro")
    helpers.build(eu)
    return {"world": world, "eu": eu, "ciphertext": ciphertext}


def answers(peer: openai_peer.Peer) -> list[dict[str, Any]]:
    """The calls asking for an answer, not for the grounding check of one."""
    return [c for c in peer.calls if not c["body"]["messages"][0]["content"].startswith("You check a statement")]


def test_us_workspace_auto_uses_the_endpoint(tenant: Tenant, peer: openai_peer.Peer, configured: dict[str, Any],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    world = configured["world"]
    with helpers.client() as c:
        listed = c.http.get("/v1/models", headers=bearer(world.member.token)).json_body
        r = post(c, "/v1/chats", world.member.token, ask("How many vacation days do employees get per year?"))
    assert [m["id"] for m in listed["items"]] == [MODEL, "builtin/extractive"]
    assert listed["items"][0]["provider_kind"] == "openai"
    assert listed["items"][0]["region"] == "us-east-1"
    assert r.status_code == 201, r.body
    body = r.json_body
    assert body["model"] == MODEL
    assert body["provider"] == "us-llm"
    assert body["kind"] == "generative"
    assert body["usage"] == {"input_tokens": 321, "output_tokens": 45}
    assert len(answers(peer)) == 1  # the answer (the grounding check asks the model too, below)
    assert body["grounding"]["model_check"]["model"] == MODEL
    call = peer.calls[0]
    assert call["path"] == "/v1/chat/completions"
    assert call["auth"] == f"Bearer {openai_peer.KEY}"
    assert call["body"]["model"] == "small"
    assert call["body"]["messages"][0]["role"] == "system"
    assert "thirty vacation days" in call["body"]["messages"][0]["content"]  # the retrieved passage went along
    # one verified marker citation; the forged passage [9] and the invented quote are dropped with their markers
    marked = [c for c in body["citations"] if not c.get("best_quote") and not c.get("attributed")]
    assert len(marked) == 1
    assert marked[0]["ref"] == 1
    assert marked[0]["verified"]
    assert "[9]" not in body["message"]["content"]
    g = body["grounding"]
    assert (g["sentences"], g["grounded_sentences"], g["ratio"], g["low"]) == (3, 1, 0.3333, True)
    assert [s["status"] for s in g["per_sentence"]] == ["supported", "unsupported", "unsupported"]
    # low grounding: the reply says so before the answer and shows the best quotes after it
    assert body["notice"]["code"] == "low_grounding"
    content = body["message"]["content"]
    first = g["per_sentence"][0]
    assert content[first["start"]:first["end"]].startswith("The handbook says so [1]")
    assert "Best matching quotes from your sources:" in content
    assert any(c.get("best_quote") and c["quote"] in content for c in body["citations"])
    out = capsys.readouterr()
    for text in (r.body.decode(), json.dumps(listed), out.out, out.err):
        assert openai_peer.KEY not in text
        assert configured["ciphertext"] not in text


def test_streaming_through_the_endpoint(tenant: Tenant, peer: openai_peer.Peer, configured: dict[str, Any]) -> None:
    world = configured["world"]
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask("How many vacation days do employees get?", stream=True))
    assert r.status_code == 201
    assert r.headers["Content-Type"].startswith("text/event-stream")
    assert len(answers(peer)) == 1
    assert peer.calls[0]["body"]["stream"] is True
    events = [json.loads(line[6:]) for line in r.body.decode().splitlines() if line.startswith("data: ")]
    assert events[0]["model"] == MODEL
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert len([c for c in events[-2]["citations"] if not c.get("best_quote")]) == 1
    assert events[-2]["notice"]["code"] == "low_grounding"
    assert events[-1]["usage"] == {"input_tokens": 321, "output_tokens": 45}


def test_eu_workspace_never_lists_or_calls_it(tenant: Tenant, peer: openai_peer.Peer,
                                              configured: dict[str, Any]) -> None:
    eu = configured["eu"]
    with helpers.client() as c:
        listed = c.http.get("/v1/models", headers=bearer(eu.token)).json_body
        auto = post(c, "/v1/chats", eu.token, ask("How many vacation days do employees get per year?"))
        streamed = post(c, "/v1/chats", eu.token, ask("How is travel booked?", stream=True))
        named = post(c, "/v1/chats", eu.token, ask("How is travel booked?", model=MODEL))
    assert [m["id"] for m in listed["items"]] == ["builtin/extractive"]
    assert MODEL not in json.dumps(listed)
    assert auto.status_code == 201
    assert auto.json_body["model"] == "builtin/extractive"
    assert auto.json_body["region"] == "eu-central-1"
    assert MODEL not in json.dumps(auto.json_body["routing"])  # not even named as excluded
    assert "without an endpoint in eu-central-1" in auto.json_body["routing"]["reason"]
    assert streamed.status_code == 201
    assert named.status_code == 422
    assert peer.calls == []
