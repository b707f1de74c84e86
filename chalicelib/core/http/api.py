"""Chalice glue shared by every route group: the one place routes are authenticated and authorized.

``Api.route`` registers a view on a blueprint with a required ``permission`` (or ``public=True``), so
no route can forget its check: the wrapper verifies the Bearer token, applies the permission map, and
turns every ``ApiError`` (and any unexpected error) into RFC 9457 problem+json. The middleware from
``install`` echoes ``X-Correlation-Id`` and converts Chalice's own error bodies (405, 415) to problems.
Services never import this module.
"""
from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from chalice import Chalice, Response

from chalicelib.core import correlation
from chalicelib.core.authz import AUTHENTICATED, Principal, require
from chalicelib.core.http import json_body, rate_limits
from chalicelib.core.http.errors import PROBLEM_CONTENT_TYPE, ApiError, unauthorized
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import WORKSPACE, scoped
from chalicelib.core.store import scope_versions
from chalicelib.core.telemetry import tracing
from chalicelib.core.tenancy import (
    RequestScope,
    begin_request,
    ensure_served_here,
    live_principal,
    require_member,
    scope_of,
)
from chalicelib.core.tokens import API, Audience, bearer, verifier

log = get_logger("web")
MAX_BODY_BYTES = 256 * 1024
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"

# RFC 6750 section 3: the protection space every surface names in ``WWW-Authenticate: Bearer realm=...``.
REALM = "aiplatform"

# The request being served by this thread. Chalice keeps one ``app.current_request`` per app, which the
# threaded local server (``chalice local``, ``make run``) shares between concurrent requests: a view could
# read another request's headers (its Authorization, Cookie, X-Requested-With) or body. The middleware
# receives its own request, and views read it from here.
_REQUEST: contextvars.ContextVar[Any] = contextvars.ContextVar("request", default=None)

@dataclass(frozen=True)
class Caller:
    """Where a request came from, for audit events."""

    ip: str
    user_agent: str
    correlation_id: str


@dataclass
class Ctx:
    """What a view needs from its request, without handing Chalice objects to services."""

    request: Any
    principal: Principal | None = None
    _body: Any = field(default=None, repr=False)
    _scope: RequestScope | None = field(default=None, repr=False)

    @property
    def scope(self) -> RequestScope:
        """The request scope resolved by the authorisation path (principal, region, directory entry)."""
        assert self._scope is not None, "route is public"
        return self._scope

    @property
    def caller(self) -> Caller:
        ctx = self.request.context or {}
        ip = (ctx.get("identity") or {}).get("sourceIp") or ""
        return Caller(ip=ip, user_agent=(self.request.headers.get("user-agent") or "")[:512],
                      correlation_id=correlation.current())

    @property
    def user(self) -> Principal:
        assert self.principal is not None, "route is public"
        return self.principal

    @property
    def query(self) -> dict[str, str]:
        return dict(self.request.query_params or {})

    def header(self, name: str) -> str | None:
        return self.request.headers.get(name.lower())

    def raw_body(self) -> bytes:
        raw = self.request.raw_body or b""
        if len(raw) > MAX_BODY_BYTES:
            raise ApiError(413, "body_too_large", f"The request body exceeds {MAX_BODY_BYTES} bytes.")
        return raw

    def json(self, *, required: bool = True) -> Any:
        """The parsed JSON body; 400 for malformed or too deeply nested JSON, 413 when too large."""
        if self._body is None:
            raw = self.raw_body()
            if not raw.strip():
                if required:
                    raise ApiError(400, "invalid_body", "A JSON request body is required.")
                self._body = {}
                return self._body
            self._body = json_body.parse(raw)
        return self._body

    def form(self) -> dict[str, str]:
        """A form-encoded body; a field sent twice is refused (RFC 6749 section 3.2)."""
        try:
            parsed = parse_qs(self.raw_body().decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise ApiError(400, "invalid_request", "The form body is not UTF-8.") from None
        out: dict[str, str] = {}
        for key, values in parsed.items():
            if len(values) != 1:
                raise ApiError(400, "invalid_request", f"The parameter '{key}' is repeated.")
            out[key] = values[0]
        return out


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body=json.dumps(body, separators=(",", ":"), default=str), status_code=status,
                    headers={"Content-Type": JSON, "Cache-Control": "no-store", **(headers or {})})


def problem_response(err: ApiError) -> Response:
    return Response(
        body=json.dumps(err.to_problem(correlation.current())),
        status_code=err.status,
        headers={"Content-Type": PROBLEM_CONTENT_TYPE, "Cache-Control": "no-store", **err.headers},
    )


