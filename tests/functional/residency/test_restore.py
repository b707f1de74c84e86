"""Two-person restore: refusals, the audited steps, and data equal to the backup item by item."""
from __future__ import annotations

from chalicelib.core import audit, aws, clock
from chalicelib.gateway.catalog import versions as catalog_versions
from chalicelib.identity.oauth.signing import issue_access_token
from chalicelib.residency import backups
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.data import token_for
from tests.functional.residency.helpers import client, get, post, put, put_obj, seed, snapshot
from tests.functional.residency.jobs import run_residency_jobs


def _backup(tenant: Tenant) -> str:
    seed(tenant.workspace_id, tenant.region)
    return str(backups.create(tenant.region, tenant.workspace_id)["id"])


def _mutate(ws: str, region: str) -> None:
    """Change, delete and add items and objects after the backup."""
    put(region, "chats", {"workspace_id": {"S": ws}, "id": {"S": "chat_a1"}, "title": {"S": "edited"}})
    aws.client("dynamodb", region).delete_item(TableName=aws.table_name("agents"),
                                               Key={"workspace_id": {"S": ws}, "id": {"S": "agt_a"}})
    put(region, "agent_memory", {"scope": {"S": f"{ws}#agt_a#usr_2"}, "key": {"S": "new"}, "value": {"S": "x"}})
    aws.client("s3", region).delete_object(Bucket=aws.bucket_name("documents", region),
                                           Key=f"uploads/{ws}/conn_a/doc_1/handbook.txt")
    put_obj(region, "data", f"datasets/{ws}/ds_a/s1/part-00000.parquet", b"changed")
    put_obj(region, "knowledge", f"indexes/{ws}/ds_new/b/chunks.json.gz", b"new")


def _actions(tenant: Tenant) -> list[str]:
    return [e["action"] for e in audit.iter_chain(tenant.region, tenant.workspace_id)
            if e["action"].startswith("backup.restore")]


def test_two_different_admins_restore_the_backup_exactly(tenant: Tenant) -> None:
    other = make_tenant("other@example.com", name="Other")
    seed(other.workspace_id, other.region, "b")
    before_other = snapshot(other.workspace_id, other.region)
    backup_id = _backup(tenant)
    at_backup = snapshot(tenant.workspace_id, tenant.region)
    _mutate(tenant.workspace_id, tenant.region)
    assert snapshot(tenant.workspace_id, tenant.region) != at_backup
    second = token_for(tenant.workspace_id, "admin")
    c = client()
    null_body = c.http.post(f"/v1/backups/{backup_id}/restore-requests", body="null",
                            headers={"Authorization": f"Bearer {tenant.token}", "Content-Type": "application/json"})
    assert null_body.status_code == 400  # the document's body is an object (or none), never JSON null
    req = post(c, f"/v1/backups/{backup_id}/restore-requests", tenant.token)
    assert req.status_code == 201, req.body
    rid = req.json_body["id"]
    assert req.json_body["approvals"] == [tenant.user_id]
    assert req.json_body["status"] == "pending"
    # one approval (the requester's): nothing restored; the requester cannot add a second
    own = post(c, f"/v1/backups/{backup_id}/restore-requests/{rid}/approve", tenant.token)
    assert own.status_code == 403
    assert own.json_body["code"] == "own_restore_request"
    assert get(c, f"/v1/backups/{backup_id}/restore-requests/{rid}", tenant.token).json_body["status"] == "pending"
    assert snapshot(tenant.workspace_id, tenant.region) != at_backup
    queued = post(c, f"/v1/backups/{backup_id}/restore-requests/{rid}/approve", second.token)
    assert queued.status_code == 202, queued.body
    assert queued.json_body["status"] == "queued"
    assert snapshot(tenant.workspace_id, tenant.region) != at_backup
    assert _actions(tenant) == ["backup.restore_requested", "backup.restore_approved"]  # nothing ran in the request
    version = catalog_versions.current(tenant.region, tenant.workspace_id).version
    run_residency_jobs(tenant.region)
    run_residency_jobs(tenant.region)  # a redelivery runs nothing twice
    # every container's cached catalog reloads the restored datasets in full
    assert catalog_versions.current(tenant.region, tenant.workspace_id).since(version) is None
    done = get(c, f"/v1/backups/{backup_id}/restore-requests/{rid}", tenant.token)
    body = done.json_body
    assert body["status"] == "restored"
    assert sorted(body["approvals"]) == sorted([tenant.user_id, second.user_id])
    assert body["report"]["tables"]["chats"] == {"added": 0, "updated": 1, "removed": 0, "unchanged": 1}
    assert body["report"]["tables"]["agents"] == {"added": 1, "updated": 0, "removed": 0, "unchanged": 0}
    assert body["report"]["tables"]["agent_memory"] == {"added": 0, "updated": 0, "removed": 1, "unchanged": 1}
    assert body["report"]["buckets"]["documents"]["added"] == 1
    assert body["report"]["buckets"]["data"]["updated"] == 1
    assert body["report"]["buckets"]["knowledge"] == {"added": 0, "updated": 0, "removed": 1, "unchanged": 1}
    after = snapshot(tenant.workspace_id, tenant.region)
    for name, items in at_backup.items():  # item by item, table by table, object by object
        assert after[name] == items, name
    assert after == at_backup
    assert snapshot(other.workspace_id, other.region) == before_other  # the other workspace is untouched
    assert _actions(tenant) == ["backup.restore_requested", "backup.restore_approved", "backup.restore_started",
                                "backup.restore_finished"]
    again = post(c, f"/v1/backups/{backup_id}/restore-requests/{rid}/approve", second.token)
    assert again.status_code == 409


