"""SCIM 2.0 endpoints at ``{base_url}/scim/v2/{workspace_id}/``: each checks the workspace SCIM token
(``tokens.authenticate``) and answers in SCIM's media type and error shape."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalice import Response

from chalicelib.core.http.api import Api, Ctx
from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import workspace_scope
from chalicelib.platform.scim import discovery, groups, protocol, tokens, users

api = Api("platform")
BASE = "/scim/v2/{workspace_id}"
_KW: dict[str, Any] = {"public": True, "content_types": protocol.CONTENT_TYPES, "render_error": protocol.render_error}


def _caller(ctx: Ctx, workspace_id: str) -> tokens.ScimCaller:
    """The identity provider calling with a live SCIM token of the path's workspace; the request's scope
    is that workspace's (a SCIM token acts for no user)."""
    token = tokens.presented(ctx.header("authorization"))  # 401 for a malformed one, before any read
    try:
        scope = workspace_scope(workspace_id)
    except ApiError:
        raise tokens.refused() from None  # no such workspace: the same answer as a wrong token
    return tokens.authenticate(scope, token)


def _body(ctx: Ctx) -> Any:
    try:
        return ctx.json()
    except Exception as exc:  # noqa: BLE001 - any unreadable body is SCIM's invalidSyntax
        raise protocol.error(getattr(exc, "status", 400), "invalidSyntax", "The body is not a JSON object.") from None


@api.route(BASE + "/ServiceProviderConfig", **_KW)
def service_provider_config(ctx: Ctx, workspace_id: str) -> Response:
    caller = _caller(ctx, workspace_id)
    return protocol.respond(discovery.service_provider_config(caller.scope))


@api.route(BASE + "/Schemas", **_KW)
def list_schemas(ctx: Ctx, workspace_id: str) -> Response:
    caller = _caller(ctx, workspace_id)
    found = discovery.schemas(caller.scope)
    return protocol.respond(protocol.list_response(found, len(found), protocol.Page(1, len(found))))


@api.route(BASE + "/Schemas/{schema_id}", **_KW)
def get_schema(ctx: Ctx, workspace_id: str, schema_id: str) -> Response:
    caller = _caller(ctx, workspace_id)
    for schema in discovery.schemas(caller.scope):
        if schema["id"] == schema_id:
            return protocol.respond(schema)
    raise protocol.error(404, None, "No such schema.")


@api.route(BASE + "/ResourceTypes", **_KW)
def list_resource_types(ctx: Ctx, workspace_id: str) -> Response:
    caller = _caller(ctx, workspace_id)
    found = discovery.resource_types(caller.scope)
    return protocol.respond(protocol.list_response(found, len(found), protocol.Page(1, len(found))))


@api.route(BASE + "/ResourceTypes/{type_id}", **_KW)
def get_resource_type(ctx: Ctx, workspace_id: str, type_id: str) -> Response:
    caller = _caller(ctx, workspace_id)
    for rt in discovery.resource_types(caller.scope):
        if rt["id"] == type_id:
            return protocol.respond(rt)
    raise protocol.error(404, None, "No such resource type.")


USER_CORE = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_CORE = "urn:ietf:params:scim:schemas:core:2.0:Group"


def _list(found: dict[str, Any], query: dict[str, str], core: str) -> Response:
    found["Resources"] = [protocol.project(r, query, core) for r in found["Resources"]]
    return protocol.respond(found)


def _search_query(ctx: Ctx) -> dict[str, str]:
    """A ``POST .search`` body (RFC 7644 section 3.4.3) as the query parameters of a GET."""
    body = _body(ctx)
    if not isinstance(body, dict):
        raise protocol.error(400, "invalidSyntax", "The request body must be a JSON object.")
    out: dict[str, str] = {}
    for key in ("filter", "startIndex", "count", "attributes", "excludedAttributes"):
        value = body.get(key)
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        if value is not None:
            out[key] = str(value)
    return out


