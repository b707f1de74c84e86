"""App routes at {app_url} (route group ``app``): the pages, the sign-in round trip, the session calls
(refresh, switch workspace, sign out) and the API forwarder of the single-page app (docs/webapp.md)."""
from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import unquote

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core.config import settings
from chalicelib.core.http.api import JSON, Api, Ctx, json_response
from chalicelib.core.http.errors import PROBLEM_CONTENT_TYPE, ApiError
from chalicelib.core.http.streaming import StreamingResponse
from chalicelib.identity.sso import http_client
from chalicelib.webapp import markdown, pages, prefetch, session, shell, uploads, upstream

api = Api("app")
OCTET = "application/octet-stream"
PROXY_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
PROXY_DEPTH = 8  # /v1/workspaces/{id}/sso/connections/{domain}/verify is the deepest API path (6)
PUBLIC_PAGES = ("signed_out",)


def _html(body: str, status: int = 200, cookies: list[str] | None = None) -> Response:
    headers: dict[str, Any] = dict(pages.HEADERS)
    if cookies:
        headers["Set-Cookie"] = cookies  # type: ignore[assignment]
    return Response(body=body, status_code=status, headers=headers)


def _redirect(location: str, cookies: list[str] | None = None) -> Response:
    headers: dict[str, Any] = {"Location": location, "Cache-Control": "no-store"}
    if cookies:
        headers["Set-Cookie"] = cookies
    return Response(body="", status_code=302, headers=headers)


def _with_cookies(resp: Response, cookies: list[str]) -> Response:
    # Chalice turns a list-valued header into multiValueHeaders (one Set-Cookie per cookie)
    resp.headers["Set-Cookie"] = cookies  # type: ignore[assignment]
    return resp


def _signin_redirect(path: str, prompt: str | None = None) -> Response:
    location, state = shell.begin(path, prompt)
    return _redirect(location, [f"{shell.STATE_COOKIE}={state}; Path=/callback; HttpOnly; SameSite=Lax; "
                                f"Max-Age={shell.FLOW_TTL}{'; Secure' if settings().app_url.startswith('https://') else ''}"])


def _path_of(ctx: Ctx, segments: list[str]) -> str:
    path = "/" + "/".join(segments)
    raw_query = ctx.request.query_params or {}
    if raw_query:
        from urllib.parse import urlencode  # noqa: PLC0415

        path += "?" + urlencode(raw_query)
    return shell.safe_path(path)


def _show(ctx: Ctx, segments: list[str]) -> Response:
    """The shell for a known page of a signed-in visitor (refreshing an expired access token on the
    way), the sign-in round trip for a signed-out one, and a 404 page for an unknown address."""
    path = _path_of(ctx, segments)
    name = pages.page_name(path)
    if name is None:
        return _html(pages.plain_html("Page not found", pages.not_found_body()), 404)
    if name in PUBLIC_PAGES:
        return _html(pages.plain_html("Signed out", '<p>You are signed out of the app and of the identity '
                                      'service.</p><p><a class="button" href="/">Sign in again</a></p>'))
    cookies = session.read_cookies(ctx.header("cookie"))
    token = cookies.get(session.ACCESS)
    claims = session.valid_claims(token)
    if claims and token:
        return _html(_shell(name, claims, token))
    if cookies.get(session.REFRESH):
        try:
            issued = session.refresh(cookies)
        except (session.SessionError, http_client.ProviderError):
            return _signin_redirect(path)
        fresh = session.valid_claims(issued.access_token)
        body = _shell(name, fresh, issued.access_token) if fresh else pages.shell_html(200, name)
        return _html(body, cookies=issued.cookies())
    return _signin_redirect(path)


def _shell(name: str, claims: dict[str, Any], token: str) -> str:
    """The shell of a signed-in session: its public claims and the frame's workspace list."""
    return pages.shell_html(200, name, session.public_claims(claims), prefetch.answers(token))


@api.route("/", public=True)
def home(ctx: Ctx) -> Any:
    return _show(ctx, [])


