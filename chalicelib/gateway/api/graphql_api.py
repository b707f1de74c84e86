"""GraphQL front door: the SDL in ``schema.graphql`` wired to the same services as the REST routes.

- Documents are parsed and validated once per distinct query text (LRU of ``DOC_CACHE_SIZE``); refused
  documents are cached too, so a repeated bad query costs a dictionary lookup.
- Beyond the standard validation, a document is refused with ``extensions.code = BAD_USER_INPUT`` and
  ``extensions.reason`` of ``aliases`` (more than ``MAX_ALIASES``), ``cost`` (estimated cost above
  ``MAX_COST``: every field costs one per time it is resolved, and a list multiplies its children by its
  page size; introspection lists by their real size in this schema, so the standard introspection query
  of graphql-js and gql is cheap while nesting ``fields { type { fields ... } }`` multiplies quickly) or
  ``size`` (text above ``MAX_QUERY_CHARS`` or ``MAX_TOKENS`` tokens). There is no plain depth limit: cost
  bounds nesting where it matters (lists), and the token limit bounds the rest.
- Every error carries ``extensions.code``: UNAUTHENTICATED, FORBIDDEN, BAD_USER_INPUT, NOT_FOUND,
  CONFLICT or INTERNAL (no internal detail ever reaches the caller).

graphql-core is imported only inside these functions' callers' request path, never at module load of
the gateway routes (``read_routes`` imports this module lazily).
"""
from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLEnumType,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    build_schema,
    execute,
    parse,
    validate,
)

from chalicelib.core.authz import Principal, require
from chalicelib.core.http.errors import ApiError
from chalicelib.core.logs import get_logger
from chalicelib.core.process_state import cached
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway.catalog import lineage, policies
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.ingest import connectors, sync
from chalicelib.groups import route_permissions

log = get_logger("gateway.graphql")

SDL_PATH = Path(__file__).with_name("schema.graphql")
DOC_CACHE_SIZE = 512
MAX_QUERY_CHARS = 20_000
MAX_TOKENS = 2_000
MAX_ALIASES = 15
MAX_COST = 20_000
# an introspection field resolves from the in-memory schema (no store read): a tenth of a data field
INTROSPECTION_UNIT = 0.1

# how many items a list field is assumed to hold when estimating cost
_LIST_SIZES = {("Query", "connectors"): 50, ("Query", "policies"): 100, ("Dataset", "schema"): 20,
               ("Dataset", "acl"): 5, ("LineageGraph", "nodes"): 200, ("LineageGraph", "edges"): 200,
               ("Policy", "principals"): 5}