@api.route(BASE + "/.search", methods=["POST"], **_KW)
def search_all(ctx: Ctx, workspace_id: str) -> Response:
    """A search over Users and Groups (RFC 7644 section 3.4.3): a filter naming an attribute one type lacks
    matches none of that type; users come first, each type in id order."""
    c = _caller(ctx, workspace_id)
    query = _search_query(ctx)
    page = protocol.page_of(query)
    whole = {**query, "startIndex": "1", "count": str(protocol.MAX_COUNT)}
    found: list[dict[str, Any]] = []
    refused: list[ApiError] = []
    for search, core in ((users.search, USER_CORE), (groups.search, GROUP_CORE)):
        try:
            found += [protocol.project(r, query, core) for r in search(c, whole)["Resources"]]
        except ApiError as err:
            if err.code != "invalidFilter":
                raise
            refused.append(err)
    if len(refused) == 2:
        raise refused[0]
    chosen = found[page.start - 1: page.start - 1 + page.count]
    return protocol.respond(protocol.list_response(chosen, len(found), page))


@dataclass(frozen=True)
class _Kind:
    """One SCIM resource type's endpoints: the service functions behind the shared route shapes."""

    name: str  # Users | Groups
    id_param: str  # user_id | group_id
    core: str
    search: Callable[[tokens.ScimCaller, dict[str, str]], dict[str, Any]]
    create: Callable[[tokens.ScimCaller, Any], dict[str, Any]]
    read: Callable[[tokens.ScimCaller, str, dict[str, str]], dict[str, Any]]
    replace: Callable[[tokens.ScimCaller, str, Any, str | None], dict[str, Any]]
    patch: Callable[[tokens.ScimCaller, str, Any, str | None], dict[str, Any]]
    delete: Callable[[tokens.ScimCaller, str, str | None], None]


def _one(data: dict[str, Any], core: str, status: int = 200, query: dict[str, str] | None = None) -> Response:
    return protocol.respond(protocol.project(data, query or {}, core), status, etag=data["meta"]["version"],
                            location=data["meta"]["location"] if status == 201 else None)


def _register(kind: _Kind) -> None:
    """List, ``.search``, create, read, replace, patch and delete of one resource type."""
    path, one = f"{BASE}/{kind.name}", f"{BASE}/{kind.name}/{{{kind.id_param}}}"

    def list_all(ctx: Ctx, workspace_id: str) -> Response:
        return _list(kind.search(_caller(ctx, workspace_id), ctx.query), ctx.query, kind.core)

    def search(ctx: Ctx, workspace_id: str) -> Response:
        c = _caller(ctx, workspace_id)
        query = _search_query(ctx)
        return _list(kind.search(c, query), query, kind.core)

    def create(ctx: Ctx, workspace_id: str) -> Response:
        c = _caller(ctx, workspace_id)
        return _one(kind.create(c, _body(ctx)), kind.core, 201)

    def read(ctx: Ctx, workspace_id: str, **ids: str) -> Response:
        c, resource_id = _caller(ctx, workspace_id), ids[kind.id_param]
        return _one(kind.read(c, resource_id, ctx.query), kind.core, query=ctx.query)

    def replace(ctx: Ctx, workspace_id: str, **ids: str) -> Response:
        c, resource_id = _caller(ctx, workspace_id), ids[kind.id_param]
        return _one(kind.replace(c, resource_id, _body(ctx), ctx.header("if-match")), kind.core)

    def patch(ctx: Ctx, workspace_id: str, **ids: str) -> Response:
        c, resource_id = _caller(ctx, workspace_id), ids[kind.id_param]
        return _one(kind.patch(c, resource_id, _body(ctx), ctx.header("if-match")), kind.core)

    def delete(ctx: Ctx, workspace_id: str, **ids: str) -> Response:
        c, resource_id = _caller(ctx, workspace_id), ids[kind.id_param]
        kind.delete(c, resource_id, ctx.header("if-match"))
        return Response(body="", status_code=204)

    for view, at, verb in ((list_all, path, "GET"), (search, path + "/.search", "POST"), (create, path, "POST"),
                           (read, one, "GET"), (replace, one, "PUT"), (patch, one, "PATCH"),
                           (delete, one, "DELETE")):
        view.__name__ = f"{view.__name__}_{kind.name.lower()}"
        api.route(at, methods=[verb], **_KW)(view)


_register(_Kind("Users", "user_id", USER_CORE, users.search, users.create, users.read, users.replace, users.patch,
                users.delete))
_register(_Kind("Groups", "group_id", GROUP_CORE, groups.search, groups.create, groups.read_one, groups.replace, groups.patch,
                groups.delete))
