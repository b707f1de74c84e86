"""The shell of a signed-in page carries the frame's workspace list, asked of the platform with the session's
token while the shell is served (``webapp/prefetch.py``): the real platform group on a local server (as
`make run` serves it), and a loopback peer for the answers that must be left out (an error, a body that is
not JSON, an answer later than the budget)."""
from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from html import unescape
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.core.http import outbound
from chalicelib.groups import create_app
from chalicelib.webapp import prefetch, session
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.local_http import send_body, serve, serve_group, stop, url_of


def _prefetched(html: str) -> dict[str, Any] | None:
    found = re.search(r' data-prefetched="([^"]*)"', html)
    return json.loads(unescape(found.group(1))) if found else None


def _shell(tenant: Tenant, path: str = "/") -> str:
    r = Client(create_app("app")).http.get(path, headers={"Cookie": f"{session.ACCESS}={tenant.token}"})
    assert r.status_code == 200
    return r.body.decode()


def _base_url(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("BASE_URL", url)
    settings.cache_clear()


@pytest.fixture
def platform_server(stack: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The platform group served on a loopback port, the app's ``BASE_URL`` pointing at it."""
    server = serve_group("platform")
    _base_url(monkeypatch, url_of(server.server))
    yield settings().base_url
    stop(server.server)
    settings.cache_clear()


def test_the_shell_carries_the_frames_workspace_list_as_the_platform_answers_it(platform_server: str) -> None:
    tenant = make_tenant("prefetch@example.com", name="Prefetched")
    for path in ("/", "/settings", "/knowledge"):
        carried = _prefetched(_shell(tenant, path))
        assert carried is not None and list(carried) == [prefetch.ADDRESS], path
        asked = Client(create_app("platform")).http.get("/v1/workspaces?limit=200", headers=bearer(tenant.token))
        assert carried[prefetch.ADDRESS] == asked.json_body
        assert [w["id"] for w in carried[prefetch.ADDRESS]["workspaces"]] == [tenant.workspace_id]
    r = Client(create_app("app")).http.get("/", headers={"Cookie": f"{session.ACCESS}={tenant.token}"})
    assert r.headers["Cache-Control"] == "no-store"  # the user's own data: never kept by a cache
    html = r.body.decode()
    assert tenant.token not in html and tenant.token.split(".")[2] not in html  # the token never reaches the page


def test_only_the_sessions_own_workspaces_are_carried(platform_server: str) -> None:
    mine = make_tenant("mine@example.com", name="Mine")
    make_tenant("theirs@example.com", name="Theirs")
    carried = _prefetched(_shell(mine))
    assert carried is not None
    assert {w["name"] for w in carried[prefetch.ADDRESS]["workspaces"]} == {"Mine"}


def test_hostile_workspace_names_stay_data_inside_the_attribute(platform_server: str) -> None:
    tenant = make_tenant("hostile@example.com", name='"><script>alert(1)</script><x a=\'')
    html = _shell(tenant)
    assert "<script>alert" not in html and html.count("<script") == 1  # main.js only
    carried = _prefetched(html)
    assert carried and carried[prefetch.ADDRESS]["workspaces"][0]["name"] == '"><script>alert(1)</script><x a=\''


class _Peer:
    """A platform stand-in answering every GET the way ``mode`` says, remembering the Authorization it got."""

    def __init__(self, mode: str) -> None:
        self.mode, self.authorization = mode, None
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                peer.authorization = self.headers.get("Authorization")
                if peer.mode == "error":
                    send_body(self, {"title": "Internal Server Error"}, 500, "application/problem+json")
                elif peer.mode == "not_json":
                    send_body(self, b"<html>maintenance</html>", 200, "text/html")
                elif peer.mode == "late":
                    time.sleep(1.0)
                    send_body(self, {"workspaces": []})
                else:
                    send_body(self, {"workspaces": [], "next_cursor": None})

        self.server = serve(Handler)


@pytest.mark.parametrize("mode", ["error", "not_json", "late"])
def test_an_answer_that_is_not_a_timely_200_with_json_is_left_to_the_page(
        stack: None, tenant: Tenant, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    peer = _Peer(mode)
    try:
        _base_url(monkeypatch, url_of(peer.server))
        monkeypatch.setattr(prefetch, "TIMEOUTS", outbound.Timeouts(connect=0.5, read=0.3, total=0.3))
        started = time.monotonic()
        html = _shell(tenant)
        assert _prefetched(html) is None
        assert 'data-claims="' in html  # the shell is served all the same
        assert time.monotonic() - started < 5
        assert peer.authorization == f"Bearer {tenant.token}"  # asked with the session's own token
    finally:
        stop(peer.server)
        settings.cache_clear()


def test_an_unreachable_platform_leaves_the_shell_as_it_was(stack: None, tenant: Tenant,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    peer = _Peer("ok")
    address = url_of(peer.server)
    stop(peer.server)  # nothing listens there now
    _base_url(monkeypatch, address)
    try:
        html = _shell(tenant)
        assert _prefetched(html) is None and 'data-claims="' in html
    finally:
        settings.cache_clear()
