"""Schemathesis fuzzes the identity service's OAuth / OIDC endpoints against their OpenAPI document
(``chalicelib/identity/openapi.yaml``) on the running stack: every check (server errors, status codes,
content types, response schemas, undeclared methods, schema-valid requests accepted, invalid ones
rejected) over the examples, coverage and fuzzing phases, deterministic and bounded in time.

The sign-in and account paths (cookie sessions, CSRF, rate limits) are not fuzzed yet.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, RunningPlatform

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).with_name("schemathesis.toml")
OAUTH_PATHS = r"^/(oauth2/(token|introspect|revoke|authorize)|userinfo|\.well-known/.*|v1/openapi\.json)$"


@pytest.mark.timeout(600)  # the run itself is bounded by --max-time; the first test also starts the stack
def test_identity_oauth_endpoints_conform_to_their_document(platform: RunningPlatform, tmp_path: Path) -> None:
    st = shutil.which("schemathesis", path=str(ROOT / ".venv" / "bin"))
    assert st, "schemathesis is pinned in requirements-dev.txt"
    done = subprocess.run(
        [st, "--config-file", str(CONFIG), "run", platform.urls["identity"] + "/v1/openapi.json",
         "--checks", "all", "--phases", "examples,coverage,fuzzing", "--max-examples", "10",
         "--generation-deterministic", "--max-time", "120", "--include-path-regex", OAUTH_PATHS,
         "--no-color", "--report", "junit", "--report-dir", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)  # its cache stays out of the tree
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
