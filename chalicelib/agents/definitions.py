"""Agent definitions: name, instructions, model (an id or ``auto``), allowed tools, an optional declared
plan, the datasets it may read and limits. Stored in the workspace's region; Members and Admins write,
everyone reads. A definition may be created from a preset (``preset_id``: its instructions are copied).

``datasets`` (at most ``MAX_DATASETS`` ids of the agent's workspace) limits what the agent's tools read:
absent or empty, every dataset the running user may read; otherwise only those of them the running user
may read (the run's principal carries them as its dataset scope, which the policy-enforcing reader
applies: ``gateway/reader.py``). Each id is canonicalised (``ds_`` + upper-case ULID, repeats dropped);
an id the definition did not hold yet must name a dataset of the workspace that the editing user may read
(one answer for unknown, unreadable and other workspaces' ids). Ids it already held are kept as they are
(a dataset deleted later is skipped at run time), so an edit by someone who cannot read one of them
neither fails nor drops it.

A declared plan is an ordered list of steps ``{name, tool, input}``; each step's tool must be allowed,
its input may only name the tool's fields, each of the field's type or one template (``plan_schema.py``:
the schema the OpenAPI document states), and its templates (``templates.py``) may only name the run's
``input`` or *earlier* steps. Limits: ``max_steps`` (1..50, default 10; a plan may not be longer),
``deadline`` (ISO 8601, PT1S..PT1H, default PT5M) and ``max_tokens`` (1..200000, default 4000).
"""
from __future__ import annotations

import json
import re
from typing import Any

from chalicelib.agents import models, plan_schema, templates
from chalicelib.agents.tools import TOOL_NAMES, TOOLS
from chalicelib.core import audit, clock, durations
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.http.validation import F, problem, validate
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway.catalog import service as catalog
from chalicelib.llm import presets
from chalicelib.llm import service as llm_service
from chalicelib.llm.registry import registry

MAX_PLAN_STEPS = 50
MAX_DATASETS = 50
DEFAULT_LIMITS = {"max_steps": 10, "deadline": "PT5M", "max_tokens": 4000}
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/\-]{0,127}$")


def _model(value: Any) -> str | None:
    return None if isinstance(value, str) and _MODEL.match(value) else "must be 'auto' or a model id"


LIMIT_FIELDS = {
    "max_steps": F(int, minimum=1, maximum=MAX_PLAN_STEPS),
    "deadline": F(str, max_len=16, check=durations.duration_check(1, 3600, "PT1S and PT1H")),
    "max_tokens": F(int, minimum=1, maximum=200_000),
}
FIELDS = {
    "name": F(str, required=True, min_len=1, max_len=100),
    "instructions": F(str, max_len=8000),
    "model": F(str, max_len=128, check=_model),
    "tools": F(list, required=True, min_len=1, max_len=len(TOOL_NAMES)),
    "plan": F(list, nullable=True, max_len=MAX_PLAN_STEPS),
    "datasets": F(list, max_len=MAX_DATASETS),
    "limits": F(dict),
}
PATCH_FIELDS = {k: F(v.type, min_len=v.min_len, max_len=v.max_len, check=v.check, nullable=v.nullable)
                for k, v in FIELDS.items()}
STEP_FIELDS = {"name": F(str, required=True), "tool": F(str, required=True), "input": F(dict)}


def _check_tools(tools: list[Any]) -> list[dict[str, str]]:
    errors = []
    for i, t in enumerate(tools):
        if not isinstance(t, str) or t not in TOOLS:
            errors.append({"field": f"tools[{i}]", "message": "must be one of " + ", ".join(TOOL_NAMES)})
    if len(set(map(str, tools))) != len(tools):
        errors.append({"field": "tools", "message": "must not repeat a tool"})
    return errors


