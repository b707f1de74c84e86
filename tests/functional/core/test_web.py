"""Shared HTTP conventions: problem+json for every error, correlation IDs, permission map coverage."""
from __future__ import annotations

import json
import logging

import pytest
from chalice.test import Client

from chalicelib.groups import GROUPS, create_app, route_permissions
from tests.functional.conftest import Tenant, bearer


def test_method_not_allowed_is_problem_json(tenant: Tenant) -> None:
    with Client(create_app("platform")) as c:
        r = c.http.delete("/v1/me", headers=bearer(tenant.token))
    assert r.status_code == 405
    assert r.headers["Content-Type"] == "application/problem+json"
    assert json.loads(r.body)["code"] == "method_not_allowed"


def test_unsupported_media_type_is_problem_json(stack: None) -> None:
    with Client(create_app("identity")) as c:
        r = c.http.post("/oauth2/introspect", headers={"Content-Type": "text/xml"}, body="<x/>")
    assert r.status_code == 415
    assert json.loads(r.body)["code"] == "unsupported_media_type"


def test_repeated_form_parameter_refused(stack: None) -> None:
    with Client(create_app("identity")) as c:
        r = c.http.post("/oauth2/token", headers={"Content-Type": "application/x-www-form-urlencoded"},
                        body="grant_type=a&grant_type=b")
    assert r.status_code == 400
    assert json.loads(r.body)["error"] == "invalid_request"  # RFC 6749 section 5.2 JSON


@pytest.mark.parametrize("given,echoed", [("req-12345678", True), ("bad id with spaces", False),
                                          ("x" * 200, False), ("short", False)])
def test_correlation_id_validated_and_echoed(tenant: Tenant, given: str, echoed: bool) -> None:
    with Client(create_app("platform")) as c:
        r = c.http.get("/v1/me", headers={**bearer(tenant.token), "X-Correlation-Id": given})
    assert r.status_code == 200
    assert (r.headers["X-Correlation-Id"] == given) is echoed
    assert len(r.headers["X-Correlation-Id"]) >= 8


def test_log_lines_are_json_with_correlation_id_and_no_token(tenant: Tenant, capsys: pytest.CaptureFixture[str]) -> None:
    from chalicelib.core.logs import get_logger

    with Client(create_app("platform")) as c:
        c.http.get("/v1/me", headers={**bearer(tenant.token), "X-Correlation-Id": "log-check-123"})
        get_logger("test").info("after request")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert any(line["correlation_id"] == "log-check-123" for line in lines)
    assert tenant.token not in json.dumps(lines)


def test_unhandled_error_is_plain_500_without_internals(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    from chalicelib.platform import me

    def boom(principal: object) -> None:
        raise KeyError("aiplat-test-workspaces secret internal name")

    monkeypatch.setattr(me, "describe", boom)
    logging.getLogger("aiplat-svc").handlers[0].setLevel(logging.CRITICAL)
    try:
        with Client(create_app("platform")) as c:
            r = c.http.get("/v1/me", headers=bearer(tenant.token))
    finally:
        logging.getLogger("aiplat-svc").handlers[0].setLevel(logging.NOTSET)
    assert r.status_code == 500
    assert json.loads(r.body)["code"] == "internal_error"
    assert b"secret" not in r.body
    assert b"Traceback" not in r.body


def test_every_route_declares_a_known_permission_or_is_public() -> None:
    from chalicelib.core.authz import AUTHENTICATED, PERMISSIONS

    for group in GROUPS:
        create_app(group)
    assert route_permissions(), "no routes registered"
    for (group, path, method), permission in route_permissions().items():
        assert permission in {"public", AUTHENTICATED} or permission in PERMISSIONS, (group, path, method, permission)


def test_each_group_serves_only_its_routes() -> None:
    identity = create_app("identity").routes
    platform = create_app("platform").routes
    assert "/.well-known/jwks.json" in identity
    assert "/.well-known/jwks.json" not in platform
    assert "/v1/me" in platform
    assert "/v1/me" not in identity
    assert create_app("workers").routes == {}


def test_a_view_reads_its_own_request_while_another_request_replaces_current_request(tenant: Tenant) -> None:
    """The threaded local server shares ``app.current_request`` between concurrent requests: a request
    without credentials must not be answered with the token of another request that arrived meanwhile."""
    import copy

    from chalice.app import CaseInsensitiveMapping

    app = create_app("platform")

    @app.middleware("http")
    def another_request_arrives(event, get_response):  # type: ignore[no-untyped-def]
        other = copy.copy(event)
        other.headers = CaseInsensitiveMapping(bearer(tenant.token))
        app.current_request = other  # what a second server thread does before this view runs
        return get_response(event)

    with Client(app) as c:
        anonymous = c.http.get("/v1/me")
        signed_in = c.http.get("/v1/me", headers=bearer(tenant.token))
    assert anonymous.status_code == 401, anonymous.body
    assert signed_in.status_code == 200
