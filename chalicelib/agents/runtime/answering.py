"""How a run reaches its answer.

- **A tool-capable model** (the agent's ``model``, or under ``auto`` the first model with ``tool_use``
  that routing allows for the starting user in the workspace's region, connections included) chooses
  the tool calls through the provider's native interface (OpenAI ``tools``/``tool_calls``, Bedrock
  Converse ``toolConfig``) in a bounded loop: ``tool_loop.py``, guarded by ``guard.py``.
- **Otherwise** the declared plan runs in order and the built-in extractive provider writes the final
  answer from the step outputs (it quotes, it does not generate, and says so). Without a plan, an agent
  allowed ``knowledge_search`` runs one search for its ``question`` (or, without one, for its
  instructions), so a new agent made from the form's defaults answers on its first run.
Every step goes through the worker's ledger (``worker.StepRunner.run``).
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.agents.runtime.errors import StepFailed
from chalicelib.agents.runtime.protocols import StateLike, Steps
from chalicelib.agents.runtime.tool_loop import model_loop
from chalicelib.core.http.errors import ApiError
from chalicelib.core.workspace_settings import answer_link_hosts
from chalicelib.knowledge import answer_links
from chalicelib.llm import routing, service
from chalicelib.llm.prompt import Passage, Prompt, claims, render
from chalicelib.llm.registry import EXTRACTIVE
from chalicelib.llm.routing import Routing

MAX_PASSAGES = 40


def declared_plan(agent: dict[str, Any], run_input: dict[str, Any]) -> list[dict[str, Any]] | None:
    if agent.get("plan"):
        return list(agent["plan"])
    if "knowledge_search" in agent["tools"]:
        question = run_input.get("question")
        if isinstance(question, str) and question.strip():
            return [{"name": "search", "tool": "knowledge_search", "input": {"query": "{{input.question}}"}}]
        fallback = (agent.get("instructions") or agent.get("name") or "").strip()[:1000]
        if fallback:
            return [{"name": "search", "tool": "knowledge_search", "input": {"query": fallback}}]
    return None


def tool_model(state: StateLike) -> Any | None:
    """The routing of a tool-capable model for this run, or None when there is none."""

    try:
        return routing.choose(state.ctx.scope, state.agent.get("model") or "auto", routing.Need(tool_use=True))
    except ApiError:
        return None


def run_agent(state: StateLike, steps: Steps) -> dict[str, Any]:
    """Run the agent and return ``{"output": {...}, "input_tokens", "output_tokens"}``."""

    chosen = tool_model(state)
    if chosen is not None:
        return checked_links(state, model_loop(state, steps, chosen))
    plan = declared_plan(state.agent, state.run_input)
    if plan is None:
        raise StepFailed("no_plan", "No tool-capable model is available to this agent, and it has no declared plan "
                                    "and no knowledge_search tool to fall back on: connect a model with tool use "
                                    "(Models page) or give it a plan.")
    for step in plan:
        steps.run(step["name"], step["tool"], step.get("input", {}))
    answer = extractive_answer(state)
    answer["output"]["note"] += " " + NO_TOOL_MODEL
    return checked_links(state, answer)


def checked_links(state: StateLike, answer: dict[str, Any]) -> dict[str, Any]:
    """The run's answer with its links and images checked (``knowledge/answer_links``): a URL is kept when
    it is the platform's own, on the workspace's allow-list or stands in a step's output."""
    text = answer["output"].get("answer")
    if isinstance(text, str):
        sources = [json.dumps(step["output"], default=str, ensure_ascii=False) for step in state.steps_done]
        sources += [t for step in state.steps_done for t in _passages(step["output"])]
        rules = answer_links.rules(answer_link_hosts(state.ctx.scope), sources)
        answer["output"]["answer"] = answer_links.sanitise(text, rules).text
    return answer


NO_TOOL_MODEL = ("No tool-capable model is connected for this agent, so it ran its declared plan (or one "
                 "knowledge search); an Admin can connect one on the Models page.")


def _question(state: StateLike) -> str:
    q = state.run_input.get("question")
    if isinstance(q, str) and q.strip():
        return q
    return state.agent.get("instructions") or state.agent.get("name", "")


def _passages(output: Any) -> list[str]:
    """Text the extractive provider may quote from one step's output (as stored: field policies applied)."""
    if not isinstance(output, dict):
        return [json.dumps(output, default=str)[:2000]] if output is not None else []
    if "columns" in output and "rows" in output:
        names = [c["name"] for c in output["columns"]]
        return [", ".join(f"{n} {v}" for n, v in zip(names, row, strict=False)) + "." for row in output["rows"][:50]]
    if "passages" in output:
        return [p.get("text", "") for p in output["passages"][:10]]
    if "datasets" in output and isinstance(output["datasets"], list):
        return [f"Dataset {d.get('name')}: {d.get('description', '')} Fields: {', '.join(d.get('fields', []))}."
                for d in output["datasets"][:10]]
    if "fields" in output:
        return [f"Dataset {output.get('name')} has the fields "
                + ", ".join(f"{f['name']} ({f['type']}, {f['policy']})" for f in output["fields"]) + "."]
    if "memory" in output:
        return [f"Remembered {k}: {json.dumps(v, default=str)}." for k, v in output["memory"].items()]
    return [json.dumps(output, default=str)[:2000]]


def extractive_answer(state: StateLike) -> dict[str, Any]:
    """The built-in extractive provider's answer over the step outputs, with its citations."""

    passages: list[Passage] = []
    origin: dict[int, str] = {}
    for step in state.steps_done:
        for text in _passages(step["output"]):
            if text and len(passages) < MAX_PASSAGES:
                passages.append(Passage(len(passages) + 1, f"step {step['name']}", text))
                origin[len(passages)] = step["name"]
    prompt = Prompt(messages=[{"role": "user", "content": _question(state)}], passages=passages,
                    max_tokens=int(state.agent["limits"]["max_tokens"]), may_decline=False)
    done = service.complete(Routing(EXTRACTIVE, state.ctx.region, "declared plan: the extractive provider answers"),
                            prompt)
    found, _ = claims(done.text)
    cites = [{"ref": c.ref, "step": origin.get(c.ref), "quote": c.quote} for c in found if c.ref in origin]
    return {"output": {"answer": render(done.text), "provider": "extractive", "model": EXTRACTIVE.id,
                       "note": "Extractive answer: quoted from the step outputs, not generated.",
                       "citations": cites},
            "input_tokens": done.input_tokens, "output_tokens": done.output_tokens}
