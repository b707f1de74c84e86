"""Answers that appear as the model writes them, a Stop that stops the model, and a reload that resumes
the answer, through `make run`'s own stack (the local servers, the web app's forwarder) in Debian's
Chromium; and the same answers behind API Gateway's proxy semantics (``infra/local/apigw_proxy.py``: whole
buffered bodies, an integration timeout, here 2 s), where a model slower than the timeout still answers.

The model is a scripted OpenAI-compatible peer (``tests/functional/models/scripted_peer.py``) that writes
its first pieces and then waits at a gate the test opens: "the first words are on the page while the
answer is not complete" is a state the test holds, not a race against a clock. After the gate the peer
writes one piece every 50 ms, as a model still generating, and records whether its client left first.
"""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from infra.local.apigw_proxy import ApiGatewayProxy
from tests.functional.models import scripted_peer
from tests.integration.conftest import RunningPlatform, start_platform, stop_platform
from tests.integration.webapp.browser import AXE, CHROMIUM, check_page, csp_watch, ready, sign_in_at

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif((not os.path.exists(CHROMIUM) or not AXE.exists()) and not os.environ.get("CI"),
                                 reason="run `make system-deps` (Debian chromium, npm axe-core)")]
ANSWER = "Orders ship within two days of payment. " * 40
PIECES = len(range(0, len(ANSWER), 11))
# the three pieces written before the gate, to their last whole word: a word is sent once it ends, so no
# delta carries a link before it was checked (docs/api/chat.md)
FIRST = ANSWER[:ANSWER.rindex(" ", 0, 33) + 1]


@pytest.fixture(scope="module")
def peer() -> Iterator[scripted_peer.ScriptedPeer]:
    p = scripted_peer.start(answer=ANSWER, gate=threading.Event(), gate_after=3, pace=0.03)
    yield p
    p.gate.set()  # type: ignore[union-attr]
    p.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, peer: scripted_peer.ScriptedPeer) -> Iterator[RunningPlatform]:
    providers = {"preference": ["team/small"], "providers": [
        {"id": "team", "kind": "openai",
         "endpoints": {r: {"base_url": peer.url} for r in ("us-east-1", "eu-central-1")},
         "models": [{"id": "small", "name": "Scripted model", "context_tokens": 16000, "streaming": True}]}]}
    running = start_platform(tmp_path_factory.mktemp("streaming"), {"MODEL_PROVIDERS": json.dumps(providers)})
    try:
        yield running
    finally:
        stop_platform(running)


@pytest.fixture
def held(peer: scripted_peer.ScriptedPeer) -> Iterator[scripted_peer.ScriptedPeer]:
    """The peer, reset: the next answer stops at the gate after its first pieces."""
    peer.gate, peer.ended, peer.broken, peer.pieces_sent = threading.Event(), threading.Event(), False, 0
    yield peer
    peer.gate.set()


