"""App shell routes at {app_url} (route group ``app``): any page needs a signed-in visitor."""
from __future__ import annotations

import html
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core.config import settings
from chalicelib.core.web import Api, Ctx
from chalicelib.identity.pages.render import HTML_HEADERS, render, static_file
from chalicelib.identity.sso import http_client
from chalicelib.webapp import shell

api = Api("app")


def _cookie(ctx: Ctx, name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(ctx.header("cookie") or "")
    except Exception:  # noqa: BLE001
        return None
    return jar[name].value if name in jar else None


def _secure() -> str:
    return "; Secure" if settings().app_url.startswith("https://") else ""


def _page(title: str, body: str, status: int = 200) -> Response:
    return Response(body=render(title, body, wide=True), status_code=status, headers=dict(HTML_HEADERS))


def _signin_redirect(path: str) -> Response:
    location, state = shell.begin(path)
    return Response(body="", status_code=302, headers={
        "Location": location, "Cache-Control": "no-store",
        "Set-Cookie": f"{shell.STATE_COOKIE}={state}; Path=/callback; HttpOnly; SameSite=Lax; Max-Age=600{_secure()}"})


def _show(ctx: Ctx, path: str) -> Response:
    token = _cookie(ctx, shell.TOKEN_COOKIE)
    try:
        me = shell.whoami(token) if token else None
    except http_client.ProviderError:
        return _page("Unavailable", '<p class="error" role="alert">The platform API is not reachable.</p>', 503)
    if me is None:
        return _signin_redirect(path)
    ws = me.get("workspace") or {"name": "(none yet: create one or accept an invitation)"}
    rows = [("E-mail", me.get("email")), ("User", me.get("user_id")), ("Workspace", ws.get("name")),
            ("Roles", ", ".join(me.get("roles") or [])), ("Signed in with (amr)", ", ".join(me.get("amr") or [])),
            ("Page", path)]
    items = "".join(f"<dt>{html.escape(k)}</dt><dd id=\"me-{html.escape(k.split()[0].lower())}\">"
                    f"{html.escape(str(v or ''))}</dd>" for k, v in rows)
    body = (f'<p>You are signed in as <strong id="who">{html.escape(str(me.get("email")))}</strong>.</p>'
            f"<dl>{items}</dl>"
            f'<p><a href="{html.escape(settings().auth_url)}/account">Security settings</a></p>')
    return _page("AI Platform", body)


@api.route("/static/{name}", public=True)
def static(ctx: Ctx, name: str) -> Any:
    found = static_file(name)
    if found is None:
        return Response(body="", status_code=404, headers={"Cache-Control": "no-store"})
    return Response(body=found[0], status_code=200, headers={"Content-Type": f"{found[1]}; charset=utf-8",
                                                             "Cache-Control": "public, max-age=300"})


@api.route("/", public=True)
def home(ctx: Ctx) -> Any:
    return _show(ctx, "/")


def _any_page(ctx: Ctx, **segments: str) -> Any:
    query = ctx.request.query_params or {}
    path = "/" + "/".join(segments[k] for k in sorted(segments))
    if query:
        path += "?" + urlencode(query)
    return _show(ctx, shell.safe_path(path))


# Every page up to four segments deep needs a signed-in visitor (Chalice's greedy ``{proxy+}`` is not
# served by ``chalice local``, so the depths are spelled out).
for _depth in range(1, 5):
    _names = [f"s{i}" for i in range(_depth)]

    def _page_view(ctx: Ctx, **segments: str) -> Any:
        return _any_page(ctx, **segments)

    _page_view.__name__ = _page_view.__qualname__ = f"page_depth_{_depth}"
    api.route("/" + "/".join("{" + n + "}" for n in _names), public=True)(_page_view)


@api.route("/callback", public=True)
def callback(ctx: Ctx) -> Any:
    q = ctx.query
    if q.get("error"):
        return _page("Sign-in", f'<p class="error" role="alert">Sign-in was not completed: '
                                f'{html.escape(q.get("error", ""))}.</p><p><a href="/">Try again</a></p>', 400)
    try:
        done = shell.finish(q.get("state") or "", _cookie(ctx, shell.STATE_COOKIE), q.get("code") or "")
    except shell.ShellError as err:
        return _page("Sign-in", f'<p class="error" role="alert">{html.escape(str(err))}</p>'
                                '<p><a href="/">Start again</a></p>', 400)
    return Response(body="", status_code=302, headers={
        "Location": done.path, "Cache-Control": "no-store",
        "Set-Cookie": f"{shell.TOKEN_COOKIE}={done.access_token}; Path=/; HttpOnly; SameSite=Lax; "
                      f"Max-Age={done.expires_in}{_secure()}"})
