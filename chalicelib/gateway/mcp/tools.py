"""The MCP tools: one per existing gateway operation, generated from the gateway's OpenAPI document.

The tools are the MCP entries of the platform's tool catalogue (``chalicelib/tool_catalog.py``). Each names
an operation (method and path) of ``gateway/api/openapi.json``; its MCP ``inputSchema`` is built from that
operation's path, query and header parameters and its JSON request body (``$ref``s inlined), its description
from the operation's summary, and the permission that lists it is the operation's ``x-permission`` (which
the catalogue states too). A call runs the REST route's own view function with the caller's principal (already
authorized by ``core.http.api.authorize``), so it reads through the same services, validation, row and byte
caps and field policies as REST; a 4xx of the operation is a tool result with ``isError``.

Every call is audited (``mcp.tool_called``: tool, dataset ids, row count, outcome, protocol version and
client name; never argument values) and recorded in lineage (each dataset read -> the tool call).
"""
from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from chalicelib import tool_catalog
from chalicelib.core import audit, correlation, process_state
from chalicelib.core.authz import Principal, require
from chalicelib.core.http import openapi
from chalicelib.core.http.api import Ctx
from chalicelib.core.http.errors import ApiError
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.telemetry import tracing
from chalicelib.core.tenancy import region_of, scope_of
from chalicelib.gateway.api.read_routes import OPENAPI_PATH
from chalicelib.gateway.catalog import lineage
from chalicelib.tool_catalog import ToolSpec

MAX_REF_DEPTH = 8
ROUTE_MODULES = ("chalicelib.gateway.api.read_routes", "chalicelib.gateway.api.routes", "chalicelib.knowledge.routes")

ToolDef = ToolSpec  # an MCP tool: a catalogue entry over one OpenAPI operation
TOOLS: tuple[ToolDef, ...] = tool_catalog.on(tool_catalog.MCP)
BY_NAME = {t.name: t for t in TOOLS}
HEADER_ARGS = {"Idempotency-Key": "idempotency_key"}  # operation header -> tool argument


def _doc() -> dict[str, Any]:
    return openapi.load(OPENAPI_PATH)


def _inline(schema: Any, depth: int = 0) -> Any:
    """``schema`` with every ``$ref`` to ``#/components/schemas/...`` replaced by its target."""
    if depth > MAX_REF_DEPTH:
        return {}
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            return _inline(_doc()["components"]["schemas"][ref.rsplit("/", 1)[1]], depth + 1)
        return {k: _inline(v, depth + 1) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_inline(v, depth + 1) for v in schema]
    return schema


def operation(tool: ToolDef) -> dict[str, Any]:
    return _doc()["paths"][tool.path][tool.method.lower()]


def permission(tool: ToolDef) -> str:
    """The permission the catalogue declares (the operation's ``x-permission``: the tests check they agree)."""
    return tool.permission


@dataclass(frozen=True)
class _Inputs:
    schema: dict[str, Any]
    where: dict[str, str]  # argument -> "path" | "query" | "header:<Name>" | "body"


@process_state.cached(maxsize=None, derived=True)
def inputs(name: str) -> _Inputs:
    """The tool's input schema and where each argument goes in the operation's request."""
    tool = BY_NAME[name]
    op = operation(tool)
    props: dict[str, Any] = {}
    where: dict[str, str] = {}
    required: list[str] = list(tool.required)
    for param in op.get("parameters", []):
        arg = HEADER_ARGS.get(param["name"], param["name"]) if param["in"] == "header" else param["name"]
        if arg in tool.hidden or param["in"] not in ("path", "query", "header"):
            continue
        schema = dict(_inline(param.get("schema", {})))
        if param.get("description"):
            schema["description"] = param["description"]
        if param["in"] == "header":
            schema.setdefault("description", "any string unique to this intended action: resending it "
                                             "returns the first answer instead of acting twice")
        props[arg] = schema
        where[arg] = "header:" + param["name"] if param["in"] == "header" else param["in"]
        if param.get("required") and arg not in required:
            required.append(arg)
    body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        body = _inline(body)
        for arg, schema in body.get("properties", {}).items():
            if arg in tool.hidden:
                continue
            props[arg] = schema
            where[arg] = "body"
        required += [r for r in body.get("required", []) if r not in required and r not in tool.hidden]
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return _Inputs(schema, where)


def listing(tool: ToolDef) -> dict[str, Any]:
    """The tool as ``tools/list`` shows it."""
    op = operation(tool)
    description = op.get("summary", tool.title)
    if op.get("description"):
        description += "\n\n" + op["description"]
    return {"name": tool.name, "title": tool.title, "description": description,
            "inputSchema": inputs(tool.name).schema,
            "annotations": {"title": tool.title, "readOnlyHint": not tool.writes, "idempotentHint": True,
                            "destructiveHint": False, "openWorldHint": False}}


def offered(principal: Principal) -> list[ToolDef]:
    """The tools the caller's live role may call (a sync only for roles that may sync)."""
    return [t for t in TOOLS if principal.can(permission(t))]


# --- calling an operation's view ------------------------------------------------------------------------

class _Query(dict):  # type: ignore[type-arg]
    """Query parameters as Chalice hands them to views (``getlist`` included)."""

    def getlist(self, key: str) -> list[str]:
        return [self[key]] if key in self else []


@dataclass
class _Request:
    """The parts of a Chalice request a view reads, for an operation called as a tool."""

    method: str
    path: str
    query_params: _Query | None
    headers: dict[str, str]
    raw_body: bytes
    context: dict[str, Any]


