"""Audit trail: reading with filters and cursor paging, correlation IDs, export with a KMS-signed digest
under Object Lock, verification of the export and the live chain, a modified export failing."""
from __future__ import annotations

import json

import pytest
from chalice.test import Client

from chalicelib.core import audit, aws, clock
from chalicelib.groups import create_app
from chalicelib.platform.audit import cli as audit_cli
from chalicelib.platform.audit import digests as audit_digests
from chalicelib.platform.audit import export as audit_export
from tests.functional.conftest import Tenant
from tests.functional.platform.audit_jobs import run_export_job
from tests.functional.platform.helpers import add_member, call


@pytest.fixture
def client() -> Client:
    return Client(create_app("platform"))


def _report(out: str) -> dict:
    """The CLI's (indented) JSON report; structured log lines may share stdout."""
    return json.loads(out[out.rindex("{\n"):])


def _fill(t: Tenant, n: int) -> None:
    for i in range(n):
        audit.append(t.region, t.workspace_id, "test.even" if i % 2 == 0 else "test.odd",
                     actor=audit.Actor("user", f"usr_{i % 3}", f"u{i % 3}@example.com"), details={"i": i})
        clock.advance(1)


def test_events_in_time_order_with_paging_and_filters(tenant: Tenant, client: Client) -> None:
    start = clock.iso()
    _fill(tenant, 30)
    all_events, cursor = [], None
    while True:
        q = "?limit=7&from=2000-01-01T00:00:00Z" + (f"&after={cursor}" if cursor else "")
        status, body, _ = call(client, "GET", "/v1/audit/events" + q, tenant.token)
        assert status == 200, body
        all_events += body["events"]
        if not body["has_more"]:
            break
        cursor = body["next_cursor"]
    assert len(all_events) == 31  # workspace.created + 30
    assert [e["seq"] for e in all_events] == list(range(1, 32))
    assert [e["occurred_at"] for e in all_events] == sorted(e["occurred_at"] for e in all_events)
    # from: only events at/after; to: before
    status, body, _ = call(client, "GET", f"/v1/audit/events?from={start}&limit=1000", tenant.token)
    assert len(body["events"]) == 30
    mid = all_events[10]["occurred_at"]
    status, body, _ = call(client, "GET", f"/v1/audit/events?to={mid}&limit=1000", tenant.token)
    assert all(e["occurred_at"] < mid for e in body["events"])
    assert len(body["events"]) == 10
    # action filter (exact and prefix) with paging keeps every match exactly once
    got, cursor = [], None
    while True:
        q = "?action=test.odd&limit=4" + (f"&after={cursor}" if cursor else "")
        body = call(client, "GET", "/v1/audit/events" + q, tenant.token)[1]
        got += body["events"]
        if not body["has_more"]:
            break
        cursor = body["next_cursor"]
    assert len(got) == 15
    assert {e["action"] for e in got} == {"test.odd"}
    assert len(call(client, "GET", "/v1/audit/events?action=test.*&limit=1000", tenant.token)[1]["events"]) == 30
    body = call(client, "GET", "/v1/audit/events?actor=usr_1&limit=1000", tenant.token)[1]
    assert len(body["events"]) == 10
    assert {e["actor"]["id"] for e in body["events"]} == {"usr_1"}
    body = call(client, "GET", "/v1/audit/events?actor=U2@example.com&limit=1000", tenant.token)[1]
    assert {e["actor"]["id"] for e in body["events"]} == {"usr_2"}


@pytest.mark.parametrize("query", ["from=yesterday", "from=2026-01-01T00:00:00+24:00", "from=2026-01-01T00:00:00",
                                   "from=2026-01-01", "to=2026-13-01T00:00:00Z", "limit=0", "limit=abc",
                                   "after=garbage", "action=DROP%20TABLE", "actor=%22x", "colour=blue",
                                   "from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z"])
