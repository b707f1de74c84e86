"""The labelled flows of the leak matrix: what agent runs *write* after reading the matrix datasets, and
what a reader sees of it before and after the reader loses access.

A second Member, the holder, is admitted by name to every restricted document of the matrix world
(``world.py``). As the holder, with agents the Admin created:

- a declared plan queries every matrix dataset and pipes each answer's rows into memory as they are
  (``plain``), recalling memory first;
- a scripted model queries every matrix dataset and writes copies of every marker it saw to memory:
  base64, reversed, and split into 3-character pieces (``FORMS``), so no copy holds the marker.

Each surface that returns what those runs wrote is read as the holder before and after the Admin narrows
every restricted document to Admins (``PHASES``): memory (REST), the runs (read with their steps, listed,
and the start replayed with its ``Idempotency-Key``), the holder's export of their own account and, after, the ``memory_read`` tool of a later run
of each agent (with what the model was sent). ``LABEL_SURFACES`` is the one list.
"""
from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.core.tenancy import scope_of
from chalicelib.gateway import reader
from chalicelib.groups import create_app
from chalicelib.llm.registry import registry
from tests.functional.agents.helpers import deliver
from tests.functional.agents.scripted_model import ScriptedModel
from tests.functional.platform.helpers import User, add_member, call
from tests.functional.reader.surfaces import own_export
from tests.functional.reader.world import POLICIES, World

FORMS = ("plain", "base64", "reversed", "split")
PHASES = ("before", "after")
MARKER = re.compile(r"zq[a-z0-9]+")


def form(value: str, name: str) -> str:
    """How a copy of ``value`` in form ``name`` shows in JSON text."""
    if name == "base64":
        return base64.b64encode(value.encode()).decode()
    if name == "reversed":
        return value[::-1]
    if name == "split":
        return json.dumps(pieces(value))[1:-1]
    return value


def pieces(value: str) -> list[str]:
    return [value[i:i + 3] for i in range(0, len(value), 3)]


@dataclass(frozen=True)
class LabelSurface:
    name: str
    phases: tuple[str, ...]
    shows_values: bool  # before the change, an ALLOW marker's copies must be in it (it was really read)


LABEL_SURFACES: list[LabelSurface] = [
    LabelSurface("memory_rest", PHASES, True),
    LabelSurface("run_read", PHASES, True),
    LabelSurface("run_list", PHASES, False),
    LabelSurface("own_export", PHASES, True),
    LabelSurface("start_replayed", ("after",), False),
    LabelSurface("memory_tool", ("after",), False),
]


@dataclass
class Flows:
    world: World
    holder: User
    agents: dict[str, str] = field(default_factory=dict)  # flow -> agent id
    runs: dict[str, str] = field(default_factory=dict)  # flow -> first run id
    seen: dict[tuple[str, str], str] = field(default_factory=dict)  # (surface, phase) -> what the holder got


@contextmanager
def scripted(turns: list[Any]) -> Iterator[ScriptedModel]:
    """The deployment's only tool-capable model is ``ScriptedModel(turns)`` while inside."""
    model = ScriptedModel(turns)
    old = os.environ.get("MODEL_PROVIDERS")
    os.environ["MODEL_PROVIDERS"] = json.dumps({"providers": [{
        "id": "local", "kind": "openai", "endpoints": {"us-east-1": {"base_url": model.url}},
        "models": [{"id": "tool-model", "tool_use": True, "context_tokens": 32000}]}],
        "preference": ["local/tool-model"]})
    settings.cache_clear()
    registry.cache_clear()
    try:
        yield model
    finally:
        model.close()
        if old is None:
            os.environ.pop("MODEL_PROVIDERS", None)
        else:
            os.environ["MODEL_PROVIDERS"] = old
        settings.cache_clear()
        registry.cache_clear()


def _ok(status: int, body: Any, what: str) -> None:
    assert 200 <= status < 300, f"{what}: {status} {body}"


def _agents(w: World) -> dict[str, dict[str, Any]]:
    limits = {"max_steps": 12, "deadline": "PT10M", "max_tokens": 40000}
    plan: list[dict[str, Any]] = [{"name": "recall", "tool": "memory_read", "input": {}}]
    for p in POLICIES:
        plan += [{"name": f"rows_{p.lower()}", "tool": "query", "input": {"sql": f"SELECT * FROM {w.name(p)}"}},
                 {"name": f"keep_{p.lower()}", "tool": "memory_write",
                  "input": {"key": f"rows_{p.lower()}", "value": f"{{{{steps.rows_{p.lower()}.output.rows}}}}"}}]
    tools = ["query", "memory_read", "memory_write"]
    return {"plan": {"name": "Matrix keeper", "instructions": "Keep the books.", "tools": tools, "plan": plan,
                     "limits": limits},
            "model": {"name": "Matrix copier", "instructions": "Copy the books.", "tools": tools, "limits": limits}}


