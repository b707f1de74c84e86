"""`make run`'s platform over real HTTP: discovery, JWKS and /me are served; run.json is complete."""
from __future__ import annotations

import requests

from tests.integration.conftest import RunningPlatform


def test_run_json_has_urls_and_demo_details(platform: RunningPlatform) -> None:
    assert set(platform.urls) >= {"platform", "gateway", "identity", "app", "aws_endpoint"}
    assert {"email", "api_token", "workspace_id"} <= set(platform.demo)
    assert oct((platform.state_dir / "run.json").stat().st_mode)[-3:] == "600"


def test_discovery_and_jwks_are_served(platform: RunningPlatform) -> None:
    doc = requests.get(platform.urls["identity"] + "/.well-known/openid-configuration", timeout=10).json()
    assert doc["issuer"] == platform.urls["identity"]
    jwks = requests.get(doc["jwks_uri"], timeout=10).json()
    assert jwks["keys"]
    assert all(k["kty"] == "RSA" and k["alg"] == "RS256" and k["use"] == "sig" for k in jwks["keys"])


def test_me_with_demo_token_and_correlation_echo(platform: RunningPlatform) -> None:
    r = requests.get(platform.urls["platform"] + "/me", timeout=10, headers={
        "Authorization": f"Bearer {platform.demo['api_token']}", "X-Correlation-Id": "it-test-0001"})
    assert r.status_code == 200
    assert r.headers["X-Correlation-Id"] == "it-test-0001"
    assert r.json()["workspace_id"] == platform.demo["workspace_id"]


def test_me_without_token_is_problem_json(platform: RunningPlatform) -> None:
    r = requests.get(platform.urls["platform"] + "/me", timeout=10)
    assert r.status_code == 401
    assert r.headers["Content-Type"] == "application/problem+json"
    assert r.json()["code"] == "invalid_token"


def test_resources_exist_in_both_regions(platform: RunningPlatform) -> None:
    for region in ("us-east-1", "eu-central-1"):
        tables = platform.aws("dynamodb", region).list_tables()["TableNames"]
        assert "aiplat-audit_events" in tables
        queues = platform.aws("sqs", region).list_queues().get("QueueUrls", [])
        assert any(q.endswith("aiplat-sync-jobs-dlq") for q in queues)
