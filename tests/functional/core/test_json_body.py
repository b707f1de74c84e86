"""Deeply nested JSON is a 400, never a 500 (RecursionError), on every JSON route of every group.

The routes are read from each group's route table, so a route added later is covered without edits."""
from __future__ import annotations

import importlib
import json
import re
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core.http import json_body
from chalicelib.core.http.api import JSON
from chalicelib.core.http.errors import PROBLEM_CONTENT_TYPE, ApiError
from chalicelib.groups import GROUPS, create_app
from tests.functional.conftest import Tenant, bearer

DEEP = ("[" * 5000 + "]" * 5000, '{"a":' * 5000 + "1" + "}" * 5000, '{"q":' + "[" * 5000 + "]" * 5000 + "}")
BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def json_routes() -> list[tuple[str, str, str]]:
    """(group, method, path) of every route that accepts a JSON body, from the route table."""
    out = []
    for group, modules in GROUPS.items():
        for module in modules:
            for route in importlib.import_module(module).api.routes:
                if JSON in route.content_types:
                    out.extend((group, m, route.path) for m in route.methods if m in BODY_METHODS)
    return sorted(set(out))


ROUTES = json_routes()
# Surfaces whose protocol fixes the error shape: GraphQL ``errors``, RFC 7591 ``error``, JSON-RPC ``error``
# (or problem+json for its HTTP-level refusals: 401, 405), OpenAI's ``error`` object.
OWN_ERROR_SHAPES = {
    "/graphql": lambda body: bool(body["errors"]),
    "/oauth2/register": lambda body: isinstance(body["error"], str),
    "/mcp": lambda body: isinstance(body.get("error"), dict) or bool(body.get("code") and body.get("correlation_id")),
    "/v1/chat/completions": lambda body: isinstance(body["error"]["message"], str),
}
SCIM = "/scim/v2/"  # RFC 7644's error message (``application/scim+json``) on every SCIM route


def own_error_shape(path: str) -> Any:
    """The check of a protocol's own error body for ``path``, or None for problem+json."""
    if path.startswith(SCIM):
        return lambda body: "urn:ietf:params:scim:api:messages:2.0:Error" in body["schemas"] and body["status"]
    return OWN_ERROR_SHAPES.get(path)


def test_the_route_table_has_json_routes() -> None:
    assert len(ROUTES) >= 20, ROUTES


@pytest.mark.parametrize("authenticated", [True, False], ids=["admin", "anonymous"])
def test_nested_json_is_400_on_every_json_route(tenant: Tenant, authenticated: bool) -> None:
    answered: dict[str, list[str]] = {}
    for group in sorted({g for g, _, _ in ROUTES}):
        with Client(create_app(group)) as client:
            for _, method, path in (r for r in ROUTES if r[0] == group):
                url = re.sub(r"\{workspace_id\}", tenant.workspace_id, path)
                url = re.sub(r"\{[^}]+\}", "x", url)
                for body in DEEP:
                    headers = {"Content-Type": JSON, **(bearer(tenant.token) if authenticated else {})}
                    r = client.http.request(method, url, headers=headers, body=body.encode())
                    where = f"{method} {path}"
                    assert r.status_code < 500, (where, r.status_code, r.body[:200])
                    if r.status_code < 400:  # a route that never reads its body (e.g. passkey options)
                        answered.setdefault("ignored", []).append(where)
                    elif own_error_shape(path):  # protocols that answer in their own error shape
                        assert own_error_shape(path)(json.loads(r.body)), (where, r.body[:200])
                    else:
                        assert r.headers["Content-Type"] == PROBLEM_CONTENT_TYPE, where
                        problem = json.loads(r.body)
                        assert problem["status"] == r.status_code, where
                        assert problem["correlation_id"], where
                        answered.setdefault(problem["code"], []).append(where)
    if authenticated:  # an Admin's request reaches body parsing on the workspace's own routes
        assert len(answered.get("json_too_deep", [])) >= 10, answered
    assert "internal_error" not in answered
    assert len(answered.get("ignored", [])) <= 3 * 2, answered["ignored"]  # at most two such routes


@pytest.mark.parametrize("raw,depth", [(b"{}", 1), (b"[[], [[]]]", 3), (b'{"a": "[[[[{{{{"}', 1),
                                       (b'["\\"[[["]', 1), (b"1", 0)])
def test_depth_ignores_brackets_inside_strings(raw: bytes, depth: int) -> None:
    assert json_body.nesting_depth(raw) == depth


def test_limit_is_inclusive_and_malformed_is_still_malformed() -> None:
    at_limit = "[" * json_body.MAX_DEPTH + "]" * json_body.MAX_DEPTH
    assert json_body.parse(at_limit) is not None
    with pytest.raises(ApiError) as err:
        json_body.parse("[" + at_limit + "]")
    assert (err.value.status, err.value.code) == (400, "json_too_deep")
    with pytest.raises(ApiError) as err:
        json_body.parse(b'{"a": ')
    assert err.value.code == "malformed_json"