def test_bad_query_is_400(tenant: Tenant, client: Client, query: str) -> None:
    status, body, headers = call(client, "GET", f"/v1/audit/events?{query}", tenant.token)
    assert status == 400, body
    assert headers["Content-Type"] == "application/problem+json"
    assert body["code"] == "validation_failed"


def test_viewer_reads_member_does_not(tenant: Tenant, client: Client) -> None:
    viewer = add_member(tenant.workspace_id, "v@example.com", "viewer")
    member = add_member(tenant.workspace_id, "m@example.com", "member")
    assert call(client, "GET", "/v1/audit/events", viewer.token)[0] == 200
    status, body, _ = call(client, "GET", "/v1/audit/events", member.token)
    assert status == 403
    assert body["code"] == "forbidden"


def test_state_changes_carry_the_callers_correlation_id(tenant: Tenant, client: Client) -> None:
    calls = [
        ("PATCH", f"/v1/workspaces/{tenant.workspace_id}", {"name": "Renamed"}, "workspace.updated"),
        ("POST", f"/v1/workspaces/{tenant.workspace_id}/invitations", {"email": "c@example.com", "role": "member"},
         "invitation.created"),
        ("POST", "/v1/workspaces", {"name": "Second", "residency": "us-east"}, "workspace.created"),
    ]
    for i, (method, path, body, action) in enumerate(calls):
        cid = f"corr-test-{i:04d}"
        status, answer, headers = call(client, method, path, tenant.token, body, headers={"X-Correlation-Id": cid})
        assert status in (200, 201), answer
        assert headers["X-Correlation-Id"] == cid
        ws = answer["id"] if action == "workspace.created" else tenant.workspace_id
        events = [e for e in audit.iter_chain(tenant.region, ws) if e["action"] == action]
        assert events
        assert events[-1]["correlation_id"] == cid


