"""How a run reaches its answer.

With a declared plan (and no tool-capable model for the agent), the plan's steps run in order and the
extractive provider writes the final answer from the step outputs. Without a plan, an agent allowed
``knowledge_search`` whose input holds a ``question`` runs that one search. Each step goes through the
worker's ledger (``worker.StepRunner.run``).
"""
from __future__ import annotations

import json
from typing import Any, Protocol


class Steps(Protocol):
    def run(self, name: str, tool: str, raw_input: Any) -> Any: ...


class StateLike(Protocol):
    agent: dict[str, Any]
    run_input: dict[str, Any]
    steps_done: list[dict[str, Any]]


def declared_plan(agent: dict[str, Any], run_input: dict[str, Any]) -> list[dict[str, Any]] | None:
    if agent.get("plan"):
        return list(agent["plan"])
    if "knowledge_search" in agent["tools"] and isinstance(run_input.get("question"), str):
        return [{"name": "search", "tool": "knowledge_search", "input": {"query": "{{input.question}}"}}]
    return None


def run_agent(state: StateLike, steps: Steps) -> dict[str, Any]:
    """Run the agent's steps and return ``{"output": {...}, "input_tokens", "output_tokens"}``."""
    from chalicelib.agents.worker import StepFailed

    plan = declared_plan(state.agent, state.run_input)
    if plan is None:
        raise StepFailed("no_plan", "The agent has no declared plan and no tool-capable model is available for it.")
    for step in plan:
        steps.run(step["name"], step["tool"], step.get("input", {}))
    return extractive_answer(state)


def _question(state: StateLike) -> str:
    q = state.run_input.get("question")
    return q if isinstance(q, str) else state.agent.get("instructions", "")


def _facts(output: Any) -> list[str]:
    """Sentences quoting a step's output as it was stored (after field policies)."""
    if not isinstance(output, dict):
        return [json.dumps(output, default=str)[:500]] if output is not None else []
    if "columns" in output and "rows" in output:
        names = [c["name"] for c in output["columns"]]
        return ["; ".join(f"{n}: {v}" for n, v in zip(names, row, strict=False)) for row in output["rows"][:20]]
    if "datasets" in output and isinstance(output["datasets"], list):
        return [f"dataset {d.get('name')}: {d.get('description', '')}" for d in output["datasets"][:10]]
    if "fields" in output:
        return [f"{output.get('name')} has fields " + ", ".join(f["name"] for f in output["fields"])]
    if "passages" in output:
        return [p.get("quote") or p.get("text", "") for p in output["passages"][:5]]
    if "memory" in output:
        return [f"{k}: {v}" for k, v in output["memory"].items()]
    return [json.dumps(output, default=str)[:500]]


def extractive_answer(state: StateLike) -> dict[str, Any]:
    facts = []
    for step in state.steps_done:
        for fact in _facts(step["output"]):
            facts.append({"step": step["name"], "text": fact})
    text = "\n".join(f["text"] for f in facts) if facts else "No information was found."
    return {"output": {"answer": text, "provider": "extractive", "model": "extractive",
                       "note": "Extractive answer: quoted from the step outputs, not generated.",
                       "question": _question(state), "sources": facts[:50]},
            "input_tokens": 0, "output_tokens": 0}