@dataclass(frozen=True)
class _RouteDef:
    path: str
    methods: tuple[str, ...]
    content_types: tuple[str, ...]
    permission: str | None
    public: bool
    fn: Callable[..., Any]
    scope: str = WORKSPACE  # core.regions: which regional deployment serves the route
    audience: Audience = API  # core.tokens: which tokens the route accepts
    render_error: Callable[[ApiError], Response] | None = None  # a protocol's own error shape (default problem+json)
    anonymous: Callable[[Ctx], bool] | None = None  # a request of the route answered without a principal


class Api:
    """A route group module's routes, registered onto each app that serves them.

    Chalice blueprints cannot be registered on a second app (the route's ``methods`` are popped from
    shared kwargs, and ``current_request`` follows the last app), and tests and ``make run`` build
    several apps per process; so views are bound per app by ``register``. The optional first argument
    (a Blueprint) is accepted for compatibility and ignored.
    """

    def __init__(self, blueprint_or_name: Any, name: str | None = None) -> None:
        self.name = name if name is not None else str(blueprint_or_name)
        self.routes: list[_RouteDef] = []

    def route(
        self,
        path: str,
        methods: Iterable[str] = ("GET",),
        *,
        permission: str | None = None,
        public: bool = False,
        content_types: list[str] | None = None,
        scope: str = WORKSPACE,
        audience: Audience = API,
        render_error: Callable[[ApiError], Response] | None = None,
        anonymous: Callable[[Ctx], bool] | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """``anonymous``: which requests of a permission-checked route are answered without a token (the view
        then sees ``ctx.principal`` None), e.g. a protocol's public discovery message on its one endpoint."""
        if not public and not permission:
            raise ValueError(f"route {path} needs a permission or public=True")
        verbs = tuple(m.upper() for m in methods)

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.routes.append(_RouteDef(path, verbs, tuple(content_types or [JSON]), permission, public, fn, scope,
                                         audience, render_error, anonymous))
            return fn

        return decorate

    def register(self, app: Chalice) -> None:
        for route in self.routes:
            view = _bind_view(app, route)
            app.route(route.path, methods=list(route.methods), content_types=list(route.content_types))(view)


def missing_credentials() -> ApiError:
    """The 401 for a request that sent no credentials: a realm and no error code in ``WWW-Authenticate``
    (RFC 6750 section 3.1); the problem body keeps the platform's ``invalid_token`` code."""
    return ApiError(401, "invalid_token", "A Bearer access token is required.",
                    headers={"WWW-Authenticate": f'Bearer realm="{REALM}"'})


def authorize(authorization: str | None, permission: str, scope: str = WORKSPACE,
              params: dict[str, str] | None = None, audience: Audience = API) -> Principal:
    """``resolve``'s principal (GraphQL resolvers and callers that need no more)."""
    return resolve(authorization, permission, scope, params, audience).principal


def resolve(authorization: str | None, permission: str, scope: str = WORKSPACE,
            params: dict[str, str] | None = None, audience: Audience = API) -> RequestScope:
    """The one authorization path of every surface (REST views here, GraphQL in the gateway): verify the
    Bearer token, answer 421 when another region's deployment serves the workspace (before any regional
    store is read), replace its roles by the live membership (``core.tenancy.live_principal``: removed,
    demoted and ``enforce_mfa`` apply at once), check ``permission`` against the permission map, and check
    that a ``{workspace_id}`` in the path is the token's own workspace with the caller a member there.
    ``audience`` (``core.tokens``) says which tokens the surface takes: the platform API's by default.
    Returns the request's scope: what it read on the way (cached per container, ``core.tenancy``)."""
    if not authorization:
        raise missing_credentials()
    token = bearer(authorization)
    checker = verifier(audience)
    known = checker.known(token)
    if known is not None:  # the scope, the membership and a due revocation watermark: one read
        begin_request(known, checker.revocations)
    principal = checker.principal(token)
    if known is None:
        begin_request(principal.claims, checker.revocations)
    ensure_served_here(principal, scope, params or {})
    if not audience.is_home(principal.claims.get("aud")):  # another region's resource: 421 above, else refused
        raise unauthorized("The access token was issued for another resource.")
    if permission != AUTHENTICATED:  # workspace routes act with the live role
        principal = live_principal(principal)
    require(principal, permission)
    if permission != AUTHENTICATED and "workspace_id" in (params or {}):
        require_member(principal, (params or {})["workspace_id"])  # a path names the token's own workspace only
    return scope_of(principal)


def _bind_view(app: Chalice, route: _RouteDef) -> Callable[..., Any]:
    def view(**params: str) -> Any:
        with scope_versions.unit():  # the request reads its scope once (core.tenancy.begin_request)
            return handle(**params)

    def handle(**params: str) -> Any:
        ctx = Ctx(request=_REQUEST.get() or app.current_request)
        limits: dict[str, str] = {}  # the RateLimit fields of an authorized request's answer
        try:
            if not route.public and not (route.anonymous and route.anonymous(ctx)):
                ctx._scope = resolve(ctx.header("authorization"), route.permission or "", route.scope, params,
                                     route.audience)
                ctx.principal = ctx._scope.principal
                tracing.set_workspace(ctx._scope)
                limits = rate_limits.charge(ctx._scope)
            result = route.fn(ctx, **params)
        except ApiError as err:
            return _with_headers((route.render_error or problem_response)(err), limits)
        except Exception:  # never leak internals: log the type, answer a plain 500
            log.exception("unhandled error", extra={"path": route.path})
            return (route.render_error or problem_response)(ApiError(500, "internal_error",
                                                                     "An internal error occurred."))
        return _with_headers(result if isinstance(result, Response) else json_response(result), limits)

    view = scoped(route.scope, view)  # global routes of the global deployment may reach every region
    view.__name__ = f"{route.fn.__module__.rsplit('.', 1)[-1]}__{route.fn.__name__}"
    return view


def _with_headers(response: Any, headers: dict[str, str]) -> Any:
    if headers and isinstance(getattr(response, "headers", None), dict):
        response.headers = {**headers, **response.headers}  # a view's own fields win (a 429 of its own)
    return response


# An address no route serves. The local server answers it (infra/local_run.py) and API Gateway's gateway
# responses do when deployed (infra/template.py ``gateway_responses``): never a request header echoed back.
UNKNOWN_ROUTE = ApiError(404, "not_found", "No route serves this method and path; see the OpenAPI document.")


def unknown_route_response(correlation_id: str | None) -> Response:
    """The 404 problem for an address outside every route, with the caller's (or a new) correlation ID."""
    correlation.accept(correlation_id)
    response = problem_response(UNKNOWN_ROUTE)
    response.headers[correlation.HEADER] = correlation.current()
    return response


def _allowed_methods(app: Chalice, event: Any) -> str:
    """The ``Allow`` value of a 405: the methods the matched route serves."""
    resource = (getattr(event, "context", None) or {}).get("resourcePath", "")
    return ", ".join(sorted(app.routes.get(resource, {})))


def _correlation_middleware(event: Any, get_response: Callable[[Any], Response], app: Chalice | None = None) -> Response:
    started = time.perf_counter()
    tracing.accept_request(*((event.headers.get("x-correlation-id"), event.headers.get(tracing.TRACEPARENT))
                             if event is not None else (None, None)))
    response = tracing.serve(event, get_response)
    body = response.body
    if response.status_code >= 400 and isinstance(body, dict) and "Code" in body:
        err = ApiError(response.status_code, _native_code(body["Code"]), str(body.get("Message", "")))
        if body["Code"] == "MethodNotAllowedError":  # never echo the method; say which ones are served
            allow = _allowed_methods(app, event) if app is not None else ""
            err = ApiError(405, "method_not_allowed", "This path does not serve that method; see Allow.",
                           headers={"Allow": allow} if allow else None)
        response = problem_response(err) if response.status_code < 500 else problem_response(
            ApiError(500, "internal_error", "An internal error occurred."))
    response.headers[correlation.HEADER] = correlation.current()
    if event is not None:  # one access line per request; never headers, bodies or query strings
        log.info("request", extra={"method": event.method, "path": event.path, "status": response.status_code,
                                   "duration_ms": round((time.perf_counter() - started) * 1000, 2)})
    return response


def _native_code(code: str) -> str:
    return {"MethodNotAllowedError": "method_not_allowed", "UnsupportedMediaType": "unsupported_media_type",
            "BadRequestError": "bad_request", "NotFoundError": "not_found"}.get(code, "bad_request")


def install(app: Chalice) -> None:
    """Register the shared HTTP middleware on a route group's app."""
    def middleware(event: Any, get_response: Callable[[Any], Response]) -> Response:
        token = _REQUEST.set(event)
        try:
            return _correlation_middleware(event, get_response, app)
        finally:
            _REQUEST.reset(token)

    app.register_middleware(middleware, "http")