def _page_route(depth: int) -> None:
    names = [f"s{i}" for i in range(depth)]

    def view(ctx: Ctx, **segments: str) -> Any:
        return _show(ctx, [segments[n] for n in names])

    view.__name__ = view.__qualname__ = f"page_depth_{depth}"
    api.route("/" + "/".join("{" + n + "}" for n in names), public=True)(view)


# Chalice's greedy ``{proxy+}`` is not served by ``chalice local``: the depths are spelled out, so an
# unknown address of up to MAX_DEPTH segments gets the app's 404 page instead of a raw 403.
for _depth in range(1, pages.MAX_DEPTH + 1):
    _page_route(_depth)


@api.route("/static/{name}", public=True)
def static(ctx: Ctx, name: str) -> Any:
    return _static(ctx, name)


@api.route("/static/pages/{name}", public=True)
def static_page_module(ctx: Ctx, name: str) -> Any:
    return _static(ctx, "pages/" + name)


@api.route("/static/start/{name}", public=True)
def static_start_module(ctx: Ctx, name: str) -> Any:
    return _static(ctx, "start/" + name)


def _static(ctx: Ctx, name: str) -> Response:
    found = pages.static_file(name)
    if found is None:
        return Response(body="", status_code=404, headers={"Cache-Control": "no-store"})
    data, content_type, etag = found
    headers = {"Content-Type": f"{content_type}; charset=utf-8", "Cache-Control": "no-cache", "ETag": etag,
               "X-Content-Type-Options": "nosniff"}
    if ctx.header("if-none-match") == etag:
        return Response(body="", status_code=304, headers=headers)
    return Response(body=data.decode("utf-8"), status_code=200, headers=headers)


@api.route("/callback", public=True)
def callback(ctx: Ctx) -> Any:
    q = ctx.query
    cookies = session.read_cookies(ctx.header("cookie"))
    if q.get("error"):
        back = shell.abandon(q.get("state") or "", cookies.get(shell.STATE_COOKIE))
        error, description = q.get("error", ""), q.get("error_description", "")
        title = "Multi-factor authentication required" if mfa_refusal(error, description) else "Sign-in was not completed"
        return _html(pages.plain_html(title, signin_error_body(error, description, back)), 400)
    try:
        done = shell.finish(q.get("state") or "", cookies.get(shell.STATE_COOKIE), q.get("code") or "")
    except shell.ShellError as err:
        return _html(pages.plain_html("Sign-in was not completed", f'<p class="error" role="alert">{html.escape(str(err))}'
                                      '</p><p><a class="button" href="/">Start again</a></p>'), 400)
    issued = session.Issued(done.access_token, done.expires_in, done.refresh_token, done.id_token)
    return _redirect(done.path, issued.cookies() + [session.set_cookie(session.WORKSPACE, "", 0)])


MFA_WORDS = re.compile(r"\b(mfa|multi-factor|multifactor|two-factor|2fa|second factor)\b", re.IGNORECASE)


def mfa_refusal(error: str, description: str) -> bool:
    """The identity service refused because the workspace requires a second factor: its own error code,
    or ``access_denied`` with a description that says so (``error_description=...mfa...``)."""
    return error == "mfa_required" or (error in ("access_denied", "interaction_required")
                                       and bool(MFA_WORDS.search(description or "")))


def signin_error_body(error: str, description: str, back: str) -> str:
    """The way forward for each refusal; the MFA-required case says how to add a second factor."""
    account = html.escape(settings().auth_url + "/account")
    again = html.escape("/session/signin?" + _q({"path": back, "fresh": "1"}))
    reason = html.escape(description or error or "unknown reason")
    if mfa_refusal(error, description):
        return (f'<p class="error" role="alert" id="signin-error">This workspace requires multi-factor '
                f'authentication, and this sign-in used only one factor.</p><p>{reason}</p>'
                '<ol><li>Open your <a href="' + account + '">security settings</a> and add an authenticator app '
                'or a security key (or passkey).</li><li>Then sign in again with that second factor.</li></ol>'
                f'<p><a class="button" id="signin-again" href="{again}">Sign in again</a></p>')
    return (f'<p class="error" role="alert" id="signin-error">The identity service did not sign you in: '
            f'{reason}</p><p><a class="button" id="signin-again" href="{again}">Try again</a></p>')


