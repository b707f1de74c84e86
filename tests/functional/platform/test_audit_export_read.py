"""GET /v1/audit/exports/{export_id}: the export verified again with a short-lived download link; a
tampered archive reports failure; another workspace's export id answers 404 and reveals nothing."""
from __future__ import annotations

import urllib.parse

import pytest
from chalice.test import Client

from chalicelib.core import aws
from chalicelib.groups import create_app
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.platform.audit_jobs import run_export_job
from tests.functional.platform.helpers import call


@pytest.fixture
def client() -> Client:
    return Client(create_app("platform"))


def test_export_read_back_verified_with_download_link(tenant: Tenant, client: Client) -> None:
    status, exp, _ = call(client, "POST", "/v1/audit/exports", tenant.token, {})
    assert status == 202, exp
    assert call(client, "GET", f"/v1/audit/exports/{exp['id']}", tenant.token)[0] == 404  # not written yet
    run_export_job(tenant.region)
    status, got, _ = call(client, "GET", f"/v1/audit/exports/{exp['id']}", tenant.token)
    assert status == 200, got
    assert got["verification"]["ok"] is True
    assert got["verification"]["problems"] == []
    assert got["count"] == exp["count"]
    assert len(got["events_sha256"]) == 64
    url = urllib.parse.urlsplit(got["download_url"])
    assert url.path.endswith(f"/exports/{tenant.workspace_id}/{exp['id']}/events.jsonl")
    query = urllib.parse.parse_qs(url.query)
    assert query.get("X-Amz-Expires") == ["300"] or "Expires" in query  # SigV4 or SigV2 presigning


def test_tampered_export_reports_failure(tenant: Tenant, client: Client) -> None:
    _, exp, _ = call(client, "POST", "/v1/audit/exports", tenant.token, {})
    run_export_job(tenant.region)
    s3 = aws.client("s3", tenant.region)
    # Object Lock keeps the version; a new version on top is what an attacker with write access could add
    s3.put_object(Bucket=exp["bucket"], Key=exp["events_key"], Body=b'{"forged": true}\n')
    status, got, _ = call(client, "GET", f"/v1/audit/exports/{exp['id']}", tenant.token)
    assert status == 200
    assert got["verification"]["ok"] is False
    assert got["verification"]["problems"]


def test_other_workspace_export_is_404(tenant: Tenant, client: Client) -> None:
    _, exp, _ = call(client, "POST", "/v1/audit/exports", tenant.token, {})
    run_export_job(tenant.region)
    other = make_tenant("intruder@example.org", name="Other")
    for export_id in (exp["id"], "exp_..%2F..%2Fx", "../" + exp["id"], "exp_" + "A" * 60):
        status, body, _ = call(client, "GET", f"/v1/audit/exports/{export_id}", other.token)
        assert status in (403, 404), (export_id, status, body)
        assert exp["id"] not in str(body)
        assert tenant.workspace_id not in str(body)
