"""Each group's OpenAPI document, as served at /v1/openapi.json, describes exactly the group's routes with
each operation's permission as in the one permission map, resolves every reference and is valid OpenAPI."""
from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.groups import create_app, route_permissions

METHODS = {"get", "post", "put", "patch", "delete"}
SERVERS = {"platform": lambda: settings().base_url, "identity": lambda: settings().auth_url,
           "gateway": lambda: None}


def served(group: str) -> dict[str, Any]:
    # compute settings outside the request: Chalice's test client applies .chalice/config.json's environment
    # (RESOURCE_PREFIX=aiplat) while it serves a request, and settings are cached on first use
    settings()
    with Client(create_app(group)) as client:
        r = client.http.get("/v1/openapi.json")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    return json.loads(r.body)


def refs(node: object) -> list[str]:
    """Every ``$ref`` value in a document."""
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


@pytest.mark.parametrize("group", sorted(SERVERS))
def test_document_and_routes_are_in_step(group: str) -> None:
    doc = served(group)
    routes = {(m, p) for p, methods in create_app(group).routes.items() for m in methods}
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops if m in METHODS}
    assert routes - documented == set(), f"routes missing from {group}'s OpenAPI document"
    assert documented - routes == set(), f"{group}'s OpenAPI document names routes that do not exist"
    for method, path in routes:
        op = doc["paths"][path][method.lower()]
        assert op["x-permission"] == route_permissions()[(group, path, method)], (method, path)
        assert op.get("responses"), (method, path)
        assert op.get("summary"), (method, path)
        if op["x-permission"] != "public":
            assert "401" in op["responses"], (method, path)
    expected_server = SERVERS[group]()
    if expected_server:
        assert doc["servers"][0]["url"] == expected_server


@pytest.mark.parametrize("group", sorted(SERVERS))
def test_every_reference_resolves_and_the_document_is_valid(group: str) -> None:
    from openapi_spec_validator import validate

    doc = served(group)
    for ref in refs(doc):
        target = doc
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
    assert doc["openapi"].startswith("3.")
    validate(doc)
