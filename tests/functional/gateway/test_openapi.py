"""The gateway's OpenAPI document agrees with the registered routes and their permissions; the
gateway app loads without graphql-core or duckdb."""
from __future__ import annotations

import json
import subprocess
import sys

from chalice.test import Client

from chalicelib.gateway.api.read_routes import OPENAPI_PATH
from chalicelib.groups import create_app, route_permissions
from tests.functional.core.test_openapi import refs


def test_openapi_document_matches_routes_and_permissions() -> None:
    app = create_app("gateway")
    doc = json.loads(OPENAPI_PATH.read_text())
    documented = {(path, method.upper()): op["x-permission"] for path, ops in doc["paths"].items()
                  for method, op in ops.items()}
    registered = {(path, method): perm for (group, path, method), perm in route_permissions().items()
                  if group == "gateway"}
    assert documented == registered
    served = {(path, method) for path, entry in app.routes.items() for method in entry}
    assert served == set(registered)
    for (path, method), perm in registered.items():
        op = doc["paths"][path][method.lower()]
        assert (op.get("security") == []) == (perm == "public"), (path, method)
        declared = {p["name"] for p in op["parameters"] if p["in"] == "path"}
        assert declared == {seg[1:-1] for seg in path.split("/") if seg.startswith("{")}, (path, method)
    for ref in refs(doc):
        assert ref.split("/")[-1] in doc["components"]["schemas"], ref


def test_openapi_is_served_publicly() -> None:
    with Client(create_app("gateway")) as client:
        r = client.http.get("/v1/openapi.json")
    assert r.status_code == 200
    assert json.loads(r.body)["paths"]["/v1/query"]["post"]["x-permission"] == "knowledge.read"


def test_gateway_app_does_not_import_graphql_or_duckdb_at_load() -> None:
    code = ("import sys; from chalicelib.groups import create_app; create_app('gateway'); "
            "print(sorted(m for m in ('graphql', 'duckdb') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