def _q(values: dict[str, str]) -> str:
    from urllib.parse import urlencode  # noqa: PLC0415

    return urlencode(values)


@api.route("/session/signin", public=True)
def session_signin(ctx: Ctx) -> Any:
    """Start a (fresh) sign-in for a page: after an MFA-required refusal ``fresh=1`` asks for a new
    sign-in at the identity service instead of reusing the one-factor session."""
    path = shell.return_path(ctx.query.get("path") or "/")
    return _signin_redirect(path, "login" if ctx.query.get("fresh") == "1" else None)


def _csrf(ctx: Ctx) -> None:
    if not session.same_origin(ctx.header("origin"), ctx.header("x-requested-with")):
        raise ApiError(403, "csrf_refused", "This call must come from the app's own pages.")


@api.route("/session/refresh", methods=["POST"], public=True, content_types=[JSON])
def session_refresh(ctx: Ctx) -> Any:
    """A new access token for the page's session (the page calls this when the API answers 401)."""
    _csrf(ctx)
    try:
        issued = session.refresh(session.read_cookies(ctx.header("cookie")))
    except session.SessionError as err:
        raise ApiError(401, "login_required", str(err)) from None
    except http_client.ProviderError:
        raise ApiError(503, "identity_unreachable", "The identity service is not reachable.") from None
    return _with_cookies(json_response({"status": "refreshed", "expires_in": issued.expires_in}), issued.cookies())


@api.route("/session/workspace", methods=["POST"], public=True, content_types=[JSON])
def session_switch(ctx: Ctx) -> Any:
    """Switch workspace: token exchange at the identity service (the browser never holds the token)."""
    _csrf(ctx)
    body = ctx.json()
    workspace_id = body.get("workspace_id") if isinstance(body, dict) else None
    if not isinstance(workspace_id, str) or set(body) != {"workspace_id"}:
        raise ApiError(400, "invalid_body", "Send exactly {\"workspace_id\": \"ws_...\"}.")
    cookies = session.read_cookies(ctx.header("cookie"))
    current = cookies.get(session.ACCESS)
    if not session.valid_claims(current):
        raise ApiError(401, "login_required", "The session expired; refresh it first.")
    try:
        issued = session.exchange(current or "", workspace_id)
    except session.SessionError as err:
        status = 403 if err.code in ("access_denied", "mfa_required") else 400
        raise ApiError(status, err.code, str(err)) from None
    except http_client.ProviderError:
        raise ApiError(503, "identity_unreachable", "The identity service is not reachable.") from None
    return _with_cookies(json_response({"workspace_id": workspace_id, "expires_in": issued.expires_in}),
                         issued.cookies())


@api.route("/session/signout", methods=["POST"], public=True, content_types=[JSON])
def session_signout(ctx: Ctx) -> Any:
    """End the app session (cookies cleared, refresh grant revoked) and send the browser to the identity
    service's end-session endpoint so the sign-in session there ends too."""
    _csrf(ctx)
    location = session.sign_out(session.read_cookies(ctx.header("cookie")))
    return _with_cookies(json_response({"redirect_to": location}), session.clear_cookies())


def _forward(ctx: Ctx, surface: str, segments: list[str]) -> Response:
    _csrf(ctx)
    url = upstream.url_for(surface, segments, ctx.request.query_params)
    if url is None:
        raise ApiError(404, "not_found", "No such API address.")
    token = session.read_cookies(ctx.header("cookie")).get(session.ACCESS)
    if not session.valid_claims(token):
        raise ApiError(401, "session_expired", "The session's access token expired; refresh it.")
    raw = ctx.request.raw_body or b""
    if len(raw) > upstream.MAX_UPLOAD_BYTES:
        raise ApiError(413, "body_too_large", "The request body is too large.")
    headers = {k: ctx.header(k) or "" for k in upstream.FORWARDED_REQUEST_HEADERS}
    answer = upstream.send(ctx.request.method, url, token, raw, headers)
    elsewhere = upstream.regional_retry(surface, answer, url)
    if elsewhere:
        answer = upstream.send(ctx.request.method, elsewhere, token, raw, headers)
    out = {**answer.headers, "Cache-Control": "no-store"}
    content_type = out.get("Content-Type") or out.get("content-type") or ""
    if content_type.startswith("text/event-stream"):
        out["X-Accel-Buffering"] = "no"
    if answer.stream is not None:  # passed on as the API writes it (core/http/streaming.py)
        return StreamingResponse(answer.stream, answer.status, out)
    return Response(body=answer.body.decode("utf-8", "replace"), status_code=answer.status, headers=out)