@process_state.cached(maxsize=None, derived=True)
def _views() -> dict[tuple[str, str], Callable[..., Any]]:
    out: dict[tuple[str, str], Callable[..., Any]] = {}
    for module in ROUTE_MODULES:
        for route in importlib.import_module(module).api.routes:
            for method in route.methods:
                out[(method, route.path)] = route.fn
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _request(tool: ToolDef, arguments: dict[str, Any], base: Any) -> tuple[_Request, dict[str, str]]:
    """The REST request the arguments describe (view path parameters apart), or a 400 naming bad arguments."""
    spec = inputs(tool.name)
    unknown = sorted(set(arguments) - set(spec.where))
    missing = [r for r in spec.schema.get("required", []) if r not in arguments]
    if unknown or missing:
        raise ApiError(400, "validation_failed", "The tool arguments are not valid.",
                       errors=[{"field": u[:64], "message": "is not an argument of this tool"} for u in unknown]
                       + [{"field": m, "message": "is required"} for m in missing])
    query, params, body = _Query(), {}, {}
    headers = {"content-type": "application/json", "user-agent": (base.headers.get("user-agent") or "")[:512]}
    for arg, value in arguments.items():
        place = spec.where[arg]
        if place in ("path", "query") and isinstance(value, (dict, list)) or value is None:
            raise ApiError(400, "validation_failed", "The tool arguments are not valid.",
                           errors=[{"field": arg, "message": "must be a string or a number"}])
        if place == "path":
            params[arg] = _scalar(value)
        elif place == "query":
            query[arg] = _scalar(value)
        elif place.startswith("header:"):
            headers[place[7:].lower()] = _scalar(value)
        else:
            body[arg] = value
    path = tool.path
    for name, value in params.items():
        path = path.replace("{" + name + "}", quote(value, safe=""))
    raw = json.dumps(body).encode() if tool.method == "POST" else b""
    return _Request(tool.method, path, query or None, headers, raw, base.context or {}), params


@tracing.traced("execute_tool", lambda tool, *_, **__: tracing.tool_attrs(tool.name, "mcp"))
def call(tool: ToolDef, arguments: dict[str, Any], principal: Principal, base: Any) -> dict[str, Any]:
    """Run the tool's operation as ``principal`` and return its JSON answer (an ``ApiError`` for a 4xx)."""
    require(principal, permission(tool))  # listed only when allowed; checked again when called
    request, params = _request(tool, arguments, base)
    result = _views()[(tool.method, tool.path)](Ctx(request=request, principal=principal, _scope=scope_of(principal)),
                                                **params)
    status = getattr(result, "status_code", 200)
    body = json.loads(result.body) if hasattr(result, "body") else result
    if status >= 400:
        raise ApiError(status, str(body.get("code", "error")), str(body.get("detail", "")), errors=body.get("errors"))
    return body


# --- audit and lineage ------------------------------------------------------------------------------------

def _dataset_ids(tool: ToolDef, answer: dict[str, Any]) -> list[str]:
    """The datasets a call read, from its answer (never from its arguments)."""
    found: set[str] = set()
    if tool.name == "query":
        found |= {d["id"] for d in answer.get("datasets", []) if isinstance(d, dict) and is_id(d.get("id"), "ds")}
    for item in answer.get("items", []) if isinstance(answer.get("items"), list) else []:
        if isinstance(item, dict):
            for key in ("dataset_id", "id"):
                if is_id(item.get(key), "ds"):
                    found.add(item[key])
            source = (item.get("citation") or {}).get("source") if isinstance(item.get("citation"), dict) else None
            if isinstance(source, dict) and is_id(source.get("dataset_id"), "ds"):
                found.add(source["dataset_id"])
    for key in ("dataset_id", "id"):
        if tool.name in ("get_dataset_schema", "get_lineage") and is_id(answer.get(key), "ds"):
            found.add(answer[key])
    if tool.name == "get_lineage":
        root = answer.get("root")
        if isinstance(root, dict) and is_id(root.get("id"), "ds"):
            found.add(root["id"])
    return sorted(found)


def _rows(tool: ToolDef, answer: dict[str, Any]) -> int:
    value = answer.get(tool.rows_key) if tool.rows_key else None
    return len(value) if isinstance(value, list) else 0


def record(tool: ToolDef, principal: Principal, answer: dict[str, Any] | None, error: ApiError | None,
           protocol_version: str, client: str, caller: Any) -> dict[str, Any]:
    """Audit the call and record its lineage; returns what was recorded (datasets, rows)."""
    call_id = new_id("mcp")
    datasets = _dataset_ids(tool, answer) if answer is not None else []
    rows = _rows(tool, answer) if answer is not None else 0
    region = region_of(principal.workspace_id)
    if datasets:
        lineage.record_edges(region, principal.workspace_id, [
            ("DATASET", ds, "MCP_TOOL_CALL", call_id, {"target_name": f"MCP {tool.name}", "tool": tool.name,
                                                       "user_id": principal.user_id})
            for ds in datasets])
    details = {"call_id": call_id, "tool": tool.name, "datasets": datasets, "row_count": rows,
               "outcome": "error" if error else "ok", "protocol_version": protocol_version, "client": client[:100]}
    if error is not None:
        details["error_code"] = error.code
    audit.append(region, principal.workspace_id, "mcp.tool_called",
                 actor=audit.Actor("user", principal.user_id, principal.email),
                 target={"type": "mcp_tool", "id": tool.name}, details=details, caller=caller)
    return {"call_id": call_id, "datasets": datasets, "row_count": rows, "correlation_id": correlation.current()}
