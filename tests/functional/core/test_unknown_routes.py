"""Unknown addresses and methods on every HTTP group: 404 / 405 problem+json with a correlation ID, and
never a request header echoed back (Chalice's emulation answers 403 "Missing Authentication Token" and
repeats the Authorization header; API Gateway's side is tested in tests/integration/test_packaging.py)."""
from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest
from chalice.test import Client

from chalicelib.groups import HTTP_GROUPS, create_app
from chalicelib.webapp.pages import MAX_DEPTH
from infra.local_run import _request_handler
from tests.local_http import serve_group, stop

SECRET = "Bearer eyJhbGciOiJSUzI1NiJ9.secret-token-value.sig"


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, int]]:
    """The local server of every HTTP group, as `make run` starts it, on an ephemeral port."""
    ports, started = {}, []
    for group in HTTP_GROUPS:
        server = serve_group(group, _request_handler())
        ports[group] = server.server.server_address[1]
        started.append(server)
    yield ports
    for server in started:
        stop(server.server)


def _get(port: int, method: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, headers=headers)
    r = conn.getresponse()
    out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    conn.close()
    return out


@pytest.mark.parametrize("group", HTTP_GROUPS)
@pytest.mark.parametrize("headers", [{}, {"Authorization": SECRET}, {"Authorization": SECRET, "X-Correlation-Id": "probe-1234"}])
def test_unknown_path_is_404_problem_without_echo(servers: dict[str, int], group: str, headers: dict[str, str]) -> None:
    path = "/no" * (MAX_DEPTH + 1)  # deeper than the app shell's own 404 pages (tests/functional/webapp)
    status, got, body = _get(servers[group], "GET", path, headers)
    assert status == 404, body
    assert got["content-type"] == "application/problem+json"
    problem = json.loads(body)
    assert problem["code"] == "not_found"
    assert problem["status"] == 404
    assert problem["correlation_id"] == got["x-correlation-id"]
    if "X-Correlation-Id" in headers:
        assert got["x-correlation-id"] == "probe-1234"
    assert b"secret-token-value" not in body
    assert b"Missing Authentication" not in body
    assert not any("secret-token-value" in v for v in got.values())


def test_wrong_method_is_405_with_allow_and_no_echo(servers: dict[str, int]) -> None:
    status, got, body = _get(servers["platform"], "PUT", "/v1/me", {"Authorization": SECRET})
    assert status == 405
    assert got["content-type"] == "application/problem+json"
    assert got["allow"] == "GET"
    assert json.loads(body)["code"] == "method_not_allowed"
    assert got["x-correlation-id"]
    assert b"secret-token-value" not in body
    assert b"PUT" not in body


def test_in_process_405_lists_every_served_method() -> None:
    with Client(create_app("platform")) as client:
        r = client.http.request("DELETE", "/v1/workspaces", headers={}, body=b"")
    assert r.status_code == 405
    assert r.headers["Allow"] == "GET, POST"
    assert json.loads(r.body)["correlation_id"] == r.headers["X-Correlation-Id"]