def _proxy_route(depth: int) -> None:
    names = [f"p{i}" for i in range(depth)]

    def view(ctx: Ctx, surface: str, **segments: str) -> Any:
        return _forward(ctx, surface, [segments[n] for n in names])

    view.__name__ = view.__qualname__ = f"api_depth_{depth}"
    api.route("/api/{surface}/" + "/".join("{" + n + "}" for n in names), methods=PROXY_METHODS, public=True,
              content_types=[JSON, PROBLEM_CONTENT_TYPE])(view)


for _depth in range(1, PROXY_DEPTH + 1):
    _proxy_route(_depth)


@api.route("/api/upload/{connector_id}", methods=["POST"], public=True, content_types=[OCTET])
def upload(ctx: Ctx, connector_id: str) -> Any:
    """Upload one document to a documents connector (``webapp/uploads.py``): the declared size, then the
    caller's right on the connector (the gateway's upload grant), and only then the body is read, checked
    without a parser and stored; the sync worker parses it. ``X-File-Name`` is percent-encoded."""
    _csrf(ctx)
    token = session.read_cookies(ctx.header("cookie")).get(session.ACCESS)
    if not session.valid_claims(token):
        raise ApiError(401, "session_expired", "The session's access token expired; refresh it.")
    name = unquote(ctx.header("x-file-name") or "")
    refused = uploads.declared_too_large(name, ctx.header("content-length"))
    if refused is not None:
        raise refused
    answer = uploads.store(token or "", connector_id, name, ctx.header("x-file-type") or OCTET,
                           lambda: ctx.request.raw_body or b"")
    return Response(body=answer.body.decode("utf-8", "replace"), status_code=answer.status,
                    headers={**answer.headers, "Cache-Control": "no-store"})


@api.route("/api/render", methods=["POST"], public=True)
def render_markdown(ctx: Ctx) -> Any:
    """Model answers (Markdown) as sanitised HTML for the chat page: ``{"items": [text, ...]}`` ->
    ``{"html": [html, ...]}`` (``webapp/markdown.py``). Signed-in pages only (CSRF header, valid session)."""
    _csrf(ctx)
    if not session.valid_claims(session.read_cookies(ctx.header("cookie")).get(session.ACCESS)):
        raise ApiError(401, "session_expired", "The session's access token expired; refresh it.")
    body = ctx.json()
    items = body.get("items") if isinstance(body, dict) else None
    if (not isinstance(items, list) or not 1 <= len(items) <= markdown.MAX_ITEMS
            or not all(isinstance(i, str) and len(i) <= markdown.MAX_CHARS for i in items)):
        raise ApiError(400, "validation_failed", f"Send items: a list of 1 to {markdown.MAX_ITEMS} texts of at most "
                                                 f"{markdown.MAX_CHARS} characters.")
    return {"html": [markdown.render(i) for i in items]}


@api.route("/session/claims", public=True)
def session_claims(ctx: Ctx) -> Any:
    """Who the session is (the verified access token's non-secret claims), for the page's header; it
    works before the user has any workspace, when ``/v1/me`` has nothing to describe."""
    _csrf(ctx)
    claims = session.valid_claims(session.read_cookies(ctx.header("cookie")).get(session.ACCESS))
    if claims is None:
        raise ApiError(401, "session_expired", "The session's access token expired; refresh it.")
    return session.public_claims(claims)
