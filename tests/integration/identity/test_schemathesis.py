"""Schemathesis fuzzes the identity service against its OpenAPI document (``chalicelib/identity/openapi.yaml``)
on a running stack: every check (server errors, status codes, content types, response schemas,
undeclared methods, schema-valid requests accepted, invalid ones rejected, authentication enforced) over
the examples, coverage and fuzzing phases, deterministic, a fixed number of cases per operation.

Two runs: the OAuth / OIDC endpoints on the shared stack, and every other path (the hosted sign-in API,
the sign-in pages, the account API) on a stack of their own, because that run signs in, sets up
authenticators and creates API tokens for the demo user, and sends thousands of sign-in attempts from
one address: its stack raises the sign-in rate limits (``SIGNIN_LIMIT_FACTOR``) instead of turning them
off. The account paths run signed in (``schemathesis_hooks.py``: a password + TOTP sign-in of the demo
user, its ``aiplat_sid`` cookie; every change also sends ``X-Requested-With``, the CSRF guard).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conformance import SAFETY_TIMEOUT_SECONDS, run_schemathesis
from tests.integration.conftest import RunningPlatform, start_platform, stop_platform

pytestmark = pytest.mark.integration
HERE = Path(__file__).parent
CONFIG = HERE / "schemathesis.toml"
OAUTH_PATHS = r"^/(oauth2/(token|introspect|revoke|authorize)|userinfo|\.well-known/.*|v1/openapi\.json)$"


@pytest.fixture(scope="module")
def signin_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPlatform]:
    """A stack of this module's own, with sign-in and mail limits 1000 times the product's."""
    running = start_platform(tmp_path_factory.mktemp("identity-fuzz-platform"), {"SIGNIN_LIMIT_FACTOR": "1000"})
    try:
        yield running
    finally:
        stop_platform(running)


@pytest.mark.timeout(SAFETY_TIMEOUT_SECONDS + 300)  # the runner's own safety net first; this test may start the stack
def test_identity_oauth_endpoints_conform_to_their_document(platform: RunningPlatform, tmp_path: Path) -> None:
    done = run_schemathesis(platform.urls["identity"] + "/v1/openapi.json", CONFIG, None, tmp_path,
                            "--include-path-regex", OAUTH_PATHS)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.mark.timeout(SAFETY_TIMEOUT_SECONDS + 300)
def test_signin_and_account_endpoints_conform_to_their_document(signin_platform: RunningPlatform, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEMATHESIS_HOOKS", str(HERE / "schemathesis_hooks.py"))
    monkeypatch.setenv("IDENTITY_FUZZ_RUN_JSON", str(signin_platform.state_dir / "run.json"))
    hooks_log = tmp_path / "hooks.log"
    monkeypatch.setenv("IDENTITY_FUZZ_LOG", str(hooks_log))
    done = run_schemathesis(signin_platform.urls["identity"] + "/v1/openapi.json", CONFIG, None, tmp_path,
                            "--exclude-path-regex", OAUTH_PATHS)
    log = hooks_log.read_text() if hooks_log.exists() else "(the hooks never signed in)"
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:] + "\nThe hooks' log:\n" + log