_CODES = {401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND", 409: "CONFLICT"}


def sdl() -> str:
    return SDL_PATH.read_text()


class Refused(Exception):
    """A request refused before execution: a list of GraphQL error dicts and an HTTP status."""

    def __init__(self, errors: list[dict[str, Any]], status: int = 400) -> None:
        super().__init__(errors[0]["message"] if errors else "refused")
        self.errors = errors
        self.status = status


def error(message: str, code: str, **extra: Any) -> dict[str, Any]:
    return {"message": message, "extensions": {"code": code, **extra}}


# --- schema and resolvers --------------------------------------------------------------------------

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def _unwrap(t: Any) -> Any:
    while isinstance(t, (GraphQLNonNull, GraphQLList)):
        t = t.of_type
    return t


def _field_resolver(key: str, enum: bool) -> Any:
    def resolve(source: Any, info: Any) -> Any:
        value = source.get(key) if isinstance(source, dict) else getattr(source, key, None)
        if enum and isinstance(value, str):
            return value.upper()
        return value

    return resolve


def _scope(info: Any) -> RequestScope:
    return info.context["scope"]  # type: ignore[no-any-return]


def _principal(info: Any) -> Principal:
    return _scope(info).principal


def _connectors(_root: Any, info: Any, status: str | None = None, category: str | None = None) -> Any:

    return connectors.list_connectors(_scope(info), status=status, category=category)


def _datasets(_root: Any, info: Any, search: str | None = None, owner: str | None = None,
              first: int = catalog.DEFAULT_PAGE, after: str | None = None) -> dict[str, Any]:
    page = catalog.search(_scope(info), catalog.SearchFilters(text=search, owner=owner), limit=first, after=after)
    edges = [{"node": n, "cursor": c} for n, c in zip(page["items"], page["cursors"], strict=True)]
    return {"edges": edges, "total_count": page["total_count"],
            "page_info": {"has_next_page": page["has_more"], "has_previous_page": page["has_previous"],
                          "start_cursor": edges[0]["cursor"] if edges else None,
                          "end_cursor": edges[-1]["cursor"] if edges else None}}


def _dataset(_root: Any, info: Any, id: str) -> dict[str, Any] | None:  # noqa: A002
    try:
        return catalog.get(_scope(info), id)
    except ApiError as err:
        if err.status == 404:
            return None
        raise


def _lineage(_root: Any, info: Any, datasetId: str, depth: int = lineage.DEFAULT_DEPTH) -> dict[str, Any]:  # noqa: N803
    return lineage.graph(_scope(info), datasetId, depth)


def _policies(_root: Any, info: Any, scope: str | None = None) -> list[dict[str, Any]]:
    return policies.list_policies(_scope(info), scope)


def _sync_connector(_root: Any, info: Any, id: str, mode: str | None = None) -> dict[str, Any]:  # noqa: A002

    return sync.request_sync(_scope(info), id, mode=mode or "INCREMENTAL",
                             idempotency_key=info.context.get("idempotency_key"), caller=info.context.get("caller"))


def _set_field_policy(_root: Any, info: Any, datasetId: str, field: str, policy: str) -> dict[str, Any]:  # noqa: N803
    return catalog.set_field_policy(_scope(info), datasetId, field, policy, caller=info.context.get("caller"))


# Every root field of the schema, once: its REST twin (method, path), whose permission it checks, and its
# resolver. ``schema()`` refuses to build when a root field is missing here or its twin has no permission,
# so a GraphQL operation cannot exist without the permission check of the REST route it mirrors.
ROOT_FIELDS: dict[tuple[str, str], tuple[tuple[str, str], Any]] = {
    ("Query", "connectors"): (("GET", "/v1/connectors"), _connectors),
    ("Query", "datasets"): (("GET", "/v1/catalog/datasets"), _datasets),
    ("Query", "dataset"): (("GET", "/v1/catalog/datasets/{dataset_id}"), _dataset),
    ("Query", "lineage"): (("GET", "/v1/lineage/{dataset_id}"), _lineage),
    ("Query", "policies"): (("GET", "/v1/policies"), _policies),
    ("Mutation", "syncConnector"): (("POST", "/v1/connectors/{connector_id}/sync"), _sync_connector),
    ("Mutation", "setFieldPolicy"): (("PUT", "/v1/catalog/datasets/{dataset_id}/fields/{field}/policy"),
                                     _set_field_policy),
}


def root_permission(type_name: str, field_name: str) -> str:
    """The permission a root field checks: its REST twin's, read from the route-group table."""
    (method, path), _ = ROOT_FIELDS[(type_name, field_name)]
    permission = route_permissions("gateway").get(("gateway", path, method), "")
    if permission in ("", "public"):
        raise RuntimeError(f"GraphQL field {type_name}.{field_name}: REST twin {method} {path} has no permission")
    return permission


def _guarded(permission: str, resolver: Any) -> Any:
    def resolve(root: Any, info: Any, **args: Any) -> Any:
        require(_principal(info), permission)
        return resolver(root, info, **args)

    return resolve


@cached(maxsize=1, derived=True)
def schema() -> GraphQLSchema:
    built = build_schema(sdl())
    roots = {t.name for t in (built.query_type, built.mutation_type, built.subscription_type) if t is not None}
    for type_name, gql_type in built.type_map.items():
        if type_name.startswith("__") or not hasattr(gql_type, "fields"):
            continue
        for field_name, fdef in gql_type.fields.items():
            if type_name in roots:  # KeyError here: a root field without a declared permission
                fdef.resolve = _guarded(root_permission(type_name, field_name), ROOT_FIELDS[(type_name, field_name)][1])
            else:
                fdef.resolve = _field_resolver(_snake(field_name), isinstance(_unwrap(fdef.type), GraphQLEnumType))
    return built


# --- document cache and limits ---------------------------------------------------------------------

_docs: OrderedDict[str, DocumentNode | Refused] = OrderedDict()
_docs_lock = threading.Lock()


def _fragments(doc: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    return {d.name.value: d for d in doc.definitions if isinstance(d, FragmentDefinitionNode)}


def _measure(doc: DocumentNode) -> tuple[int, int, float]:
    """(max depth, alias count, estimated cost) over every operation, fragments expanded."""
    frags = _fragments(doc)
    s = schema()
    aliases = sum(1 for d in doc.definitions for _ in _alias_nodes(d))

    def walk(sel_set: Any, parent: Any, depth: int, mult: int, seen: frozenset[str]) -> tuple[int, float]:
        max_depth, cost = depth, 0.0
        if sel_set is None:
            return max_depth, cost
        for sel in sel_set.selections:
            if isinstance(sel, FieldNode):
                name = sel.name.value
                fdef = getattr(parent, "fields", {}).get(name) if parent is not None else None
                child_type = _unwrap(fdef.type) if fdef is not None else None
                if fdef is None and name in _INTROSPECTION_ROOTS:  # __schema / __type on the root type
                    child_type = s.get_type(_INTROSPECTION_ROOTS[name])
                size = 1
                if parent is not None and parent.name.startswith("__"):
                    size = _introspection_sizes().get((parent.name, name), 1)
                elif parent is not None and (parent.name, name) == ("Query", "datasets"):
                    size = _first_arg(sel)
                elif parent is not None:
                    size = _LIST_SIZES.get((parent.name, name), 1)
                if parent is not None and parent.name == "DatasetConnection" and name == "edges":
                    size = 1  # already counted by datasets(first)
                in_schema = name.startswith("__") or (parent is not None and parent.name.startswith("__"))
                cost += mult * (INTROSPECTION_UNIT if in_schema else 1)
                d, c = walk(sel.selection_set, child_type, depth + 1, mult * size, seen)
                max_depth, cost = max(max_depth, d), cost + c
            elif isinstance(sel, InlineFragmentNode):
                cond = s.get_type(sel.type_condition.name.value) if sel.type_condition else parent
                d, c = walk(sel.selection_set, cond, depth, mult, seen)
                max_depth, cost = max(max_depth, d), cost + c
            elif isinstance(sel, FragmentSpreadNode):
                frag = frags.get(sel.name.value)
                if frag is None or sel.name.value in seen:
                    continue
                d, c = walk(frag.selection_set, s.get_type(frag.type_condition.name.value), depth, mult,
                            seen | {sel.name.value})
                max_depth, cost = max(max_depth, d), cost + c
        return max_depth, cost

    max_depth, total = 0, 0.0
    for op in doc.definitions:
        if isinstance(op, OperationDefinitionNode):
            root = s.mutation_type if op.operation.value == "mutation" else s.query_type
            d, c = walk(op.selection_set, root, 0, 1, frozenset())
            max_depth, total = max(max_depth, d), total + c
    return max_depth, aliases, total


_INTROSPECTION_ROOTS = {"__schema": "__Schema", "__type": "__Type"}


@cached(maxsize=1, derived=True)
def _introspection_sizes() -> dict[tuple[str, str], int]:
    """How many items each introspection list holds at most in this schema (its real size)."""
    s = schema()
    types = list(s.type_map.values())

    def most(attr: str) -> int:
        return max([len(getattr(t, attr, None) or ()) for t in types] + [1])

    most_args = max([len(f.args) for t in types for f in (getattr(t, "fields", None) or {}).values()
                     if hasattr(f, "args")] + [len(d.args) for d in s.directives] + [1])
    return {("__Schema", "types"): len(types), ("__Schema", "directives"): len(s.directives),
            ("__Type", "fields"): most("fields"), ("__Type", "inputFields"): most("fields"),
            ("__Type", "enumValues"): most("values"), ("__Type", "interfaces"): most("interfaces"),
            ("__Type", "possibleTypes"): max(len(s.get_possible_types(t)) for t in types
                                             if hasattr(t, "resolve_type")) if any(
                hasattr(t, "resolve_type") for t in types) else 1,
            ("__Field", "args"): most_args, ("__Directive", "args"): most_args}


def _first_arg(node: FieldNode) -> int:
    for arg in node.arguments or ():
        if arg.name.value == "first":
            if isinstance(arg.value, IntValueNode):
                return max(1, min(int(arg.value.value), catalog.MAX_PAGE))
            return catalog.MAX_PAGE  # a variable: assume the maximum
    return catalog.DEFAULT_PAGE


def _alias_nodes(node: Any) -> Any:
    sel_set = getattr(node, "selection_set", None)
    if sel_set is None:
        return
    for sel in sel_set.selections:
        if isinstance(sel, FieldNode) and sel.alias is not None:
            yield sel
        yield from _alias_nodes(sel)


def _compile(query: str) -> DocumentNode | Refused:
    if len(query) > MAX_QUERY_CHARS:
        return Refused([error(f"The query exceeds {MAX_QUERY_CHARS} characters.", "BAD_USER_INPUT", reason="size")])
    try:
        doc = parse(query, max_tokens=MAX_TOKENS)
    except GraphQLError as err:
        reason = "size" if "token limit" in err.message.lower() else "syntax"
        return Refused([_format(err, "BAD_USER_INPUT", reason=reason)])
    problems = validate(schema(), doc)
    if problems:
        return Refused([_format(e, "BAD_USER_INPUT", reason="validation") for e in problems[:20]])
    _depth, aliases, cost = _measure(doc)
    if aliases > MAX_ALIASES:
        return Refused([error(f"The query uses {aliases} aliases; the maximum is {MAX_ALIASES}.", "BAD_USER_INPUT",
                              reason="aliases")])
    if cost > MAX_COST:
        return Refused([error(f"The query's estimated cost {math.ceil(cost)} exceeds {MAX_COST}.", "BAD_USER_INPUT",
                              reason="cost")])
    return doc


def document(query: str) -> DocumentNode:
    """The parsed and validated document of ``query`` (cached), or ``Refused``."""
    with _docs_lock:
        hit = _docs.get(query)
        if hit is not None:
            _docs.move_to_end(query)
    if hit is None:
        hit = _compile(query)
        with _docs_lock:
            _docs[query] = hit
            while len(_docs) > DOC_CACHE_SIZE:
                _docs.popitem(last=False)
    if isinstance(hit, Refused):
        raise hit
    return hit


def clear_cache() -> None:
    with _docs_lock:
        _docs.clear()


# --- execution -------------------------------------------------------------------------------------

def _format(err: GraphQLError, code: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"message": err.message}
    if err.locations:
        out["locations"] = [{"line": loc.line, "column": loc.column} for loc in err.locations]
    if err.path:
        out["path"] = list(err.path)
    out["extensions"] = {"code": code, **extra}
    return out


def _format_execution_error(err: GraphQLError) -> dict[str, Any]:
    orig = err.original_error
    if orig is None or isinstance(orig, GraphQLError):  # variable coercion and similar request errors
        return _format(err, "BAD_USER_INPUT")
    if isinstance(orig, ApiError):
        code = _CODES.get(orig.status, "BAD_USER_INPUT" if 400 <= orig.status < 500 else "INTERNAL")
        extra: dict[str, Any] = {"reason": orig.code}
        if orig.errors:
            extra["errors"] = orig.errors
        formatted = _format(err, code, **extra)
        formatted["message"] = orig.detail if code != "INTERNAL" else "An internal error occurred."
        if orig.errors and code == "BAD_USER_INPUT":
            formatted["message"] = "Invalid arguments: " + "; ".join(f"{e['field']} {e['message']}" for e in orig.errors) + "."
        return formatted
    log.error("graphql resolver failed", extra={"error_type": type(orig).__name__, "path": list(err.path or [])})
    formatted = _format(err, "INTERNAL")
    formatted["message"] = "An internal error occurred."
    return formatted


def run(scope: RequestScope, body: Any, *, caller: Any = None, idempotency_key: str | None = None) -> dict[str, Any]:
    """Execute a GraphQL request body ``{query, variables?, operationName?}`` for the caller of ``scope``."""
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        raise Refused([error("The body must be a JSON object with a 'query' string.", "BAD_USER_INPUT",
                             reason="request")])
    unknown = set(body) - {"query", "variables", "operationName", "extensions"}
    variables = body.get("variables")
    op_name = body.get("operationName")
    if unknown or (variables is not None and not isinstance(variables, dict)) or (
            op_name is not None and not isinstance(op_name, str)):
        raise Refused([error("'variables' must be an object and 'operationName' a string; no other keys.",
                             "BAD_USER_INPUT", reason="request")])
    doc = document(body["query"])
    result = execute(schema(), doc, variable_values=variables, operation_name=op_name,
                     context_value={"scope": scope, "caller": caller, "idempotency_key": idempotency_key})
    out: dict[str, Any] = {}
    if result.errors:
        out["errors"] = [_format_execution_error(e) for e in result.errors]
    out["data"] = result.data
    return out