def test_two_approvals_from_one_admin_count_once(tenant: Tenant) -> None:
    backup_id = _backup(tenant)
    second, third = token_for(tenant.workspace_id, "admin"), token_for(tenant.workspace_id, "admin")
    c = client()
    # the second Admin requests; the first Admin's approval completes it, but the requester's own never does
    rid = post(c, f"/v1/backups/{backup_id}/restore-requests", second.token).json_body["id"]
    for _ in range(2):
        assert post(c, f"/v1/backups/{backup_id}/restore-requests/{rid}/approve", second.token).status_code == 403
    state = get(c, f"/v1/backups/{backup_id}/restore-requests/{rid}", third.token).json_body
    assert state["approvals"] == [second.user_id]
    assert state["status"] == "pending"
    assert _actions(tenant) == ["backup.restore_requested"]


def test_approval_window_is_time_boxed(tenant: Tenant) -> None:
    backup_id = _backup(tenant)
    second = token_for(tenant.workspace_id, "admin")
    c = client()
    with clock.frozen():
        rid = post(c, f"/v1/backups/{backup_id}/restore-requests", tenant.token).json_body["id"]
        clock.advance(24 * 3600)
        fresh, _ = issue_access_token(user_id=second.user_id, email=second.email, workspace_id=tenant.workspace_id,
                                      roles=["admin"], amr=["pwd", "mfa"])  # the first one has expired by now
        late = post(c, f"/v1/backups/{backup_id}/restore-requests/{rid}/approve", fresh)
    assert late.status_code == 409
    assert late.json_body["code"] == "restore_request_expired"
    assert _actions(tenant) == ["backup.restore_requested"]


def test_non_admin_cannot_approve_and_other_workspace_backup_is_404(tenant: Tenant) -> None:
    other = make_tenant("other@example.com", name="Other")
    theirs = _backup(other)
    mine = _backup(tenant)
    member, viewer = token_for(tenant.workspace_id, "member"), token_for(tenant.workspace_id, "viewer")
    c = client()
    assert post(c, f"/v1/backups/{theirs}/restore-requests", tenant.token).status_code == 404
    assert post(c, "/v1/backups/bkp_nonsense/restore-requests", tenant.token).status_code == 404
    rid = post(c, f"/v1/backups/{mine}/restore-requests", tenant.token).json_body["id"]
    for caller in (member, viewer):
        res = post(c, f"/v1/backups/{mine}/restore-requests/{rid}/approve", caller.token)
        assert res.status_code == 403
        assert res.headers["Content-Type"].startswith("application/problem+json")
    # an Admin of the other workspace cannot reach this request through their own backup either
    assert post(c, f"/v1/backups/{theirs}/restore-requests/{rid}/approve", other.token).status_code == 404
    assert get(c, f"/v1/backups/{mine}/restore-requests/{rid}", tenant.token).json_body["approvals"] == [tenant.user_id]
    assert post(c, f"/v1/backups/{mine}/restore-requests", tenant.token, {"force": True}).status_code == 400


def test_a_tampered_backup_fails_audited_and_changes_nothing(tenant: Tenant) -> None:
    backup_id = _backup(tenant)
    _mutate(tenant.workspace_id, tenant.region)
    now = snapshot(tenant.workspace_id, tenant.region)
    s3 = aws.client("s3", tenant.region)
    bucket, key = aws.bucket_name("backups", tenant.region), f"workspaces/{tenant.workspace_id}/{backup_id}/items.enc"
    sealed = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=key, Body=sealed[:-1] + bytes([sealed[-1] ^ 1]))
    second = token_for(tenant.workspace_id, "admin")
    now = snapshot(tenant.workspace_id, tenant.region)
    c = client()
    rid = post(c, f"/v1/backups/{backup_id}/restore-requests", tenant.token).json_body["id"]
    assert post(c, f"/v1/backups/{backup_id}/restore-requests/{rid}/approve", second.token).status_code == 202
    run_residency_jobs(tenant.region)
    res = get(c, f"/v1/backups/{backup_id}/restore-requests/{rid}", tenant.token)
    assert res.json_body["status"] == "failed"
    assert snapshot(tenant.workspace_id, tenant.region) == now
    assert _actions(tenant)[-2:] == ["backup.restore_started", "backup.restore_failed"]
