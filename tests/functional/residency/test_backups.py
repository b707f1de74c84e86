"""Backups: what they hold, how they are sealed, listing, and the 35-day sweep."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json

from chalicelib.core import audit, aws, clock
from chalicelib.residency import backups, content, models, sealing
from chalicelib.residency.models import BACKED_UP_TABLES, BACKUP_BUCKET, NOT_BACKED_UP, PREFIX_KEYED
from infra.resources import BACKUP_RETENTION_DAYS, REGIONAL, TABLES
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.data import token_for
from tests.functional.residency.helpers import SECRET, client, get, post, seed

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
    res = post(client(), "/v1/backups", tenant.token)
    assert res.status_code == 201, res.body
    made = res.json_body
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
    actions = [e["action"] for e in audit.iter_chain(tenant.region, tenant.workspace_id)]
    assert actions[-1] == "backup.created"


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