def check_plan(plan: list[Any], tools: list[str], max_steps: int) -> list[dict[str, str]]:
    """Field errors of a declared plan (see the module docstring)."""
    errors: list[dict[str, str]] = []
    if len(plan) > max_steps:
        errors.append({"field": "plan", "message": f"has more steps than limits.max_steps ({max_steps})"})
    seen: list[str] = []
    for i, step in enumerate(plan):
        where = f"plan[{i}]"
        if not isinstance(step, dict):
            errors.append({"field": where, "message": "must be an object {name, tool, input}"})
            continue
        unknown = [k for k in step if k not in STEP_FIELDS]
        if unknown or not isinstance(step.get("name"), str) or not isinstance(step.get("tool"), str) \
                or not isinstance(step.get("input", {}), dict):
            errors.append({"field": where, "message": "must be an object {name, tool, input}"})
            continue
        name, tool, args = step["name"], step["tool"], step.get("input", {})
        if problem(plan_schema.STEP_NAME, name) or name in seen:
            errors.append({"field": f"{where}.name", "message": "must be a unique identifier (letters, digits, _)"})
        if tool not in TOOLS:
            errors.append({"field": f"{where}.tool", "message": "must be one of " + ", ".join(TOOL_NAMES)})
        elif tool not in tools:
            errors.append({"field": f"{where}.tool", "message": "is not among the agent's allowed tools"})
        else:
            errors += plan_schema.input_errors(tool, args, f"{where}.input")
        for ref in templates.references(args):
            head, _, rest = ref.partition(".")
            if head == "input" and rest:
                continue
            step_name = rest.split(".", 1)[0] if head == "steps" else ""
            if head != "steps" or step_name not in seen or not rest.startswith(step_name + ".output"):
                errors.append({"field": f"{where}.input", "message": f"template '{{{{{ref}}}}}' must name input.<field> "
                               "or steps.<earlier step>.output[.path]"})
        seen.append(name)
    return errors


def canonical_dataset_id(value: Any) -> str | None:
    """``ds_`` + the upper-case ULID of a dataset id written in any case with blanks around it; None when
    ``value`` is not a dataset id."""
    if not isinstance(value, str):
        return None
    prefix, sep, rest = value.strip().partition("_")
    ref = f"{prefix.lower()}{sep}{rest.upper()}"
    return ref if is_id(ref, "ds") else None


def check_datasets(scope: RequestScope, value: list[Any], held: list[str]) -> list[str]:
    """The canonical dataset ids of ``value`` (see the module docstring), or a 400 naming each bad one."""
    out: list[str] = []
    errors: list[dict[str, str]] = []
    unknown: list[str] = []
    for i, raw in enumerate(value):
        ref = canonical_dataset_id(raw)
        if ref is None:
            errors.append({"field": f"datasets[{i}]", "message": "must be a dataset id (ds_...)"})
            continue
        if ref in out:
            continue
        if ref not in held:
            try:
                catalog.record(scope, ref)
            except ApiError:
                unknown.append(ref)
                errors.append({"field": f"datasets[{i}]",
                               "message": f"{ref} is not a dataset of this workspace that you may read"})
                continue
        out.append(ref)
    if errors:
        detail = ("The agent's datasets must be datasets of this workspace that you may read: "
                  + (", ".join(unknown) + " is not." if len(unknown) == 1 else ", ".join(unknown) + " are not.")
                  if unknown else "The agent's datasets must be dataset ids (ds_...).")
        raise ApiError(400, "validation_failed", detail, errors=errors)
    return out


def _offered(scope: RequestScope | None) -> set[str]:
    """The model ids ``GET /v1/models`` offers the editing user: the deployment's models of the workspace's
    region and its connections' models, after the role allow-list (without a scope: the deployment's)."""
    if scope is None:
        return {m.id for m in registry().models}
    return {m["id"] for m in llm_service.available(scope)["items"]}


def normalise(body: dict[str, Any], current: dict[str, Any] | None = None,
              scope: RequestScope | None = None) -> dict[str, Any]:
    """The complete definition ``body`` describes (merged over ``current`` for updates), or a 400.
    ``scope``: the editing user's, whose read access new dataset ids are checked against."""
    merged = {**(current or {}), **{k: v for k, v in body.items()}}
    limits = {**DEFAULT_LIMITS, **((current or {}).get("limits") or {})}
    if "limits" in body:
        validate(body["limits"], LIMIT_FIELDS)
        limits.update(body["limits"])
    tools = merged.get("tools") or []
    errors = _check_tools(tools)
    model = merged.get("model") or "auto"
    if model != "auto" and (current is None or "model" in body) and model not in _offered(scope):
        errors.append({"field": "model", "message": "is not a model GET /v1/models offers you"})
    plan = merged.get("plan")
    if plan is not None and not errors:
        errors += check_plan(plan, tools, limits["max_steps"])
    if errors:
        raise validation_error(errors)
    held = list((current or {}).get("datasets") or [])
    datasets = held
    if "datasets" in body:
        if scope is None:
            raise ValueError("checking datasets needs the editing user's scope")
        datasets = check_datasets(scope, body["datasets"], held)
    return {"name": merged["name"], "instructions": merged.get("instructions") or "",
            "model": merged.get("model") or "auto", "tools": list(tools), "plan": plan, "datasets": datasets,
            "limits": limits}


