"""The reference GraphQL implementation (npm ``graphql``, peer ``tests/integration/peers/graphql-js``)
loads the gateway's schema over HTTP the way GraphiQL and codegen do: its own
``getIntrospectionQuery()``, with no options and with every option graphql-core serves, is answered
without errors, and ``buildClientSchema`` builds a valid schema from the answer. The answer's media type
follows GraphQL over HTTP (``application/graphql-response+json`` when the Accept header asks for it)."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import requests

from tests.integration.conformance import demo_access_token
from tests.integration.conftest import ROOT, RunningPlatform

pytestmark = pytest.mark.integration
PEER = ROOT / "tests" / "integration" / "peers" / "graphql-js"
# every getIntrospectionQuery option but oneOf (graphql-core 3.2 has no __Type.isOneOf yet)
ALL_OPTIONS = {"descriptions": True, "specifiedByUrl": True, "directiveIsRepeatable": True,
               "schemaDescription": True, "inputValueDeprecation": True}


def _node(*args: str, stdin: str | None = None) -> str:
    if shutil.which("node") is None or not (PEER / "node_modules" / "graphql").is_dir():
        pytest.fail("the graphql-js peer is not installed: run `bash infra/scripts/system_deps.sh`")
    done = subprocess.run(["node", "introspect.mjs", *args], cwd=PEER, input=stdin, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("options", [None, ALL_OPTIONS], ids=["default", "all-options"])
@pytest.mark.parametrize("accept", ["application/graphql-response+json", "application/json"])
def test_graphql_js_introspection_loads_the_schema(platform: RunningPlatform, options: dict | None,
                                                   accept: str) -> None:
    query = _node("query", *([json.dumps(options)] if options else []))
    assert "ofType" in query
    r = requests.post(platform.urls["gateway"] + "/graphql", json={"query": query}, timeout=60,
                      headers={"Authorization": f"Bearer {demo_access_token(platform)}", "Accept": accept})
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].split(";")[0] == accept
    assert "errors" not in r.json(), r.text
    sdl = _node("build", stdin=r.text)
    assert "type Dataset" in sdl
    assert "enum SyncStatus" in sdl
    assert "type Mutation" in sdl
