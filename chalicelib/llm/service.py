"""The model service other contexts call (chat, agents): the selector, routing and completion.

    routing = service.route(scope, "auto", Need(context_tokens=..., streaming=False))
    completion = service.complete(routing, prompt)            # -> prompt.Completion
    for part in service.stream(routing, prompt): ...          # str deltas, then one Completion
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chalicelib.core.telemetry import tracing
from chalicelib.core.tenancy import RequestScope
from chalicelib.llm import access, budget, connections, routing
from chalicelib.llm.connections import workspace_registry
from chalicelib.llm.prompt import Completion, Prompt, estimate_tokens, prompt_tokens
from chalicelib.llm.providers import bedrock, extractive, openai_http
from chalicelib.llm.registry import ModelSpec
from chalicelib.llm.routing import Need, Routing

__all__ = ["Need", "Routing", "Prompt", "Completion", "route", "complete", "stream", "available", "embed",
           "NO_GENERATIVE_MODEL"]

NO_GENERATIVE_MODEL = (
    "No generative model is connected: answers quote your sources instead. An Admin connects one under "
    "Models in the app, or with POST /v1/models/connections (any OpenAI-compatible endpoint or a Bedrock "
    "model in this workspace's region); `LOCAL_MODEL=/path/model.gguf make run` starts a local one.")


def available(scope: RequestScope) -> dict[str, Any]:
    """``GET /v1/models``: the models this caller may choose, in preference order, and why each is there
    (``items``), and the same list in OpenAI's shape (``object: list``, ``data``, with ``auto`` first)."""
    principal = scope.principal
    item = access.settings_item(scope)
    reg = workspace_registry(principal.workspace_id, item)
    region = scope.home
    allow = access.allow_of(item)
    items = []
    for spec in sorted(reg.in_region(region), key=lambda m: reg.rank(m.id)):
        if not access.allowed_for(allow, principal.roles, spec.id, principal.groups):
            continue
        restricted = any(r in allow for r in principal.roles)
        items.append({
            "id": spec.id, "name": spec.name, "provider": spec.provider, "provider_kind": spec.provider_kind,
            "kind": spec.kind, "region": region, "capabilities": spec.capabilities(),
            "connection": spec.connection,
            "available_because": f"serves {region}, this workspace's region; "
                                 + ("on your role's allow-list" if restricted else "your role has no allow-list"),
        })
    generative = any(i["kind"] == "generative" for i in items)
    # the OpenAI list shape beside ours (docs/decisions.md, "OpenAI-compatible API"): ``data`` lists the same models
    data = [{"id": "auto", "object": "model", "created": 0, "owned_by": "aiplat"}] if items else []
    data += [{"id": m["id"], "object": "model", "created": 0, "owned_by": m["provider"]} for m in items]
    return {"items": items, "auto": "model 'auto' picks the first of these that fits the request",
            "region": region, "generative_available": generative,
            **({} if generative else {"notice": NO_GENERATIVE_MODEL}), "object": "list", "data": data}


def route(scope: RequestScope, requested: str, need: Need) -> Routing:
    return routing.choose(scope, requested, need)


def _module(spec: ModelSpec) -> Any:
    return {"openai": openai_http, "bedrock": bedrock}[spec.provider_kind]


@tracing.model_call
def complete(chosen: Routing, prompt: Prompt) -> Completion:
    """One completion from the routed model, in the routed region (a connection's model only while its
    connection declares it there; the answer's tokens spend the workspace's budget)."""
    spec = chosen.chosen
    if spec.provider_kind == "extractive":
        return extractive.complete(prompt)
    connections.check_call(spec, chosen.region, chosen.region)
    done = _module(spec).complete(spec, chosen.region, prompt)
    _spend(chosen, done.input_tokens + done.output_tokens)
    return done


@tracing.model_stream
def stream(chosen: Routing, prompt: Prompt) -> Iterator[str | Completion]:
    """Text deltas, then the final ``Completion``."""
    spec = chosen.chosen
    if spec.provider_kind == "extractive":
        return extractive.stream(prompt)
    connections.check_call(spec, chosen.region, chosen.region)
    return _counted(chosen, prompt, _module(spec).stream(spec, chosen.region, prompt))


def _spend(chosen: Routing, tokens: int) -> None:
    if chosen.workspace_id:
        budget.count(chosen.workspace_id, tokens)


def _counted(chosen: Routing, prompt: Prompt, parts: Iterator[str | Completion]) -> Iterator[str | Completion]:
    """``parts``, counting the answer's tokens; an answer the reader stopped counts what was generated."""
    text: list[str] = []
    finished = False
    try:
        for part in parts:
            if isinstance(part, Completion):
                finished = True
                _spend(chosen, part.input_tokens + part.output_tokens)
            else:
                text.append(part)
            yield part
    finally:
        close = getattr(parts, "close", None)
        if close is not None:
            close()  # the model stops generating when the reader goes away
        if not finished:
            _spend(chosen, prompt_tokens(prompt) + estimate_tokens("".join(text)))


def embed(spec: ModelSpec, region: str, texts: list[str]) -> list[list[float]]:
    """Embeddings from an OpenAI-compatible embedding model served in ``region``."""
    if region not in spec.regions or not spec.embeddings or spec.provider_kind != "openai":
        raise openai_http.ProviderError(f"{spec.id} cannot embed in {region}")
    return openai_http.embed(spec, region, texts)
