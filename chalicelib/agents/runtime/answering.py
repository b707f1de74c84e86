"""How a run reaches its answer.

- **A tool-capable model** (the agent's ``model``, or under ``auto`` the first model of the registry
  with ``tool_use`` that routing allows for the starting user in the workspace's region) chooses the
  tool calls in a bounded loop: at most ``limits.max_steps`` calls and ``limits.max_tokens`` tokens. The
  provider interface (``chalicelib/llm/service.py``) carries text, so the loop speaks a JSON action
  protocol: each model turn is one object, ``{"tool": name, "input": {...}}`` or ``{"answer": text}``.
- **Otherwise** the declared plan runs in order and the built-in extractive provider writes the final
  answer from the step outputs (it quotes, it does not generate, and says so). Without a plan, an agent
  allowed ``knowledge_search`` whose input holds a ``question`` runs that one search.
Every step goes through the worker's ledger (``worker.StepRunner.run``).
"""
from __future__ import annotations

import json
import re
from typing import Any, Protocol

from chalicelib.agents.runtime.errors import StepFailed
from chalicelib.agents.tools import TOOLS
from chalicelib.core.http.errors import ApiError
from chalicelib.llm import routing, service
from chalicelib.llm.prompt import Passage, Prompt, claims, render
from chalicelib.llm.registry import EXTRACTIVE, Registry, registry
from chalicelib.llm.routing import Routing

MAX_RESULT_CHARS = 8000
MAX_PASSAGES = 40
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


class Steps(Protocol):
    def run(self, name: str, tool: str, raw_input: Any) -> Any: ...


class StateLike(Protocol):
    agent: dict[str, Any]
    run_input: dict[str, Any]
    steps_done: list[dict[str, Any]]
    usage: dict[str, int]
    ctx: Any


def declared_plan(agent: dict[str, Any], run_input: dict[str, Any]) -> list[dict[str, Any]] | None:
    if agent.get("plan"):
        return list(agent["plan"])
    if "knowledge_search" in agent["tools"] and isinstance(run_input.get("question"), str):
        return [{"name": "search", "tool": "knowledge_search", "input": {"query": "{{input.question}}"}}]
    return None


def tool_model(state: StateLike) -> Any | None:
    """The routing of a tool-capable model for this run, or None when there is none."""

    reg = registry()
    capable = Registry(tuple(m for m in reg.models if m.tool_use), reg.preference)
    if not capable.models:
        return None
    try:
        return routing.choose(state.ctx.principal, state.agent.get("model") or "auto", routing.Need(), reg=capable)
    except ApiError:
        return None


def run_agent(state: StateLike, steps: Steps) -> dict[str, Any]:
    """Run the agent and return ``{"output": {...}, "input_tokens", "output_tokens"}``."""

    chosen = tool_model(state)
    if chosen is not None:
        return model_loop(state, steps, chosen)
    plan = declared_plan(state.agent, state.run_input)
    if plan is None:
        raise StepFailed("no_plan", "The agent has no declared plan and no tool-capable model is available for it.")
    for step in plan:
        steps.run(step["name"], step["tool"], step.get("input", {}))
    return extractive_answer(state)


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
                    max_tokens=int(state.agent["limits"]["max_tokens"]))
    done = service.complete(Routing(EXTRACTIVE, state.ctx.region, "declared plan: the extractive provider answers"),
                            prompt)
    found, _ = claims(done.text)
    cites = [{"ref": c.ref, "step": origin.get(c.ref), "quote": c.quote} for c in found if c.ref in origin]
    return {"output": {"answer": render(done.text), "provider": "extractive", "model": EXTRACTIVE.id,
                       "note": "Extractive answer: quoted from the step outputs, not generated.",
                       "citations": cites},
            "input_tokens": done.input_tokens, "output_tokens": done.output_tokens}


def _tool_help(state: StateLike) -> str:

    lines = []
    for name in state.agent["tools"]:
        t = TOOLS[name]
        fields = ", ".join(f"{k}{'' if f.required else '?'}" for k, f in t.fields.items())
        lines.append(f"- {name}({fields}): {t.description}")
    return "\n".join(lines)


def parse_action(text: str) -> dict[str, Any] | None:
    """The model's JSON action, or None when its turn is not one."""
    m = _JSON_OBJECT.search(text or "")
    if not m:
        return None
    try:
        action = json.loads(m.group(0))
    except ValueError:
        return None
    if isinstance(action, dict) and isinstance(action.get("answer"), str):
        return {"answer": action["answer"]}
    if isinstance(action, dict) and isinstance(action.get("tool"), str) and isinstance(action.get("input", {}), dict):
        return {"tool": action["tool"], "input": action.get("input", {})}
    return None


def model_loop(state: StateLike, steps: Steps, chosen: Any) -> dict[str, Any]:
    """The tool-capable model chooses tool calls (see the module docstring)."""

    limits = state.agent["limits"]
    system = (f"{state.agent.get('instructions') or ''}\n\nYou can call these tools:\n{_tool_help(state)}\n\n"
              'Reply with exactly one JSON object per turn: {"tool": "<name>", "input": {...}} to call a tool, '
              'or {"answer": "<your final answer>"} when you are done.')
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": json.dumps(state.run_input, default=str)}]
    tokens_in = tokens_out = 0
    for turn in range(int(limits["max_steps"]) + 1):
        budget = int(limits["max_tokens"]) - tokens_in - tokens_out
        if budget <= 0:
            raise StepFailed("max_tokens_exceeded", f"The run used more than {limits['max_tokens']} tokens.")
        try:
            done = service.complete(chosen, Prompt(messages=list(messages), max_tokens=min(budget, 1024)))
        except Exception as err:  # noqa: BLE001 - a provider failure ends the run with its (safe) message
            raise StepFailed("model_error", str(err)[:300] or type(err).__name__) from None
        tokens_in += done.input_tokens
        tokens_out += done.output_tokens
        action = parse_action(done.text)
        if action is None:
            raise StepFailed("model_protocol", "The model's turn was not a tool call or an answer.")
        if "answer" in action:
            return {"output": {"answer": action["answer"], "provider": chosen.chosen.provider_kind,
                               "model": chosen.chosen.id, "routing": chosen.as_dict()},
                    "input_tokens": tokens_in, "output_tokens": tokens_out}
        if turn >= int(limits["max_steps"]):
            break
        try:
            result: Any = steps.run(f"call_{turn + 1}", action["tool"], action["input"])
        except StepFailed as failed:  # the model sees the tool's refusal and may try something else
            result = {"error": failed.error}
        messages += [{"role": "assistant", "content": done.text},
                     {"role": "user", "content": "Tool result: " + json.dumps(result, default=str)[:MAX_RESULT_CHARS]}]
    raise StepFailed("max_steps_exceeded", f"The model did not answer within {limits['max_steps']} tool calls.")
