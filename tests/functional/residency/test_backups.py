"""Backups: what they hold, how they are sealed, listing, and the 35-day sweep."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json

import pytest

from chalicelib.core import audit, aws, clock
from chalicelib.residency import backups, content, models, sealing
from chalicelib.residency.models import BACKED_UP_TABLES, BACKUP_BUCKET, NOT_BACKED_UP, PREFIX_KEYED
from infra.resources import BACKUP_RETENTION_DAYS, REGIONAL, TABLES
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.data import token_for
from tests.functional.residency.helpers import SECRET, client, get, post, seed
from tests.functional.residency.jobs import run_residency_jobs

DAY = 24 * 3600


def _objects(region: str, prefix: str) -> dict[str, bytes]:
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BACKUP_BUCKET, region)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
    return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def test_backed_up_tables_are_every_declared_regional_table() -> None:
    declared = [(t.name, t.hash_key, t.range_key) for t in TABLES if t.scope == REGIONAL and t.name not in NOT_BACKED_UP]
    assert [(t.name, t.hash_key, t.range_key) for t in BACKED_UP_TABLES] == declared
    for table in BACKED_UP_TABLES:
        assert table.hash_key == "workspace_id" or table.name in PREFIX_KEYED, table.name
    assert BACKUP_RETENTION_DAYS == models.BACKUP_RETENTION_DAYS


def test_backup_holds_exactly_the_workspace_content_sealed_under_the_backup_key(tenant: Tenant) -> None:
    other = make_tenant("other@example.com", name="Other")
    seed(tenant.workspace_id, tenant.region, "a")
    seed(other.workspace_id, other.region, "b")
    c = client()
    res = post(c, "/v1/backups", tenant.token)
    assert res.status_code == 202, res.body  # queued: the worker writes it
    assert res.json_body["status"] == "queued"
    assert res.headers["Location"] == f"/v1/backups/{res.json_body['id']}"
    assert get(c, f"/v1/backups/{res.json_body['id']}", tenant.token).json_body["status"] == "queued"
    run_residency_jobs(tenant.region)
    made = get(c, f"/v1/backups/{res.json_body['id']}", tenant.token).json_body
    assert made["status"] == "completed" and made["attempts"] == 1 and made["trigger"] == "api"
    assert made["tables"]["chats"] == 2
    assert made["tables"]["agents"] == 1
    assert made["tables"]["datasets"] == 1
    assert made["tables"]["agent_memory"] == 1
    assert made["tables"]["agent_run_log"] == 1
    assert made["tables"]["memberships"] == 1
    assert made["tables"]["audit_events"] >= 1
    assert made["buckets"] == {"data": {"objects": 1, "bytes": 4 + len(SECRET)},
                               "documents": {"objects": 1, "bytes": 3 * len(SECRET)},
                               "knowledge": {"objects": 1, "bytes": 6}}
    stored = _objects(tenant.region, f"workspaces/{tenant.workspace_id}/{made['id']}/")
    manifest = json.loads(stored.pop(f"workspaces/{tenant.workspace_id}/{made['id']}/manifest.json"))
    job = json.loads(stored.pop(f"workspaces/{tenant.workspace_id}/{made['id']}/status.json"))
    assert job["requested_by"]["type"] == "user" and SECRET.encode() not in json.dumps(job).encode()
    assert len(stored) == 4  # items.enc + three objects
    for key, body in stored.items():
        assert SECRET.encode() not in body  # sealed, not clear
        part = key.split(f"{made['id']}/", 1)[1]
        assert hashlib.sha256(body).hexdigest() == manifest["parts"][part]["sealed_sha256"]
    # the data key is wrapped by the backups key, not the data key, and bound to this backup
    kms = aws.client("kms", tenant.region)
    wrapped = base64.b64decode(manifest["wrapped_key"])
    out = kms.decrypt(CiphertextBlob=wrapped, EncryptionContext={"purpose": "backup", "workspace_id": tenant.workspace_id,
                                                                  "backup_id": made["id"]})
    backups_key = kms.describe_key(KeyId=aws.key_alias("backups"))["KeyMetadata"]["Arn"]
    data_key = kms.describe_key(KeyId=aws.key_alias("data"))["KeyMetadata"]["Arn"]
    assert out["KeyId"] == backups_key != data_key
    archive = gzip.decompress(sealing.open_sealed(out["Plaintext"], "items.enc",
                                                  stored[f"workspaces/{tenant.workspace_id}/{made['id']}/items.enc"]))
    assert other.workspace_id not in archive.decode()  # nothing of the other workspace
    assert SECRET in archive.decode()
    # the manifest's hashes check the clear content too, and reading it back yields every item
    found = backups.read(tenant.region, manifest)
    assert sorted(content.canonical(i) for i in found.items["chats"]) == sorted(
        content.canonical(i) for i in content.items(tenant.region, next(t for t in BACKED_UP_TABLES if t.name == "chats"),
                                                    tenant.workspace_id))
    events = list(audit.iter_chain(tenant.region, tenant.workspace_id))
    assert [e["action"] for e in events][-2:] == ["backup.requested", "backup.created"]
    assert events[-1]["actor"]["type"] == "user"  # written by the worker on behalf of the Admin who asked


def test_eu_backup_stays_in_its_region(stack: None) -> None:
    eu = make_tenant("eu@example.com", residency="eu-central", name="EU")
    seed(eu.workspace_id, eu.region)
    made = backups.create(eu.region, eu.workspace_id)
    assert made["region"] == "eu-central-1"
    assert _objects("eu-central-1", f"workspaces/{eu.workspace_id}/")
    assert not _objects("us-east-1", f"workspaces/{eu.workspace_id}/")


def test_list_is_paged_and_only_the_workspace_own(tenant: Tenant) -> None:
    other = make_tenant("other@example.com", name="Other")
    ids = [backups.create(tenant.region, tenant.workspace_id)["id"] for _ in range(3)]
    backups.create(other.region, other.workspace_id)
    c = client()
    first = get(c, "/v1/backups?limit=2", tenant.token).json_body
    assert [b["id"] for b in first["backups"]] == ids[:2]
    assert first["has_more"]
    second = get(c, f"/v1/backups?limit=2&after={first['next_cursor']}", tenant.token).json_body
    assert [b["id"] for b in second["backups"]] == ids[2:]
    assert not second["has_more"]
    assert get(c, f"/v1/backups/{ids[0]}", tenant.token).json_body["id"] == ids[0]
    other_id = backups.list_backups(other.region, other.workspace_id, {})["backups"][0]["id"]
    assert get(c, f"/v1/backups/{other_id}", tenant.token).status_code == 404
    assert get(c, "/v1/backups?after=bogus", tenant.token).status_code == 400


def test_backups_need_an_admin(tenant: Tenant) -> None:
    member = token_for(tenant.workspace_id, "member")
    c = client()
    assert post(c, "/v1/backups", member.token).status_code == 403
    assert get(c, "/v1/backups", member.token).status_code == 403
    assert backups.list_backups(tenant.region, tenant.workspace_id, {})["backups"] == []


def test_sweep_removes_exactly_the_backups_35_days_old(tenant: Tenant) -> None:
    with clock.frozen():
        old = backups.create(tenant.region, tenant.workspace_id)["id"]
        clock.advance(20 * DAY)
        young = backups.create(tenant.region, tenant.workspace_id)["id"]
        clock.advance(15 * DAY - 1)  # old is one second short of 35 days
        assert backups.sweep() == {"us-east-1": 0, "eu-central-1": 0}
        clock.advance(1)
        assert backups.sweep() == {"us-east-1": 1, "eu-central-1": 0}
    left = [b["id"] for b in backups.list_backups(tenant.region, tenant.workspace_id, {})["backups"]]
    assert left == [young]
    assert not _objects(tenant.region, f"workspaces/{tenant.workspace_id}/{old}/")
    assert len(_objects(tenant.region, f"workspaces/{tenant.workspace_id}/{young}/")) == 2
    # audit events are never swept
    assert [e["action"] for e in audit.iter_chain(tenant.region, tenant.workspace_id)].count("backup.created") == 2


def test_the_schedule_queues_one_job_per_workspace_and_the_worker_runs_each(stack: None) -> None:
    us = make_tenant("us@example.com", name="US")
    eu = make_tenant("eu@example.com", residency="eu-central", name="EU")
    report = backups.backup_all({})
    assert report == {"queued": {"us-east-1": 1, "eu-central-1": 1}, "failed": {}}
    assert backups.list_backups(us.region, us.workspace_id, {})["backups"][0]["status"] == "queued"
    run_residency_jobs()
    for t in (us, eu):
        (found,) = backups.list_backups(t.region, t.workspace_id, {})["backups"]
        assert found["status"] == "completed" and found["trigger"] == "schedule"
        assert found["item_count"] >= 1 and found["region"] == t.region


def test_one_failing_workspace_is_retried_and_reported_without_stopping_the_others(stack: None, monkeypatch: pytest.MonkeyPatch) -> None:
    good = make_tenant("good@example.com", name="Good")
    bad = make_tenant("bad@example.com", name="Bad")
    real = backups.create

    def create(region: str, workspace_id: str, **kwargs: object) -> dict[str, object]:
        if workspace_id == bad.workspace_id:
            raise RuntimeError("simulated storage failure")
        return real(region, workspace_id, **kwargs)

    monkeypatch.setattr(backups, "create", create)
    assert backups.backup_all({})["queued"] == {"us-east-1": 2}
    results = run_residency_jobs(good.region)
    assert sum(len(r["batchItemFailures"]) for r in results) == 1  # the bad job goes back to its queue
    (ok,) = backups.list_backups(good.region, good.workspace_id, {})["backups"]
    assert ok["status"] == "completed"
    (retrying,) = backups.list_backups(bad.region, bad.workspace_id, {})["backups"]
    assert retrying["status"] == "retrying" and retrying["error"] == "RuntimeError" and retrying["attempts"] == 1
    # the last delivery the redrive policy allows marks it failed (and audits it) before the dead-letter queue
    with pytest.raises(RuntimeError):
        backups.run_job(bad.region, bad.workspace_id, retrying["id"], {"type": "system", "id": "system"},
                        attempt=5, last_attempt=True)
    (failed,) = backups.list_backups(bad.region, bad.workspace_id, {})["backups"]
    assert failed["status"] == "failed" and failed["attempts"] == 5
    assert [e["action"] for e in audit.iter_chain(bad.region, bad.workspace_id)][-1] == "backup.failed"
    monkeypatch.setattr(backups, "create", real)
    assert backups.run_job(good.region, good.workspace_id, ok["id"], {}, attempt=2, last_attempt=False)[
        "status"] == "completed"  # a redelivered completed job runs nothing again
    assert len(backups.list_backups(good.region, good.workspace_id, {})["backups"]) == 1


def test_a_job_the_queue_refuses_is_failed_and_answered_503(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    from chalicelib.core.store import queues

    def refuse(*args: object, **kwargs: object) -> str:
        raise RuntimeError("queue unavailable")

    monkeypatch.setattr(queues, "enqueue", refuse)
    res = post(client(), "/v1/backups", tenant.token)
    assert res.status_code == 503 and res.json_body["code"] == "backup_not_queued"
    (job,) = backups.list_backups(tenant.region, tenant.workspace_id, {})["backups"]
    assert job["status"] == "failed"