def _copy_turns(w: World) -> list[Any]:
    """The scripted model: query every dataset in one turn, then write copies of every marker it saw."""
    queries = {"calls": [{"tool": "query", "input": {"sql": f"SELECT * FROM {w.name(p)}"}} for p in POLICIES]}

    def copy(body: dict[str, Any]) -> dict[str, Any]:
        seen = sorted({m for msg in body["messages"] if msg["role"] == "tool"
                       for m in MARKER.findall(str(msg["content"]))})
        assert seen, "the model saw no marker"
        value = {"b64": [form(m, "base64") for m in seen], "rev": [form(m, "reversed") for m in seen],
                 "split": [pieces(m) for m in seen]}
        return {"tool": "memory_write", "input": {"key": "copies", "value": value}}

    return [queries, copy, {"answer": "Copied."}]


def _start(c: Client, w: Flows, flow: str, key: str | None = None) -> tuple[int, Any, dict[str, str]]:
    headers = {"Idempotency-Key": key} if key else None
    return call(c, "POST", f"/v1/agents/{w.agents[flow]}/runs", w.holder.token, {"input": {}}, headers=headers)


def _run_flow(c: Client, w: Flows, flow: str, key: str | None = None) -> dict[str, Any]:
    status, run, _ = _start(c, w, flow, key)
    _ok(status, run, "start run")
    deliver(w.world.tenant.region)
    status, done, _ = call(c, "GET", f"/v1/agents/{w.agents[flow]}/runs/{run['id']}", w.holder.token)
    _ok(status, done, "get run")
    assert done["status"] == "completed", done
    w.runs.setdefault(flow, run["id"])
    return done


def _read(c: Client, w: Flows, phase: str) -> None:
    memory, runs, listed, replayed = [], [], [], []
    for flow, agent in w.agents.items():
        for path, out in ((f"/v1/agents/{agent}/memory", memory), (f"/v1/agents/{agent}/runs/{w.runs[flow]}", runs),
                          (f"/v1/agents/{agent}/runs", listed)):
            status, body, _ = call(c, "GET", path, w.holder.token)
            _ok(status, body, path)
            out.append(body)
        if phase == "after":
            status, body, headers = _start(c, w, flow, f"labelled-{flow}")
            assert (status, headers.get("Idempotent-Replayed")) == (202, "true"), body
            replayed.append(body)
    w.seen[("memory_rest", phase)] = json.dumps(memory)
    w.seen[("run_read", phase)] = json.dumps(runs)
    w.seen[("run_list", phase)] = json.dumps(listed)
    w.seen[("own_export", phase)] = own_export(w.world.tenant, w.holder)
    if phase == "after":
        w.seen[("start_replayed", phase)] = json.dumps(replayed)


def _narrow(w: World) -> None:
    for policy in POLICIES:
        reader.set_document_acl(scope_of(w.admin()), w.datasets[policy], w.documents[(policy, "restricted")],
                                [{"type": "role", "id": "admin"}])


def build(w: World) -> Flows:
    """Run both flows as the holder and read every surface before and after the narrowing (eagerly, in
    this order: a later run rewrites memory)."""
    holder = add_member(w.tenant.workspace_id, "matrix-holder@example.com", "member")
    for policy in POLICIES:
        reader.set_document_acl(scope_of(w.admin()), w.datasets[policy], w.documents[(policy, "restricted")],
                                [{"type": "role", "id": "admin"}, {"type": "user", "id": holder.user_id}])
    flows = Flows(w, holder)
    with Client(create_app("platform")) as c:
        for flow, body in _agents(w).items():
            status, created, _ = call(c, "POST", "/v1/agents", w.tenant.token, body)
            _ok(status, created, "create agent")
            flows.agents[flow] = created["id"]
        _run_flow(c, flows, "plan", "labelled-plan")
        with scripted(_copy_turns(w)):
            _run_flow(c, flows, "model", "labelled-model")
        _read(c, flows, "before")
        _narrow(w)
        _read(c, flows, "after")
        recalled: list[Any] = []
        with scripted([{"tool": "memory_read", "input": {}}, {"answer": "Recalled."}]) as model:
            later = _run_flow(c, flows, "model")
            recalled += [later["steps"][0], model.requests]
        later = _run_flow(c, flows, "plan")
        recalled.append(later["steps"][0])  # the recall, before this run reads anything
    flows.seen[("memory_tool", "after")] = json.dumps(recalled)
    return flows


def read(flows: Flows, surface: LabelSurface, phase: str) -> str:
    return flows.seen[(surface.name, phase)]

