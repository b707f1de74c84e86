"""Schemathesis fuzzes the identity service's OAuth / OIDC endpoints against their OpenAPI document
(``chalicelib/identity/openapi.yaml``) on the running stack: every check (server errors, status codes,
content types, response schemas, undeclared methods, schema-valid requests accepted, invalid ones
rejected) over the examples, coverage and fuzzing phases, deterministic and bounded in time.

The sign-in and account paths (cookie sessions, CSRF, rate limits) are not fuzzed yet.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conformance import run_schemathesis
from tests.integration.conftest import RunningPlatform

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).with_name("schemathesis.toml")
OAUTH_PATHS = r"^/(oauth2/(token|introspect|revoke|authorize)|userinfo|\.well-known/.*|v1/openapi\.json)$"


@pytest.mark.timeout(600)  # the run itself is bounded by --max-time; the first test also starts the stack
def test_identity_oauth_endpoints_conform_to_their_document(platform: RunningPlatform, tmp_path: Path) -> None:
    done = run_schemathesis(platform.urls["identity"] + "/v1/openapi.json", CONFIG, None, tmp_path,
                            "--include-path-regex", OAUTH_PATHS)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
