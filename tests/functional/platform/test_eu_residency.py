"""An EU workspace's members, invitations, audit events, grants, exports and mail stay in eu-central-1:
after a full EU scenario through the API, no us-east-1 regional table, bucket or mail counter holds or
mentions it; the global directory holds only its directory entry."""
from __future__ import annotations

import json

from chalice.test import Client

from chalicelib.core import aws
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.oauth.grants.token_exchange import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE
from chalicelib.platform.support import service as support
from infra.resources import BUCKETS, GLOBAL, REGIONAL, TABLES
from tests.functional.conftest import Tenant, is_scope_version_item, make_tenant, stored_items
from tests.functional.platform.audit_jobs import run_digest_job, run_export_job
from tests.functional.platform.helpers import call, user_token


def test_eu_workspace_content_only_in_eu_central_1(tenant: Tenant) -> None:
    platform, identity = Client(create_app("platform")), Client(create_app("identity"))
    us_mail_before = aws.client("ses", "us-east-1").get_send_quota()["SentLast24Hours"]
    # a US user creates an EU workspace and switches to it
    status, ws, _ = call(platform, "POST", "/v1/workspaces", tenant.token,
                         {"name": "Berlin Lab", "residency": "eu-central"}, headers={"Idempotency-Key": "create-berlin"})
    assert status == 201
    eu = ws["id"]
    form = (f"grant_type={TOKEN_EXCHANGE}&subject_token={tenant.token}&subject_token_type={ACCESS_TOKEN_TYPE}"
            f"&workspace_id={eu}")
    r = identity.http.post("/oauth2/token", headers={"Content-Type": "application/x-www-form-urlencoded"}, body=form)
    admin = json.loads(r.body)["access_token"]
    # invitations, acceptance, role change
    inv = call(platform, "POST", f"/v1/workspaces/{eu}/invitations", admin, {"email": "eva@lab.eu", "role": "member"},
               headers={"Idempotency-Key": "inv-eva"})[1]
    eva = users.create_user("eva@lab.eu", email_verified=True)
    eva_token = user_token(eva.id, eva.email, tenant.workspace_id, "viewer")
    assert call(platform, "POST", f"/v1/workspaces/{eu}/invitations/{inv['id']}/accept", eva_token)[0] == 201
    assert call(platform, "PATCH", f"/v1/workspaces/{eu}/members/{eva.id}", admin, {"role": "viewer"})[0] == 200
    inv2 = call(platform, "POST", f"/v1/workspaces/{eu}/invitations", admin, {"email": "max@lab.eu", "role": "viewer"})[1]
    assert call(platform, "DELETE", f"/v1/workspaces/{eu}/invitations/{inv2['id']}", admin)[0] == 200
    # settings, replication acknowledgement, audit reads and an export
    assert call(platform, "PATCH", f"/v1/workspaces/{eu}", admin,
                {"replication": "cross-region-dr", "acknowledge_data_leaves_region": True})[0] == 200
    assert call(platform, "GET", "/v1/audit/events", admin)[0] == 200
    status, exp, _ = call(platform, "POST", "/v1/audit/exports", admin, {})
    assert status == 202
    assert exp["bucket"] == aws.bucket_name("audit-archive", "eu-central-1")
    assert run_export_job("us-east-1") == []  # queued in the workspace's region only
    assert run_export_job("eu-central-1") == [{"batchItemFailures": []}]
    # support grant and use
    staff = make_tenant("sue@support.test", "us-east", "Support")
    support.register_staff(staff.user_id, "Sue", "US")
    grant = call(platform, "POST", f"/v1/workspaces/{eu}/support-grants", admin,
                 {"support_email": "sue@support.test", "duration": "PT1H", "reason": "EU ticket"})[1]
    assert call(platform, "GET", f"/v1/support/workspaces/{eu}", staff.token)[0] == 200
    assert call(platform, "DELETE", f"/v1/workspaces/{eu}/support-grants/{grant['id']}", admin)[0] == 200

    run_digest_job()  # the chain digest too is written in eu-central-1 only

    # --- nothing of it in any us-east-1 regional table ---
    for table in (t.name for t in TABLES if t.scope == REGIONAL):
        leaked = [i for i in stored_items("us-east-1", table) if eu in i or "lab.eu" in i]
        assert not leaked, (table, leaked[:2])
    # ... and it is all in eu-central-1
    eu_tables = {t: [i for i in stored_items("eu-central-1", t) if eu in i]
                 for t in ("memberships", "invitations", "audit_events", "support_grants", "idempotency")}
    assert all(eu_tables.values()), {k: len(v) for k, v in eu_tables.items()}
    assert len([i for i in eu_tables["memberships"]]) == 2
    # the global store holds only the directory entry and the scope version item (ids and counters: no
    # member, invitation or audit content)
    for table in (t.name for t in TABLES if t.scope == GLOBAL):
        for item in stored_items("us-east-1", table):
            if eu in item and table == "revoked_tokens":
                assert is_scope_version_item(json.loads(item), eu), item
                continue
            if eu in item:
                assert table == "workspaces", (table, item)
                assert "eva@lab.eu" not in item
                assert "max@lab.eu" not in item
                assert "EU ticket" not in item
    # buckets: the export is in the EU archive only
    for bucket in BUCKETS:
        name = aws.bucket_name(bucket.name, "us-east-1")
        keys = [o["Key"] for o in aws.client("s3", "us-east-1").list_objects_v2(Bucket=name).get("Contents", [])]
        assert not [k for k in keys if eu in k], (name, keys)
    eu_keys = [o["Key"] for o in aws.client("s3", "eu-central-1").list_objects_v2(
        Bucket=aws.bucket_name("audit-archive", "eu-central-1"), Prefix=f"exports/{eu}/").get("Contents", [])]
    assert len(eu_keys) == 2
    assert aws.client("s3", "eu-central-1").list_objects_v2(
        Bucket=aws.bucket_name("audit-digests", "eu-central-1"), Prefix=f"digests/{eu}/")["KeyCount"] == 1
    # invitation mail went out through SES in eu-central-1
    assert aws.client("ses", "us-east-1").get_send_quota()["SentLast24Hours"] == us_mail_before
    assert aws.client("ses", "eu-central-1").get_send_quota()["SentLast24Hours"] >= 2
