"""Gateway read routes at {gateway_url}: catalog, schema, field policy, lineage, federated query,
policies, the OpenAPI document, and GraphQL at /graphql. Thin: every view calls a service.

graphql-core and duckdb are imported inside the views that need them (cold-start budget).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core.http import openapi as openapi_doc
from chalicelib.core.http import paging, rate_limits
from chalicelib.core.http.api import Api, Ctx, json_response, resolve
from chalicelib.core.http.errors import ApiError
from chalicelib.core.http.validation import F, query_int, validate
from chalicelib.gateway.catalog import lineage, policies
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.query import service as query

api = Api("gateway")

GRAPHQL_DOOR = "workspace.read"  # any live member of the token's workspace; fields check their own permission
OPENAPI_PATH = Path(__file__).with_name("openapi.json")
_SEARCH_PARAMS = {"q", "search", "owner", "connector", "classification", "fresher_than",
                  "field_classification", "limit", "after"}


@api.route("/v1/catalog/datasets", permission="knowledge.read")
def search_datasets(ctx: Ctx) -> dict[str, Any]:
    q = ctx.query
    unknown = sorted(set(q) - _SEARCH_PARAMS)
    if unknown:
        raise ApiError(400, "validation_failed", f"Unknown query parameters: {', '.join(unknown)}.",
                       errors=[{"field": u[:64], "message": "is not a known parameter"} for u in unknown])
    filters = catalog.SearchFilters(text=q.get("q", q.get("search")), owner=q.get("owner"),
                                    connector_id=q.get("connector"), classification=q.get("classification"),
                                    fresher_than=q.get("fresher_than"),
                                    field_classification=q.get("field_classification"))
    limit = query_int(q, "limit", catalog.DEFAULT_PAGE, minimum=1, maximum=catalog.MAX_PAGE)
    page = catalog.search(ctx.scope, filters, limit=limit, after=q.get("after"))
    return {"items": page["items"], "has_more": page["has_more"], "next_cursor": page["next_cursor"],
            "total_count": page["total_count"]}


@api.route("/v1/catalog/datasets/{dataset_id}", permission="knowledge.read")
def get_dataset(ctx: Ctx, dataset_id: str) -> dict[str, Any]:
    return catalog.get(ctx.scope, dataset_id)


@api.route("/v1/catalog/datasets/{dataset_id}/schema", permission="knowledge.read")
def dataset_schema(ctx: Ctx, dataset_id: str) -> dict[str, Any]:
    return catalog.schema_of(ctx.scope, dataset_id)


@api.route("/v1/catalog/datasets/{dataset_id}/fields/{field}/policy", ["PUT"], permission="policies.manage")
def put_field_policy(ctx: Ctx, dataset_id: str, field: str) -> dict[str, Any]:
    body = validate(ctx.json(), {"policy": F(str, required=True, enum=catalog.FIELD_POLICIES)})
    return catalog.set_field_policy(ctx.scope, dataset_id, field, body["policy"], caller=ctx.caller)


@api.route("/v1/lineage/{dataset_id}", permission="knowledge.read")
def get_lineage(ctx: Ctx, dataset_id: str) -> dict[str, Any]:
    depth = query_int(ctx.query, "depth", lineage.DEFAULT_DEPTH, minimum=1, maximum=lineage.MAX_DEPTH)
    return lineage.graph(ctx.scope, dataset_id, depth)


@api.route("/v1/query", ["POST"], permission="knowledge.read")
def federated_query(ctx: Ctx) -> dict[str, Any]:

    body = validate(ctx.json(), {"sql": F(str, required=True, min_len=1, max_len=query.MAX_SQL_CHARS),
                                 "limit": F(int, minimum=1, maximum=query.MAX_ROWS),
                                 "answer": F(dict), "after": F(str, min_len=1, max_len=512)})
    return query.run(ctx.scope, body["sql"], limit=body.get("limit"), answer=body.get("answer"), after=body.get("after"))


@api.route("/v1/policies", permission="policies.read")
def list_policies(ctx: Ctx) -> dict[str, Any]:
    paging.check_params(ctx.query, ("scope", "limit", "after"))
    items = sorted(policies.list_policies(ctx.scope, ctx.query.get("scope")), key=lambda p: p["id"])
    out = paging.page_sorted(items, ctx.query, "policies", lambda p: [p["id"]])
    return {"policies": out.pop("_items"), **out}


@api.route("/v1/openapi.json", public=True)
def openapi(ctx: Ctx) -> Response:
    return openapi_doc.response(OPENAPI_PATH)


def _sdl_response() -> Response:
    from chalicelib.gateway.api.graphql_api import sdl  # noqa: PLC0415 - graphql-core loads at the first GraphQL request

    return Response(body=sdl(), status_code=200, headers={"Content-Type": "text/plain; charset=utf-8"})


@api.route("/graphql/schema", public=True)
def graphql_schema(ctx: Ctx) -> Response:
    return _sdl_response()


@api.route("/graphql", ["GET"], public=True)
def graphql_get(ctx: Ctx) -> Response:
    if "sdl" in ctx.query:
        return _sdl_response()
    raise ApiError(405, "method_not_allowed", "Send GraphQL operations with POST; GET /graphql?sdl returns the schema.",
                   headers={"Allow": "POST"})


GRAPHQL_RESPONSE = "application/graphql-response+json"


def _graphql_media_type(accept: str | None) -> str:
    """GraphQL over HTTP: ``application/graphql-response+json`` when the client accepts it (and does not
    prefer ``application/json``), else ``application/json``."""
    weights: dict[str, float] = {}
    for part in (accept or "").split(","):
        media, _, params = part.strip().partition(";")
        q = 1.0
        for p in params.split(";"):
            k, _, v = p.strip().partition("=")
            if k == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        weights[media.strip().lower()] = q
    ours = weights.get(GRAPHQL_RESPONSE, 0.0)
    return GRAPHQL_RESPONSE if ours > 0 and ours >= weights.get("application/json", 0.0) else "application/json"


@api.route("/graphql", ["POST"], public=True)
def graphql_post(ctx: Ctx) -> Response:
    """Authenticates inside, so that every failure has the GraphQL error shape; answers in the media type
    the client accepts (``_graphql_media_type``)."""
    response = _graphql_post(ctx)
    response.headers["Content-Type"] = _graphql_media_type(ctx.header("accept"))
    response.headers["Vary"] = "Accept"
    return response


def _graphql_post(ctx: Ctx) -> Response:
    from chalicelib.gateway.api import graphql_api as gql  # noqa: PLC0415 - graphql-core loads at the first GraphQL request

    try:  # the REST path: live membership, enforce_mfa, request limits; each field then checks its own permission
        scope = resolve(ctx.header("authorization"), GRAPHQL_DOOR)
        limits = rate_limits.charge(scope)
    except ApiError as err:
        if err.status == 429:
            return json_response({"errors": [gql.error(err.detail, "RATE_LIMITED")]}, 429, headers=err.headers)
        if err.status == 421:  # another region's deployment serves this workspace (core.tenancy)
            return json_response({"errors": [gql.error(err.detail, err.code.upper(), **err.extra)]}, err.status)
        if err.status != 401:
            return json_response({"errors": [gql.error(err.detail, "FORBIDDEN", reason=err.code)]}, err.status)
        return json_response({"errors": [gql.error(err.detail, "UNAUTHENTICATED")]}, 401,
                             headers={"WWW-Authenticate": err.headers.get("WWW-Authenticate",
                                                                          'Bearer error="invalid_token"')})
    try:
        body = ctx.json()
        result = gql.run(scope, body, caller=ctx.caller, idempotency_key=ctx.header("idempotency-key"))
    except gql.Refused as refused:
        return json_response({"errors": refused.errors}, refused.status, headers=limits)
    except ApiError as err:  # malformed JSON, body too large
        return json_response({"errors": [gql.error(err.detail, "BAD_USER_INPUT", reason=err.code)]}, err.status,
                             headers=limits)
    return json_response(result, 200, headers=limits)
