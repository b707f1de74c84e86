"""Choosing a model for a request, deterministically: residency first (only models with an endpoint in
the workspace's region are considered at all), then the role's allow-list, then the capability the
request needs (context length including retrieved passages, streaming), then the deployment's
preference order. Fails closed with 422 and says why; ``routing`` in a chat reply is ``Routing.as_dict``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import RequestScope
from chalicelib.llm import access, budget
from chalicelib.llm.connections import workspace_registry
from chalicelib.llm.registry import ModelSpec, Registry

AUTO = "auto"


@dataclass(frozen=True)
class Need:
    context_tokens: int = 0  # prompt + retrieved passages + room for the answer
    streaming: bool = False
    tool_use: bool = False  # the model must choose tool calls (agent runs)


@dataclass
class Routing:
    chosen: ModelSpec
    region: str
    reason: str
    excluded: list[dict[str, str]] = field(default_factory=list)
    workspace_id: str | None = None  # whose token budget the answer spends (llm/budget.py)

    def as_dict(self) -> dict[str, Any]:
        return {"chosen": self.chosen.id, "reason": self.reason, "excluded": list(self.excluded)}


def _capability_gap(spec: ModelSpec, need: Need) -> str | None:
    if spec.kind == "embedding":
        return "is an embedding model, not a chat model"
    if need.streaming and not spec.streaming:
        return "does not stream"
    if need.tool_use and not spec.tool_use:
        return "does not call tools"
    if need.context_tokens > spec.context_tokens:
        return f"its context ({spec.context_tokens} tokens) is smaller than this request ({need.context_tokens})"
    return None


def choose(scope: RequestScope, requested: str, need: Need, reg: Registry | None = None) -> Routing:
    """The model serving ``requested`` (a model id or ``auto``) for the caller, or a 4xx."""
    principal = scope.principal
    item = access.settings_item(scope)
    budget.check(principal.workspace_id, item)  # 429 once the month's token budget is spent
    reg = reg or workspace_registry(principal.workspace_id, item)
    region = scope.home
    allow = access.allow_of(item)
    roles = principal.roles
    if requested != AUTO:
        spec = reg.get(requested)
        if spec is None:
            raise ApiError(400, "unknown_model", f"There is no model '{requested[:100]}'. GET /v1/models lists them.",
                           errors=[{"field": "model", "message": "is not a known model"}])
        if region not in spec.regions:
            raise ApiError(422, "model_not_available", f"The model '{spec.id}' has no endpoint in {region}, where "
                           "this workspace's data must stay; choose another model or 'auto'.")
        if not access.allowed_for(allow, roles, spec.id, principal.groups):
            raise ApiError(422, "model_not_allowed", f"The model '{spec.id}' is not allowed for your role in this "
                           "workspace; choose another model or 'auto'.")
        gap = _capability_gap(spec, need)
        if gap:
            raise ApiError(422, "model_capability", f"The model '{spec.id}' {gap}.")
        return Routing(spec, region, "requested by the caller", workspace_id=principal.workspace_id)
    excluded: list[dict[str, str]] = []
    outside = 0
    fit: list[ModelSpec] = []
    for spec in sorted(reg.models, key=lambda m: reg.rank(m.id)):
        if region not in spec.regions:
            outside += 1  # never named: a model without an endpoint here does not exist for this workspace
            continue
        if not access.allowed_for(allow, roles, spec.id, principal.groups):
            excluded.append({"model": spec.id, "reason": "not allowed for your role"})
            continue
        gap = _capability_gap(spec, need)
        if gap:
            excluded.append({"model": spec.id, "reason": gap})
            continue
        fit.append(spec)
    note = f"; {outside} model(s) without an endpoint in {region} were not considered" if outside else ""
    if not fit:
        raise ApiError(422, "no_model_available", "No model may serve this request here: "
                       + ("; ".join(f"{e['model']} {e['reason']}" for e in excluded) or "none is configured")
                       + note + ".", extra={"routing": {"chosen": None, "excluded": excluded}})
    chosen = fit[0]
    for other in fit[1:]:
        excluded.append({"model": other.id, "reason": "lower in the deployment's preference order"})
    reason = (f"first in the deployment's preference order among {len(fit)} model(s) in {region} that your role "
              f"may use and that fit this request{note}")
    return Routing(chosen, region, reason, excluded, principal.workspace_id)
