"""Schemathesis fuzzes the data gateway against its OpenAPI document (``chalicelib/gateway/api/openapi.json``,
served at ``/v1/openapi.json``) on a stack of its own: every check, examples + coverage + fuzzing,
deterministic, bounded by case counts (``tests/integration/conformance.py``; exceptions with their reasons in
``schemathesis.toml`` beside this file)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conformance import demo_access_token, own_platform, run_schemathesis  # noqa: F401
from tests.integration.conftest import RunningPlatform

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).with_name("schemathesis.toml")


@pytest.mark.timeout(1200)  # the stack's start, then the run (SAFETY_TIMEOUT_SECONDS)
def test_data_gateway_conforms_to_its_document(own_platform: RunningPlatform, tmp_path: Path) -> None:  # noqa: F811
    done = run_schemathesis(own_platform.urls["gateway"] + "/v1/openapi.json", CONFIG,
                            demo_access_token(own_platform), tmp_path)
    print(done.stdout[-2500:])  # the summary: operations, phases and case counts (shown with -rP)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
