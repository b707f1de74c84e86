"""`make run`'s logs never hold a query string: OAuth codes, reset links' tokens and any other secret
sent in a URL leave no trace, neither in the access lines nor in the HTTP server's own error lines."""
from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import requests

from infra.local_run import redact
from tests.integration.conftest import RunningPlatform

SECRETS = {"code": "oauthcodeSECRET4242", "token": "resettokenSECRET4242", "access_token": "bearerSECRET4242"}
QUERY = "&".join(f"{k}={v}" for k, v in SECRETS.items())


def _lines(platform: RunningPlatform) -> str:
    return (platform.state_dir / "platform.log").read_text(errors="replace")


def test_requests_with_secrets_in_the_query_leave_no_trace(platform: RunningPlatform) -> None:
    token = platform.demo["api_token"]
    paths = [
        (platform.urls["identity"], "/oauth2/authorize"),
        (platform.urls["identity"], "/signin/reset"),
        (platform.urls["platform"], "/me"),
        (platform.urls["gateway"], "/v1/catalog/datasets"),
        (platform.urls["app"], "/"),
        (platform.urls["platform"], "/no-such-route"),
    ]
    for base, path in paths:
        r = requests.get(f"{base}{path}?{QUERY}", headers={"Authorization": f"Bearer {token}"},
                         allow_redirects=False, timeout=30)
        assert r.status_code < 500, (path, r.status_code)
    # a request line the HTTP server itself refuses (it logs such errors with the request line)
    host, port = urlsplit(platform.urls["identity"]).hostname, urlsplit(platform.urls["identity"]).port
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(f"GET /signin/reset?{QUERY} HTTP/1.1 extra-word\r\nHost: x\r\n\r\n".encode())
        assert b" 400 " in s.recv(1024).split(b"\r\n", 1)[0]
    # the marker request is logged last: once its line is there, every line before it is too
    marker = requests.get(f"{platform.urls['platform']}/me?marker=1", timeout=30)
    assert marker.status_code == 401
    deadline = time.monotonic() + 30
    while marker.headers["X-Correlation-Id"] not in _lines(platform) and time.monotonic() < deadline:
        time.sleep(0.1)
    text = _lines(platform)
    assert marker.headers["X-Correlation-Id"] in text  # access lines are written...
    for secret in (*SECRETS.values(), token):  # ...but without codes, tokens or query strings
        assert secret not in text
    assert "marker=1" not in text
    access = [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"request"' in line]
    assert any(line.get("path") == "/v1/me" for line in access)
    assert "Bad request version" in text  # the refused request was logged, without its request line


def test_redact_removes_every_query_string() -> None:
    line = "code 400, message Bad request syntax ('GET /cb?code=abc&state=x HTTP/1.1 extra') /a?token=t"
    assert redact(line) == "code 400, message Bad request syntax ('GET /cb?[query omitted] HTTP/1.1 extra') /a?[query omitted]"


def test_a_non_ascii_authorization_header_on_an_unknown_address_gets_the_404_problem(platform: RunningPlatform) -> None:
    """Chalice's local gateway encoded the header as ASCII for its unknown-address answer and dropped the
    connection; API Gateway answers, and so does `make run`."""
    for base in (platform.urls["platform"], platform.urls["gateway"], platform.urls["identity"]):
        host, port = urlsplit(base).hostname, urlsplit(base).port
        for path in ("/no-such-route", "/v1/no/such/route"):
            with socket.create_connection((host, port), timeout=30) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                          f"Authorization: Bearer caf\u00e9\u20ac\r\n\r\n".encode())
                answer = b""
                while chunk := s.recv(4096):
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.split(b"\r\n", 1)[0].endswith(b" 404 Not Found"), (base, path, head)
            assert b"application/problem+json" in head
            assert json.loads(body)["status"] == 404


def _answer_to_headers_only(base: str, path: str, headers: str) -> tuple[bytes, bytes]:
    """The answer to a POST whose headers declare a body that is never sent: the server must answer
    without waiting for (or reading) any of it."""
    host, port = urlsplit(base).hostname, urlsplit(base).port
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        answer = b""
        while chunk := s.recv(4096):  # the server closes the connection after its answer
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


def test_a_declared_body_over_the_cap_is_refused_before_it_is_read(platform: RunningPlatform) -> None:
    """The app's document upload (5 MiB) and every route (API Gateway's 10 MiB) answer 413 on the
    declared length alone: not one byte of the body is sent here, and the answer still comes."""
    head, body = _answer_to_headers_only(platform.urls["app"], "/api/upload/conn_01ABCDEFGHJKMNPQRSTVWXYZ00", (
        f"Content-Type: application/octet-stream\r\nX-Requested-With: app\r\nX-File-Name: big.pdf\r\n"
        f"Content-Length: {6 * 1024 * 1024}\r\n"))
    assert head.split(b"\r\n", 1)[0].endswith(b" 413 Request Entity Too Large"), head
    problem = json.loads(body)
    assert problem["code"] == "too_large" and "big.pdf" in problem["detail"]
    head, body = _answer_to_headers_only(platform.urls["gateway"], "/v1/connectors", (
        f"Content-Type: application/json\r\nContent-Length: {11 * 1024 * 1024}\r\n"))
    assert b" 413 " in head.split(b"\r\n", 1)[0] and json.loads(body)["code"] == "body_too_large"
