"""The tools an agent may be allowed, each acting as the user who started the run.

Every tool calls the same service the user's own request would reach (``gateway.query.run``,
``gateway.catalog``, ``knowledge.service``) with a ``Principal`` rebuilt from that user's *live*
membership. The data-reading tools (``query``, ``knowledge_search``) read only through the
policy-enforcing reader behind those services (``gateway/reader.py``), so dataset ACLs, per-document
ACLs, DENY fields and MASK/HASH/REDACT policies (key columns included) apply exactly as they do for the
user directly; a user who left the workspace makes the tool refuse. An agent whose definition names
datasets runs with them as the principal's dataset scope (``dataset_scope``): the reader then shows every
tool only those of them the user may read, so a query naming another dataset fails as a tool error
(``dataset_not_allowed``) and a named dataset deleted since is skipped with a note
(``skipped_datasets``). Tool outputs are JSON and are what the step ledger stores.

Every tool that reads adds the **labels** of what it read to the run's taint (``ToolContext.labels``,
``labels.py``): ``query`` and ``knowledge_search`` the datasets with their fields and restricted documents,
``catalog_search`` and ``dataset_schema`` the datasets they describe, ``memory_read`` the labels of the
values it returned (and it returns only values whose labels the user still satisfies). ``memory_write``
stores the value with the run's taint; a tool that sends data outside the workspace (``Tool.sends_out``,
none today) is refused with ``tainted_run`` while the taint is restricted. Both hold for model-chosen calls
and declared plans alike, whatever the value looks like (an encoded copy carries the label all the same).

``TOOLS`` binds each agent tool of the platform's tool catalogue (``chalicelib/tool_catalog.py``: names,
descriptions, input fields, permission, writing or not) to its function here; ``plan_schema.py`` derives the
OpenAPI document's step schemas from those fields.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib import tool_catalog
from chalicelib.agents import labels, memory
from chalicelib.agents.labels import Label
from chalicelib.core.authz import Principal
from chalicelib.core.http.errors import ApiError
from chalicelib.core.http.validation import F, validate
from chalicelib.core.telemetry import tracing
from chalicelib.core.tenancy import RequestScope, WorkspaceAttrs
from chalicelib.gateway.catalog import service as catalog
from chalicelib.knowledge.chunking import DOCUMENT

MEMORY_VALUE_MAX = 16 * 1024


class ToolError(Exception):
    """A tool refused or failed in a way the caller can understand (recorded on the step)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class ToolContext:
    """What a tool knows about the run it serves."""

    principal: Principal
    region: str
    agent_id: str
    run_id: str
    read: set[str] = field(default_factory=set)  # dataset ids the run has read (for lineage)
    labels: set[Label] = field(default_factory=set)  # the run's taint: the labels of all it has read
    workspace: WorkspaceAttrs | None = field(default=None, repr=False)  # the directory entry, as the worker read it

    @property
    def scope(self) -> RequestScope:
        """The run's scope: its starter, acting in the workspace's region."""
        return RequestScope(self.principal, self.region, self.workspace)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    fields: dict[str, F]
    fn: Callable[[ToolContext, dict[str, Any]], Any]
    writes: bool = False  # changes state (or would send data out): guarded in model-chosen runs
    sends_out: bool = False  # sends data outside the workspace: refused while the run's taint is restricted


SKIPPED = "skipped: it no longer exists or the user running the agent may not read it"


def dataset_scope(agent: dict[str, Any]) -> frozenset[str] | None:
    """The dataset scope of a run of ``agent`` (a definition as ``definitions.to_public`` gives it): its
    datasets, or None (every dataset the user may read) when it names none."""
    named = agent.get("datasets") or []
    return frozenset(named) if named else None


def _skipped(ctx: ToolContext) -> dict[str, Any]:
    """``{"skipped_datasets": [...]}`` naming each dataset of the agent the user cannot read now (deleted
    since it was ticked, or out of the user's reach); {} when there is none."""
    scope = ctx.principal.datasets
    if not scope:
        return {}
    known = catalog.snapshot(ctx.region, ctx.principal.workspace_id).datasets
    gone = [ds for ds in sorted(scope) if ds not in known or not catalog.can_read(ctx.principal, known[ds])]
    return {"skipped_datasets": [{"id": ds, "message": f"Dataset {ds} is {SKIPPED}."} for ds in gone]} if gone else {}


def _out_of_scope(ctx: ToolContext, sql: str) -> list[str]:
    """Names of datasets the SQL names that the user may read but the agent may not."""
    from chalicelib.gateway.query import service as query  # noqa: PLC0415 - see ``_query``

    if ctx.principal.datasets is None:
        return []
    unscoped = replace(ctx.scope, principal=replace(ctx.principal, datasets=None))
    return [r.name for r in catalog.readable_by_name(unscoped, query.referenced(sql))
            if r.id not in ctx.principal.datasets]