def to_public(item: models.AgentAttrs) -> dict[str, Any]:
    return {"id": item.id, "workspace_id": item.workspace_id, "name": item.name, "instructions": item.instructions,
            "model": item.model, "tools": json.loads(item.tools), "plan": json.loads(item.plan) if item.plan else None,
            "datasets": json.loads(item.datasets or "[]"), "limits": json.loads(item.limits),
            "version": int(item.version), "created_by": item.created_by,
            "created_at": item.created_at, "updated_at": item.updated_at,
            "updated_by": {"user_id": item.updated_by or item.created_by, "email": item.updated_by_email}}


def get_item(scope: RequestScope, agent_id: str) -> models.AgentAttrs:
    """The stored definition; 404 for malformed ids and other workspaces' agents alike."""
    if not is_id(agent_id, "agt"):
        raise not_found("agent")
    cls = models.agents(scope.home)
    try:
        return cls.get(scope.workspace_id, agent_id, consistent_read=True)
    except cls.DoesNotExist:
        raise not_found("agent") from None


def create(scope: RequestScope, body: dict[str, Any], caller: Any = None) -> dict[str, Any]:
    """A new definition; ``preset_id`` (a preset the creator may read, ``llm/presets.py``) copies the
    preset's instructions into it (instead of ``instructions``)."""
    principal = scope.principal
    if isinstance(body, dict) and "preset_id" in body:
        if "instructions" in body:
            raise validation_error([{"field": "preset_id", "message": "is given instead of instructions"}])
        _, instructions = presets.instructions_of(scope, body["preset_id"])
        body = {**{k: v for k, v in body.items() if k != "preset_id"}, "instructions": instructions}
    validate(body, FIELDS)
    d = normalise(body, scope=scope)
    region = scope.home
    now = clock.iso()
    item = models.agents(region)(principal.workspace_id, new_id("agt"), name=d["name"], instructions=d["instructions"],
                                 model=d["model"], tools=json.dumps(d["tools"]),
                                 plan=json.dumps(d["plan"]) if d["plan"] is not None else None,
                                 datasets=json.dumps(d["datasets"]),
                                 limits=json.dumps(d["limits"]), version=1, created_by=principal.user_id,
                                 created_at=now, updated_at=now, updated_by=principal.user_id,
                                 updated_by_email=principal.email)
    item.save(condition=models.AgentAttrs.id.does_not_exist())
    audit.append(region, principal.workspace_id, "agent.created", actor=audit.Actor.of(principal),
                 target={"type": "agent", "id": item.id}, details={"name": d["name"], "tools": d["tools"], "datasets": d["datasets"]},
                 caller=caller)
    return to_public(item)


def update(scope: RequestScope, agent_id: str, body: dict[str, Any], caller: Any = None) -> dict[str, Any]:
    principal = scope.principal
    validate(body, PATCH_FIELDS)
    item = get_item(scope, agent_id)
    current = to_public(item)
    d = normalise(body, current, scope)
    A = models.AgentAttrs
    item.update(actions=[A.name.set(d["name"]), A.instructions.set(d["instructions"]), A.model.set(d["model"]),
                         A.tools.set(json.dumps(d["tools"])),
                         A.plan.set(json.dumps(d["plan"])) if d["plan"] is not None else A.plan.remove(),
                         A.datasets.set(json.dumps(d["datasets"])),
                         A.limits.set(json.dumps(d["limits"])), A.version.add(1), A.updated_at.set(clock.iso()),
                         A.updated_by.set(principal.user_id), A.updated_by_email.set(principal.email)],
                condition=A.version == item.version)
    audit.append(scope.home, principal.workspace_id, "agent.updated", actor=audit.Actor.of(principal),
                 target={"type": "agent", "id": agent_id}, details={"fields": sorted(body)}, caller=caller)
    return to_public(item)


def delete(scope: RequestScope, agent_id: str, caller: Any = None) -> None:
    principal = scope.principal
    item = get_item(scope, agent_id)
    item.delete()
    audit.append(scope.home, principal.workspace_id, "agent.deleted", actor=audit.Actor.of(principal),
                 target={"type": "agent", "id": agent_id}, details={"name": item.name}, caller=caller)


def list_agents(scope: RequestScope, limit: int, after: str | None) -> dict[str, Any]:
    cls = models.agents(scope.home)
    cond = cls.id > after if after else None
    items = list(cls.query(scope.workspace_id, cond, limit=limit + 1, page_size=limit + 1))
    out = paging.page(items, limit, "agents", lambda i: i.id)
    return {"agents": [to_public(i) for i in out.pop("_items")], **out}
