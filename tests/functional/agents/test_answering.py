"""With a tool-capable model the model chooses the tool calls (bounded loop); the knowledge tool acts
under the starting user's ACL.

A deterministic model is needed to choose given calls, so the model is a scripted OpenAI-compatible HTTP
server on loopback (a test double of the model only; the real llama.cpp server runs in
tests/integration/models): it answers ``/v1/chat/completions`` with the next scripted turn as native
``tool_calls`` (``{"tool": name, "input": {...}}``, or ``{"raw": "<arguments text>"}`` for malformed
arguments) or as text (``{"answer": text}``), and records the requests it received. Everything else
(registry, routing, the OpenAI-compatible provider, the worker, the ledger, the tools) is the real code.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from chalicelib.core.config import settings
from chalicelib.gateway import demo
from chalicelib.gateway import models as gw_models
from chalicelib.gateway.catalog.service import invalidate
from chalicelib.llm.registry import registry
from tests.functional.agents.helpers import create_agent, deliver, get_run, member, platform_client, run_once, start_run
from tests.functional.conftest import Tenant


def message(turn: dict[str, Any]) -> dict[str, Any]:
    """One scripted turn as an OpenAI chat-completion message."""
    if "answer" in turn:
        return {"role": "assistant", "content": turn["answer"]}
    calls = turn["calls"] if "calls" in turn else [turn]
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}", "type": "function",
         "function": {"name": c["tool"], "arguments": c["raw"] if "raw" in c else json.dumps(c.get("input", {}))}}
        for n, c in enumerate(calls)]}


class ScriptedModel:
    def __init__(self, turns: list[dict[str, Any]]) -> None:
        self.turns = list(turns)
        self.requests: list[dict[str, Any]] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                script.requests.append(body)
                turn = script.turns.pop(0) if script.turns else {"answer": "out of script"}
                turn = turn(body) if callable(turn) else turn  # a turn may depend on what the model was sent
                out = json.dumps({"choices": [{"message": message(turn), "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 50, "completion_tokens": 10}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedModel]:
    scripted = ScriptedModel([])
    monkeypatch.setenv("MODEL_PROVIDERS", json.dumps({"providers": [{
        "id": "local", "kind": "openai", "endpoints": {"us-east-1": {"base_url": scripted.url}},
        "models": [{"id": "tool-model", "tool_use": True, "context_tokens": 32000}]}],
        "preference": ["local/tool-model"]}))
    settings.cache_clear()
    registry.cache_clear()
    yield scripted
    scripted.close()
    monkeypatch.delenv("MODEL_PROVIDERS")
    settings.cache_clear()
    registry.cache_clear()


@pytest.fixture
def seeded(tenant: Tenant) -> Tenant:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    return tenant


AGENT = {"name": "chooser", "instructions": "Use the tools to answer.", "model": "auto",
         "tools": ["catalog_search", "query", "knowledge_search"],
         "limits": {"max_steps": 4, "deadline": "PT5M", "max_tokens": 5000}}


def test_a_tool_capable_model_chooses_the_calls_in_a_bounded_loop(seeded: Tenant, model: ScriptedModel) -> None:
    model.turns = [{"tool": "catalog_search", "input": {"query": "orders"}},
                   {"tool": "shell", "input": {"cmd": "id"}},  # refused: not allowed, the model is told
                   {"tool": "query", "input": {"sql": "SELECT count(*) AS n FROM orders"}},
                   {"answer": "There are 72 orders."}]
    user = member(seeded.workspace_id)
    done = run_once(seeded.region, user.token, AGENT, {"question": "How many orders are there?"})
    assert done["status"] == "completed", done
    assert done["output"]["answer"] == "There are 72 orders."
    assert done["output"]["model"] == "local/tool-model"
    assert [(s["tool"], s["status"]) for s in done["steps"]] == [
        ("catalog_search", "completed"), ("shell", "failed"), ("query", "completed")]
    assert done["steps"][2]["output"]["rows"] == [[72]]
    assert done["usage"]["input_tokens"] == 200
    assert done["usage"]["output_tokens"] == 40
    # native tool calling: the allowed tools were offered with their schemas, nothing else
    first = model.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == AGENT["tools"]
    assert first["tools"][1]["function"]["parameters"]["required"] == ["sql"]
    # the model saw the tool results as tool messages marked as data, including the refusal
    last = model.requests[-1]["messages"]
    assert [m["role"] for m in last[-6:]] == ["assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert last[-5]["tool_call_id"] == "call_0" and last[-5]["content"].startswith("<<DATA ")
    assert "tool_not_allowed" in last[-3]["content"]
    assert "[[72]]" in last[-1]["content"].replace(" ", "")


def test_the_loop_is_bounded_by_max_steps(seeded: Tenant, model: ScriptedModel) -> None:
    model.turns = [{"tool": "catalog_search", "input": {}} for _ in range(10)]
    user = member(seeded.workspace_id)
    done = run_once(seeded.region, user.token, AGENT)
    assert done["status"] == "failed"
    assert done["error"]["code"] == "max_steps_exceeded"
    assert len(done["steps"]) == 4
    assert len(model.requests) == 5


def test_the_knowledge_tool_does_not_read_a_dataset_outside_the_users_acl(seeded: Tenant) -> None:
    cls = gw_models.datasets(seeded.region)
    for ds in cls.query(seeded.workspace_id):
        if ds.name == "customers":
            ds.update(actions=[gw_models.DatasetAttrs.acl.set(json.dumps([{"type": "role", "id": "admin"}]))])
    invalidate(seeded.workspace_id)
    user = member(seeded.workspace_id)
    body = {"name": "k", "tools": ["knowledge_search"],
            "plan": [{"name": "search", "tool": "knowledge_search", "input": {"query": "{{input.question}}", "limit": 10}}]}
    with platform_client() as c:
        agent = create_agent(c, user.token, body)
        mine = start_run(c, user.token, agent["id"], {"question": "Lisbon Berlin customer plan enterprise"})[1]
        admin = start_run(c, seeded.token, agent["id"], {"question": "Lisbon Berlin customer plan enterprise"})[1]
        deliver(seeded.region)
        denied = get_run(c, user.token, agent["id"], mine["id"])
        allowed = get_run(c, seeded.token, agent["id"], admin["id"])
    assert allowed["status"] == "completed"
    admin_sources = {p["citation"]["source"]["dataset_name"] for p in allowed["steps"][0]["output"]["passages"]}
    assert "customers" in admin_sources  # the data is there for someone allowed to read it
    member_sources = {p["citation"]["source"]["dataset_name"] for p in denied["steps"][0]["output"]["passages"]}
    assert "customers" not in member_sources
    assert "Lovelace" not in json.dumps(denied)
    assert "Lovelace" not in json.dumps(allowed)  # full_name stays masked
