"""The OpenAPI document served at /v1/openapi.json describes exactly the identity group's routes,
with each operation's permission as in the one permission map."""
from __future__ import annotations

import json

from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.core.web import ROUTE_PERMISSIONS
from chalicelib.groups import create_app

METHODS = {"get", "post", "put", "patch", "delete"}


def _served() -> dict:
    # compute settings outside the request: Chalice's test client applies .chalice/config.json's environment
    # (RESOURCE_PREFIX=aiplat) while it serves a request, and settings are cached on first use
    settings()
    with Client(create_app("identity")) as client:
        r = client.http.get("/v1/openapi.json")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    return json.loads(r.body)


def test_document_and_routes_are_in_step() -> None:
    doc = _served()
    app = create_app("identity")
    routes = {(m, p) for p, methods in app.routes.items() for m in methods}
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops if m in METHODS}
    assert routes - documented == set(), "routes missing from identity/openapi.yaml"
    assert documented - routes == set(), "identity/openapi.yaml documents routes that do not exist"
    for method, path in routes:
        op = doc["paths"][path][method.lower()]
        assert op["x-permission"] == ROUTE_PERMISSIONS[("identity", path, method)], (method, path)
        assert op.get("responses")
        assert op.get("summary")
        if op["x-permission"] != "public":
            assert "401" in op["responses"], (method, path)
    # the OAuth endpoints that parse forms say so, and their errors are RFC 6749 JSON, not problem+json
    for path in ("/oauth2/token", "/oauth2/introspect", "/oauth2/revoke"):
        op = doc["paths"][path]["post"]
        assert list(op["requestBody"]["content"]) == ["application/x-www-form-urlencoded"]
        assert op["responses"]["400"] == {"$ref": "#/components/responses/OAuthError"}
    assert doc["servers"][0]["url"] == settings().auth_url


def test_every_reference_resolves() -> None:
    doc = _served()

    def refs(node):  # type: ignore[no-untyped-def]
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "$ref":
                    yield v
                else:
                    yield from refs(v)
        elif isinstance(node, list):
            for v in node:
                yield from refs(v)

    for ref in refs(doc):
        target = doc
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
    assert doc["openapi"].startswith("3.1")


def test_document_is_valid_openapi() -> None:
    from openapi_spec_validator import validate

    validate(_served())
