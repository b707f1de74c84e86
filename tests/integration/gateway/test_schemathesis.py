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


# POST /mcp accepts only access tokens issued for its own resource (RFC 8707 resource = {gateway_url}/mcp)
# and refuses the service-api token of every other operation with 401 by design: it gets a run of its own,
# with an MCP token of the same demo Admin.
MCP_OPERATION = "POST /mcp"


@pytest.mark.timeout(1800)  # the stack's start, then the two runs (SAFETY_TIMEOUT_SECONDS each)
def test_data_gateway_conforms_to_its_document(own_platform: RunningPlatform, tmp_path: Path) -> None:  # noqa: F811
    document = own_platform.urls["gateway"] + "/v1/openapi.json"
    (rest_dir := tmp_path / "rest").mkdir()
    (mcp_dir := tmp_path / "mcp").mkdir()
    rest = run_schemathesis(document, CONFIG, demo_access_token(own_platform), rest_dir,
                            "--exclude-name", MCP_OPERATION)
    mcp = run_schemathesis(document, CONFIG, demo_access_token(own_platform, "--mcp"), mcp_dir,
                           "--include-name", MCP_OPERATION)
    print(rest.stdout[-2500:], mcp.stdout[-2500:])  # the summaries: operations, phases, case counts (-rP)
    assert rest.returncode == 0, rest.stdout[-8000:] + rest.stderr[-2000:]
    assert mcp.returncode == 0, mcp.stdout[-8000:] + mcp.stderr[-2000:]