def _query(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    # the query engine loads at a run's first query: the platform group holds the tools' fields, not the engine
    from chalicelib.gateway.query import service as query  # noqa: PLC0415

    try:
        result = query.run(ctx.scope, args["sql"], limit=args.get("limit", 50),
                           answer={"type": "AGENT_RUN", "id": ctx.run_id})
    except ApiError as err:
        outside = _out_of_scope(ctx, args["sql"]) if err.code == "sql_error" else []
        if not outside:
            raise
        mine = sorted(r.name for r in catalog.readable(ctx.scope))
        raise ToolError("dataset_not_allowed", f"This agent may not read {', '.join(outside)}; it may read only "
                        + (", ".join(mine) if mine else "no dataset now") + ".") from None
    ctx.read.update(d["id"] for d in result["datasets"])
    ctx.labels |= labels.of_datasets(ctx.scope, [d["id"] for d in result["datasets"]])
    return {"columns": result["columns"], "rows": result["rows"], "row_count": result["row_count"],
            "truncated": result["truncated"], "datasets": [{"id": d["id"], "name": d["name"]} for d in result["datasets"]],
            "policy_restricted": _policy_restricted(ctx, [d["id"] for d in result["datasets"]]), **_skipped(ctx)}


def _policy_restricted(ctx: ToolContext, dataset_ids: list[str]) -> bool:
    """Whether a dataset the query read has a field the user sees under a policy other than ALLOW, or
    documents with their own access list (a hint on the step output; who may see what the run writes after
    it is decided by the run's labels, ``labels.py``)."""
    datasets = catalog.snapshot(ctx.region, ctx.principal.workspace_id).datasets if dataset_ids else {}
    for ds in dataset_ids:
        rec = datasets.get(ds)
        if rec is not None and any((rec.row_acl or {}).values()):
            return True
        schema = catalog.schema_of(ctx.scope, ds)
        if any(str(f.get("policy") or "ALLOW").upper() != "ALLOW" for f in schema["fields"]):
            return True
    return False


def _catalog_search(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:

    page = catalog.search(ctx.scope, catalog.SearchFilters(text=args.get("query") or None),
                          limit=args.get("limit", 10))
    ctx.labels |= labels.of_datasets(ctx.scope, [d["id"] for d in page["items"]], fields=False)
    return {"datasets": [{"id": d["id"], "name": d["name"], "description": d["description"],
                          "classification": d["classification"], "row_count": d["row_count"],
                          "fields": [f["name"] for f in d["schema"]]} for d in page["items"]],
            "total_count": page["total_count"], **_skipped(ctx)}


def _dataset_schema(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:

    ref = args["dataset"]
    if not ref.startswith("ds_"):  # a name: resolve among the datasets the user may read
        found = catalog.readable_by_name(ctx.scope, {ref.lower()})
        if not found:
            raise ApiError(404, "not_found", "The dataset does not exist or is not visible to this user"
                           + (" among the agent's datasets." if ctx.principal.datasets is not None else "."))
        ref = found[0].id
    schema = catalog.schema_of(ctx.scope, ref)
    ctx.read.add(schema["dataset_id"])
    ctx.labels |= labels.of_datasets(ctx.scope, [schema["dataset_id"]], fields=False)
    return schema


def _knowledge_search(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from chalicelib.knowledge import service  # noqa: PLC0415 - knowledge loads NumPy and bm25s: at first use, not at cold start

    hits = service.search(ctx.scope, args["query"], k=args.get("limit", 5))
    ctx.read.update(h.chunk.dataset_id for h in hits)
    ctx.labels |= labels.of_datasets(ctx.scope, [h.chunk.dataset_id for h in hits])
    datasets = catalog.snapshot(ctx.region, ctx.principal.workspace_id).datasets if hits else {}

    def restricted(h: Any) -> bool:  # a document with its own access list
        rec = datasets.get(h.chunk.dataset_id)
        return h.chunk.kind == DOCUMENT and rec is not None and bool((rec.row_acl or {}).get(h.chunk.doc))

    return {"passages": [{"text": h.chunk.text, "title": h.chunk.title, "score": round(h.score, 6),
                          "citation": h.citation(), "restricted": restricted(h)} for h in hits], **_skipped(ctx)}


def _memory_read(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:

    values, seen, withheld = memory.read_labelled(ctx.region, ctx.principal.workspace_id, ctx.agent_id,
                                                  ctx.principal.user_id, args.get("key"), reader=ctx.scope)
    ctx.labels |= seen  # what was remembered taints this run as it tainted the run that wrote it
    return {"memory": values, "withheld": withheld}


def _memory_write(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:

    return memory.write(ctx.region, ctx.principal.workspace_id, ctx.agent_id, ctx.principal.user_id,
                        args["key"], args["value"], run_id=ctx.run_id, labels=ctx.labels)


_FUNCTIONS: dict[str, Callable[[ToolContext, dict[str, Any]], Any]] = {
    "knowledge_search": _knowledge_search, "query": _query, "catalog_search": _catalog_search,
    "dataset_schema": _dataset_schema, "memory_read": _memory_read, "memory_write": _memory_write,
}
TOOLS: dict[str, Tool] = {s.name: Tool(s.name, s.description, s.fields, _FUNCTIONS[s.name], writes=s.writes,
                                       sends_out=s.sends_out) for s in tool_catalog.on(tool_catalog.AGENTS)}
TOOL_NAMES: tuple[str, ...] = tuple(TOOLS)


def check_args(tool: str, args: Any) -> dict[str, Any]:
    """``args`` when they fit the tool's input fields; a 400 naming each bad field otherwise."""
    return validate(args, TOOLS[tool].fields)


@tracing.traced("execute_tool", lambda tool, *_, **__: tracing.tool_attrs(tool))
def call(tool: str, ctx: ToolContext, args: dict[str, Any]) -> Any:
    """Run one tool; an ``ApiError`` of the service becomes a ``ToolError`` with its code."""
    spec = TOOLS[tool]
    try:
        checked = check_args(tool, args)
        if spec.sends_out and labels.restricted(ctx.scope, ctx.labels):
            raise ToolError("tainted_run", f"{tool} sends data outside the workspace and this run has read data "
                            "restricted to part of it (a field policy, a document access list, a dataset ACL or "
                            "classification); start a run that does not read it.")
        if tool == "memory_write":
            if len(json.dumps(checked["value"])) > MEMORY_VALUE_MAX:
                raise ToolError("value_too_large", f"A memory value may hold at most {MEMORY_VALUE_MAX} bytes.")
        return spec.fn(ctx, checked)
    except ApiError as err:
        raise ToolError(err.code, err.detail) from None