def test_export_then_verify_and_tampering_fails(tenant: Tenant, client: Client, capsys) -> None:
    _fill(tenant, 12)
    status, exp, headers = call(client, "POST", "/v1/audit/exports", tenant.token, {}, headers={"X-Correlation-Id": "corr-export-01"})
    assert status == 202, exp
    assert exp["status"] == "pending", exp
    assert exp["count"] == 13
    assert exp["first_seq"] == 1
    assert (exp["uri"].startswith(
        f"s3://{aws.bucket_name('audit-archive', tenant.region)}/exports/{tenant.workspace_id}/"))
    assert headers["Location"] == f"/v1/audit/exports/{exp['id']}"
    assert call(client, "GET", headers["Location"], tenant.token)[0] == 404  # not written yet
    assert not audit_export.verify_export(exp["uri"]).ok  # nothing signed yet
    _fill(tenant, 2)  # events after the request are not in the export: its range was fixed
    assert run_export_job(tenant.region) == [{"batchItemFailures": []}]
    status, ready, _ = call(client, "GET", headers["Location"], tenant.token)
    assert status == 200
    assert ready["verification"]["ok"]
    assert ready["count"] == 13
    s3 = aws.client("s3", tenant.region)
    for key in (exp["events_key"], exp["digest_key"]):
        head = s3.head_object(Bucket=exp["bucket"], Key=key)
        assert head["ObjectLockMode"] == "COMPLIANCE"
        years = (head["ObjectLockRetainUntilDate"].timestamp() - clock.now()) / (365.25 * 86400)
        assert 6.99 < years < 7.01
    lines = s3.get_object(Bucket=exp["bucket"], Key=exp["events_key"])["Body"].read().decode().splitlines()
    assert len(lines) == 13
    assert json.loads(lines[0])["action"] == "workspace.created"
    # the export is itself audited (after the exported range)
    [ev] = [e for e in audit.iter_chain(tenant.region, tenant.workspace_id) if e["action"] == "audit.exported"]
    assert ev["correlation_id"] == "corr-export-01"
    assert ev["target"]["id"] == exp["id"]
    # verifier command: export and live chain pass
    assert audit_cli.main(["verify-export", exp["uri"]]) == 0
    report = _report(capsys.readouterr().out)
    assert report["ok"]
    assert report["count"] == 13
    assert audit_cli.main(["verify-live", tenant.workspace_id]) == 0
    capsys.readouterr()
    # 1. an event changed in place (a new object version: compliance mode keeps the original)
    tampered = [json.loads(line) for line in lines]
    tampered[5]["details"] = {"i": 999}
    body = "\n".join(audit.canonical(e) for e in tampered) + "\n"
    s3.put_object(Bucket=exp["bucket"], Key=exp["events_key"], Body=body.encode())
    assert audit_cli.main(["verify-export", exp["uri"]]) == 1
    report = _report(capsys.readouterr().out)
    assert not report["ok"]
    assert any("SHA-256" in p for p in report["problems"])
    assert any("changed" in p for p in report["problems"])
    # 2. a forger re-hashes the chain and rewrites the digest, but cannot sign it with the KMS key
    prev = tampered[0]["prev_hash"]
    for e in tampered:
        e["prev_hash"] = prev
        e["hash"] = audit.compute_hash(e)
        prev = e["hash"]
    body = ("\n".join(audit.canonical(e) for e in tampered) + "\n").encode()
    digest = json.loads(s3.get_object(Bucket=exp["bucket"], Key=exp["digest_key"])["Body"].read())
    import hashlib

    digest["manifest"]["events_sha256"] = hashlib.sha256(body).hexdigest()
    digest["manifest"]["last_hash"] = tampered[-1]["hash"]
    s3.put_object(Bucket=exp["bucket"], Key=exp["events_key"], Body=body)
    s3.put_object(Bucket=exp["bucket"], Key=exp["digest_key"], Body=json.dumps(digest).encode())
    report = audit_export.verify_export(exp["uri"])
    assert not report.ok
    assert any("signature is not valid" in p for p in report.problems)
    # 3. a dropped event
    s3.put_object(Bucket=exp["bucket"], Key=exp["events_key"], Body=("\n".join(lines[:4] + lines[5:]) + "\n").encode())
    assert not audit_export.verify_export(exp["uri"]).ok


def test_export_of_a_time_range_and_the_live_chain_detects_changes(tenant: Tenant, client: Client) -> None:
    _fill(tenant, 10)
    events = list(audit.iter_chain(tenant.region, tenant.workspace_id))
    frm, to = events[3]["occurred_at"], events[8]["occurred_at"]
    status, exp, _ = call(client, "POST", "/v1/audit/exports", tenant.token, {"from": frm, "to": to})
    assert status == 202
    assert (exp["first_seq"], exp["last_seq"]) == (4, 8)
    run_export_job(tenant.region)
    assert audit_export.verify_export(exp["uri"]).ok
    assert call(client, "POST", "/v1/audit/exports", tenant.token, {"from": "2999-01-01T00:00:00Z"})[1]["code"] == "no_events"
    # someone with table access changes a stored event: the live verifier finds it
    item = audit.model(tenant.region).get(tenant.workspace_id, 3)
    item.details = json.dumps({"i": -1})
    item.save()
    assert audit_cli.main(["verify-live", tenant.workspace_id]) == 1


def test_export_is_admin_only(tenant: Tenant, client: Client) -> None:
    viewer = add_member(tenant.workspace_id, "v@example.com", "viewer")
    assert call(client, "POST", "/v1/audit/exports", viewer.token, {})[0] == 403


def test_export_retention_matches_the_declaration() -> None:
    from infra.resources import AUDIT_RETENTION_DAYS

    assert audit_export.AUDIT_RETENTION_DAYS == AUDIT_RETENTION_DAYS
    assert audit_digests.AUDIT_RETENTION_DAYS == AUDIT_RETENTION_DAYS