@pytest.fixture(scope="module")
def page(stack: RunningPlatform, browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.refused = csp_watch(p)
    sign_in_at(p, stack.urls, stack.demo, "/chat")
    yield p
    assert p.refused == [], p.refused
    context.close()


def _events(resp: requests.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    event = ""
    for line in resp.iter_lines(decode_unicode=True):
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            yield event, json.loads(line[6:])


def test_the_api_sends_each_piece_as_the_model_writes_it(stack: RunningPlatform,
                                                          held: scripted_peer.ScriptedPeer) -> None:
    resp = requests.post(stack.urls["platform"] + "/chats", stream=True, timeout=60,
                         headers={"Authorization": f"Bearer {stack.demo['api_token']}"},
                         json={"model": "auto", "stream": True,
                               "messages": [{"role": "user", "content": "How fast do orders ship?"}]})
    assert resp.status_code == 201 and resp.headers["Content-Type"].startswith("text/event-stream")
    events = _events(resp)
    seen = [next(events)]
    while "".join(d["text"] for _, d in seen[1:]) != FIRST:  # the pieces stored together in one event or more
        seen.append(next(events))
    assert seen[0][0] == "message_start" and {e for e, _ in seen[1:]} == {"content_delta"}
    assert not held.ended.is_set()  # three pieces read; the model has not finished
    held.gate.set()  # type: ignore[union-attr]
    rest = list(events)
    assert [e for e, _ in rest][-2:] == ["citations", "message_stop"]
    assert FIRST + "".join(d["text"] for e, d in rest if e == "content_delta") == ANSWER
    assert held.ended.is_set() and not held.broken


def test_the_page_shows_the_first_words_before_the_answer_is_complete(
        stack: RunningPlatform, page: Any, held: scripted_peer.ScriptedPeer) -> None:
    page.fill("#prompt", "How fast do orders ship?")
    page.click("#send")
    page.wait_for_function("(first) => (document.querySelector('#messages li.assistant.streaming .streaming-text')"
                           " || {}).textContent === first", arg=FIRST)
    assert not held.ended.is_set() and page.is_visible("#stop")  # on the page, the model still writing
    held.gate.set()  # type: ignore[union-attr]
    page.wait_for_selector("#messages li.assistant:not(.streaming) .answer", timeout=60000)
    page.wait_for_selector("#send:enabled")
    assert held.ended.is_set() and not held.broken
    assert page.locator(".stopped-mark").count() == 0
    check_page(page)


def test_stop_ends_the_generation_and_keeps_the_partial_answer_marked_stopped(
        stack: RunningPlatform, page: Any, held: scripted_peer.ScriptedPeer) -> None:
    page.goto(stack.urls["app"] + "/chat")
    ready(page)
    page.fill("#prompt", "How fast do orders ship, exactly?")
    page.click("#send")
    page.wait_for_function("(first) => (document.querySelector('#messages li.assistant.streaming .streaming-text')"
                           " || {}).textContent === first", arg=FIRST)
    page.click("#stop")
    page.wait_for_selector("#stopped")
    held.gate.set()  # type: ignore[union-attr]  the model goes on writing, until the server closes its stream
    assert held.ended.wait(60)
    assert held.broken and held.pieces_sent < PIECES  # the server stopped the model before its end
    page.wait_for_selector("#messages li.assistant .stopped-mark", timeout=30000)
    chat_id = page.url.rsplit("/", 1)[1]
    stored = page.evaluate("async (id) => (await fetch(`/api/platform/v1/chats/${id}`, "
                           "{headers: {'X-Requested-With': 'app'}})).json()", chat_id)
    answer = stored["messages"][-1]
    assert answer["role"] == "assistant" and answer["stopped"] is True
    assert answer["content"].startswith(FIRST.strip()[:20]) and len(answer["content"]) < len(ANSWER.strip())
    assert 0 < answer["usage"]["output_tokens"] < len(ANSWER.split())
    check_page(page)


def test_reload_mid_answer_resumes_it(stack: RunningPlatform, page: Any, held: scripted_peer.ScriptedPeer) -> None:
    page.goto(stack.urls["app"] + "/chat")
    ready(page)
    page.fill("#prompt", "How fast do orders ship, once more?")
    page.click("#send")
    page.wait_for_function("(first) => (document.querySelector('#messages li.assistant.streaming .streaming-text')"
                           " || {}).textContent === first", arg=FIRST)
    assert "/chat/chat_" in page.url
    page.reload()  # the answer goes on on the server; the page reads it again from its first event
    page.wait_for_function("(first) => (document.querySelector('#messages li.assistant.streaming .streaming-text')"
                           " || {}).textContent === first", arg=FIRST)
    assert not held.ended.is_set()
    held.gate.set()  # type: ignore[union-attr]
    page.wait_for_selector("#messages li.assistant:not(.streaming) .answer", timeout=60000)
    assert held.ended.is_set() and not held.broken
    assert page.locator("#messages li.assistant").count() == 1
    check_page(page)


@pytest.fixture(scope="module")
def gateway(stack: RunningPlatform) -> Iterator[str]:
    """The platform API behind API Gateway's proxy semantics, with a 2 s integration timeout."""
    port = int(stack.urls["platform"].split(":")[2].split("/")[0])
    proxy = ApiGatewayProxy("127.0.0.1", 0, port, timeout=2).start()
    yield f"http://127.0.0.1:{proxy.port}/v1"
    proxy.stop()


def _blocks(body: str) -> list[tuple[int, str, dict[str, Any]]]:
    out = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return out


def test_behind_the_gateway_a_model_slower_than_its_timeout_still_answers(
        stack: RunningPlatform, gateway: str, held: scripted_peer.ScriptedPeer) -> None:
    auth = {"Authorization": f"Bearer {stack.demo['api_token']}"}
    asked = requests.post(gateway + "/chats", headers=auth, timeout=30,
                          json={"model": "auto", "stream": True,
                                "messages": [{"role": "user", "content": "How fast do orders ship, behind a gateway?"}]})
    assert asked.status_code == 504 and asked.json() == {"message": "Endpoint request timed out"}  # the gateway's
    chat = requests.get(gateway + "/chats", headers=auth, timeout=10).json()["items"][0]
    answering = requests.get(f"{gateway}/chats/{chat['id']}", headers=auth, timeout=10).json()["answering"]
    assert "Content-Length" in requests.get(f"{gateway}/chats/{chat['id']}", headers=auth, timeout=10).headers
    seen: list[tuple[int, str, dict[str, Any]]] = []
    held.gate.set()  # type: ignore[union-attr]  the rest of the answer takes ~4.5 s: longer than the timeout
    for _ in range(200):
        r = requests.get(gateway + answering["events"].removeprefix("/v1"), params={"wait": 1}, timeout=10,
                         headers={**auth, **({"Last-Event-ID": str(seen[-1][0])} if seen else {})})
        assert r.status_code == 200 and "retry: " in r.text  # every response well inside the gateway's timeout
        seen += _blocks(r.text)
        if seen and seen[-1][1] == "message_stop":
            break
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1))  # resumed each time, nothing twice
    assert "".join(d["text"] for _, e, d in seen if e == "content_delta") == ANSWER
    assert held.ended.is_set() and not held.broken
    stored = requests.get(f"{gateway}/chats/{chat['id']}", headers=auth, timeout=10).json()
    assert "answering" not in stored and stored["messages"][-1]["content"] == seen[-2][2]["content"]
