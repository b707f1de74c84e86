"""Cross-region DR: the copy appears only with cross-region-dr, in the declared secondary region only,
sealed under that region's key, incrementally, within the RPO; turning DR off deletes it (audited)."""
from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from chalicelib.core import audit, aws, clock, process_state
from chalicelib.core.config import settings
from chalicelib.core.regions import OPEN_REGIONS, RegionPinned, dr_copy_to
from chalicelib.platform.models import replication_states
from chalicelib.platform.workspaces.disaster_recovery import RPO_SECONDS, lag_over_rpo
from chalicelib.residency import content, replication
from chalicelib.residency.models import DR_BUCKET, DR_KEY, NOT_RESTORED, REPLICATION_INTERVAL_SECONDS
from chalicelib.workers.jobs import SCHEDULED
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.residency.helpers import SECRET, client, get, put, put_obj, seed

DR_SECONDARIES = ("us-west-2", "eu-west-1")


@pytest.fixture(autouse=True)
def _frozen_clock(stack: None) -> Any:
    with clock.frozen():  # time moves only by clock.advance
        yield


def patch(c: Any, t: Tenant, body: dict[str, Any]) -> Any:
    return c.http.patch(f"/v1/workspaces/{t.workspace_id}", body=json.dumps(body),
                        headers={"Authorization": f"Bearer {t.token}", "Content-Type": "application/json"})


def dr_objects(region: str, ws: str) -> dict[str, bytes]:
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(DR_BUCKET, region)
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"workspaces/{ws}/")
            for o in page.get("Contents", [])]
    return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def mentions_anywhere_but(ws: str, allowed: str) -> list[str]:
    """Every bucket object key naming ``ws`` in a DR region other than ``allowed``."""
    return [f"{region}:{k}" for region in DR_SECONDARIES if region != allowed for k in dr_objects(region, ws)]


def events(t: Tenant, action: str) -> list[dict[str, Any]]:
    return [e for e in audit.iter_chain(t.region, t.workspace_id) if e["action"] == action]


def primary_content(ws: str, region: str) -> dict[str, Any]:
    items = {t.name: sorted(content.canonical(i) for i in content.items(region, t, ws)) for t in content.backed_up_tables()}
    objs = {(b, k): hashlib.sha256(content.get_object(region, b, k)["body"]).hexdigest()
            for b, p in content.prefixes(ws).items() for k in content.object_keys(region, b, p)}
    return {"items": {k: v for k, v in items.items() if v}, "objects": objs}


def copy_content(secondary: str, ws: str) -> dict[str, Any]:
    got = replication.read_copy(secondary, ws)
    return {"items": {t: sorted(content.canonical(i) for i in items) for t, items in got["items"].items()},
            "objects": {(o["bucket"], o["key"]): hashlib.sha256(o["body"]).hexdigest() for o in got["objects"]}}


def test_schedule_keeps_the_lag_under_the_rpo() -> None:
    [job] = [j for j in SCHEDULED if j.name == "replicate_workspaces"]
    assert job.scope == "regional"
    assert job.every_seconds == REPLICATION_INTERVAL_SECONDS
    assert job.every_seconds * 2 < RPO_SECONDS  # a missed run still lands inside the RPO


def test_no_copy_without_cross_region_dr(tenant: Tenant) -> None:
    seed(tenant.workspace_id, tenant.region)
    patch(client(), tenant, {"replication": "in-region-multi-az"})
    out = replication.run({})
    assert out["us-east-1"]["replicated"] == 0
    assert mentions_anywhere_but(tenant.workspace_id, "") == []
    body = get(client(), f"/v1/workspaces/{tenant.workspace_id}", tenant.token).json_body
    assert body["replication_lag_seconds"] is None
    assert body["last_replicated_at"] is None
    assert body["replication_secondary_region"] is None


def test_dr_copy_in_the_secondary_only_sealed_under_its_key_within_the_rpo(tenant: Tenant) -> None:
    ws = tenant.workspace_id
    seed(ws, tenant.region)
    c = client()
    res = patch(c, tenant, {"replication": "cross-region-dr"})
    assert res.status_code == 200, res.body
    assert res.json_body["replication_secondary_region"] == "us-west-2"
    assert res.json_body["last_replicated_at"] is None
    assert res.json_body["replication_lag_seconds"] == 0
    clock.advance(120)
    assert get(c, f"/v1/workspaces/{ws}", tenant.token).json_body["replication_lag_seconds"] == 120
    start = clock.now()
    out = replication.run({})
    assert out["us-east-1"]["replicated"] == 1
    stored = dr_objects("us-west-2", ws)
    assert mentions_anywhere_but(ws, "us-west-2") == []
    assert stored
    assert all(SECRET.encode() not in body for body in stored.values())  # sealed, never clear
    assert not any(SECRET in k or "handbook" in k for k in stored)  # names reveal nothing either
    # the data key is wrapped by the SECONDARY region's dr key, bound to this workspace
    key_doc = json.loads(stored[f"workspaces/{ws}/key.json"])
    kms = aws.client("kms", "us-west-2")
    wrapped = base64.b64decode(key_doc["wrapped_key"])
    dr_key = kms.describe_key(KeyId=aws.key_alias(DR_KEY))["KeyMetadata"]["Arn"]
    assert kms.decrypt(CiphertextBlob=wrapped, EncryptionContext={"workspace_id": ws, "purpose": "disaster-recovery"})[
        "KeyId"] == dr_key
    with pytest.raises(Exception):  # noqa: B017 (moto raises InvalidCiphertextException)
        kms.decrypt(CiphertextBlob=wrapped, EncryptionContext={"workspace_id": "ws_other", "purpose": "disaster-recovery"})
    with pytest.raises(Exception):  # noqa: B017 the primary region's KMS cannot open it
        aws.client("kms", tenant.region).decrypt(CiphertextBlob=wrapped, EncryptionContext={
            "workspace_id": ws, "purpose": "disaster-recovery"})
    # the copy equals the primary item by item and object by object (audit and memberships included)
    assert copy_content("us-west-2", ws) == primary_content(ws, tenant.region)
    held = {"chats", "agents", "agent_memory", "agent_run_log", *NOT_RESTORED} - {"directory"}  # no groups here
    assert held <= set(copy_content("us-west-2", ws)["items"])
    # the lag is visible on the workspace and stays under the RPO between passes
    body = get(c, f"/v1/workspaces/{ws}", tenant.token).json_body
    assert body["last_replicated_at"] == clock.iso(start)
    assert body["replication_lag_seconds"] == 0
    clock.advance(300)
    assert get(c, f"/v1/workspaces/{ws}", tenant.token).json_body["replication_lag_seconds"] == 300 < RPO_SECONDS
    assert not lag_over_rpo(replication.workspaces().get(ws))


def test_passes_are_incremental_and_deletions_propagate(tenant: Tenant) -> None:
    ws = tenant.workspace_id
    seed(ws, tenant.region)
    patch(client(), tenant, {"replication": "cross-region-dr"})
    first = replication.replicate(tenant.region, ws, "us-east")
    assert first["copied"]["objects"] == 3
    assert first["copied"]["items"] >= 10
    assert first["deleted"] == {"items": 0, "objects": 0}
    before = set(dr_objects("us-west-2", ws))
    again = replication.replicate(tenant.region, ws, "us-east")
    assert again["copied"] == {"items": 0, "objects": 0}
    assert again["bytes_copied"] == 0
    assert again["unchanged"] == first["copied"]
    # one item changed, one added, one object deleted, one object rewritten
    put(tenant.region, "chats", {"workspace_id": {"S": ws}, "id": {"S": "chat_a2"}, "title": {"S": "renamed"}})
    put(tenant.region, "chats", {"workspace_id": {"S": ws}, "id": {"S": "chat_new"}, "title": {"S": "new"}})
    aws.client("s3", tenant.region).delete_object(Bucket=aws.bucket_name("knowledge", tenant.region),
                                                  Key=f"indexes/{ws}/ds_a/b1/chunks.json.gz")
    put_obj(tenant.region, "data", f"datasets/{ws}/ds_a/s1/part-00000.parquet", b"PAR1 v2")
    third = replication.replicate(tenant.region, ws, "us-east")
    assert third["copied"] == {"items": 2, "objects": 1}
    assert third["deleted"] == {"items": 0, "objects": 1}
    assert third["unchanged"]["items"] == first["copied"]["items"] - 1
    after = set(dr_objects("us-west-2", ws))
    assert len(before - after) == 3
    assert len(after - before) == 3  # replaced chat, dropped and rewritten objects
    assert copy_content("us-west-2", ws) == primary_content(ws, tenant.region)
    # an item deleted in the primary leaves the copy too
    aws.client("dynamodb", tenant.region).delete_item(TableName=aws.table_name("chats"),
                                                      Key={"workspace_id": {"S": ws}, "id": {"S": "chat_new"}})
    fourth = replication.replicate(tenant.region, ws, "us-east")
    assert fourth["deleted"] == {"items": 1, "objects": 0}
    assert fourth["copied"] == {"items": 0, "objects": 0}
    assert copy_content("us-west-2", ws) == primary_content(ws, tenant.region)


def test_turning_dr_off_stops_copying_and_deletes_the_copy_audited(tenant: Tenant) -> None:
    ws = tenant.workspace_id
    seed(ws, tenant.region)
    other = make_tenant("other@example.com", name="Other")
    c = client()
    patch(c, tenant, {"replication": "cross-region-dr"})
    patch(c, other, {"replication": "cross-region-dr"})
    replication.run({})
    assert dr_objects("us-west-2", ws)
    assert dr_objects("us-west-2", other.workspace_id)
    res = patch(c, tenant, {"replication": "none"})
    assert res.status_code == 200
    assert res.json_body["replication_lag_seconds"] is None
    assert res.json_body["last_replicated_at"] is None
    put(tenant.region, "chats", {"workspace_id": {"S": ws}, "id": {"S": "chat_after"}, "title": {"S": "x"}})
    out = replication.run({})
    assert out["us-east-1"]["copies_deleted"] == 1
    assert out["us-east-1"]["replicated"] == 1  # the other one
    assert dr_objects("us-west-2", ws) == {}
    assert dr_objects("us-west-2", other.workspace_id)  # another workspace's copy is untouched
    [event] = events(tenant, "replication.dr_copy_deleted")
    assert event["details"]["secondary_region"] == "us-west-2"
    assert event["details"]["objects_deleted"] > 10
    assert replication.run({})["us-east-1"]["copies_deleted"] == 0  # once
    assert dr_objects("us-west-2", ws) == {}
    assert len(events(tenant, "replication.dr_copy_deleted")) == 1


def test_eu_copy_stays_in_the_eu(stack: None) -> None:
    eu = make_tenant("dpo@example.eu", "eu-central", "Euro")
    seed(eu.workspace_id, eu.region)
    res = patch(client(), eu, {"replication": "cross-region-dr", "acknowledge_data_leaves_region": True})
    assert res.status_code == 200, res.body
    assert res.json_body["replication_secondary_region"] == "eu-west-1"
    [event] = events(eu, "workspace.replication_changed")
    assert event["details"]["secondary_region"] == "eu-west-1"
    assert event["details"]["acknowledged"] is True
    out = replication.run({})
    assert out["eu-central-1"]["replicated"] == 1
    assert dr_objects("eu-west-1", eu.workspace_id)
    assert mentions_anywhere_but(eu.workspace_id, "eu-west-1") == []
    assert copy_content("eu-west-1", eu.workspace_id) == primary_content(eu.workspace_id, eu.region)


@pytest.mark.parametrize(("residency", "target"), [("us-east", "eu-west-1"), ("eu-central", "us-west-2"),
                                                   ("us-east", "ap-south-1"), ("eu-central", "eu-central-1"),
                                                   ("us-east", "../us-west-2")])
def test_an_undeclared_dr_target_is_refused_and_nothing_changes(stack: None, residency: str, target: str) -> None:
    t = make_tenant("admin@example.com", residency, "Target")
    before = get(client(), f"/v1/workspaces/{t.workspace_id}", t.token).json_body
    res = patch(client(), t, {"replication": "cross-region-dr", "replication_secondary_region": target,
                              "acknowledge_data_leaves_region": True})
    assert res.status_code == 422, res.body
    assert res.json_body["code"] == "undeclared_secondary_region"
    assert res.headers["Content-Type"].startswith("application/problem+json")
    assert get(client(), f"/v1/workspaces/{t.workspace_id}", t.token).json_body == before
    assert events(t, "workspace.replication_changed") == []
    assert list(replication_states(t.region).scan()) == []
    replication.run({})
    assert all(dr_objects(r, t.workspace_id) == {} for r in DR_SECONDARIES)
    # the field is refused outright without cross-region-dr
    res = patch(client(), t, {"replication": "none", "replication_secondary_region": DR_SECONDARIES[0]})
    assert res.status_code == 400


def test_a_declared_target_given_explicitly_is_used(tenant: Tenant) -> None:
    res = patch(client(), tenant, {"replication": "cross-region-dr", "replication_secondary_region": "us-west-2"})
    assert res.status_code == 200
    assert res.json_body["replication_secondary_region"] == "us-west-2"
    assert replication_states(tenant.region).get(tenant.workspace_id).secondary_region == "us-west-2"


def test_a_pinned_worker_reaches_only_its_own_declared_secondary(monkeypatch: pytest.MonkeyPatch, stack: None) -> None:
    assert set(DR_SECONDARIES).isdisjoint(OPEN_REGIONS)
    monkeypatch.setenv("REGION", "eu-central-1")
    settings.cache_clear()
    process_state.reset_all(derived=True)
    with pytest.raises(RegionPinned):
        aws.client("s3", "eu-west-1")  # not outside a DR pass
    with dr_copy_to("eu-west-1"):
        assert aws.client("s3", "eu-west-1")
    with dr_copy_to("us-west-2"), pytest.raises(RegionPinned):
        aws.client("s3", "us-west-2")  # the US secondary is not the EU residency's


def test_a_swapped_dr_key_fails_that_pass_only_and_its_lag_grows(tenant: Tenant) -> None:
    other = make_tenant("other@example.com", name="Other")
    seed(tenant.workspace_id, tenant.region)
    c = client()
    patch(c, tenant, {"replication": "cross-region-dr"})
    patch(c, other, {"replication": "cross-region-dr"})
    replication.run({})
    checkpoint = get(c, f"/v1/workspaces/{tenant.workspace_id}", tenant.token).json_body["last_replicated_at"]
    s3 = aws.client("s3", "us-west-2")
    bucket = aws.bucket_name(DR_BUCKET, "us-west-2")
    theirs = s3.get_object(Bucket=bucket, Key=f"workspaces/{other.workspace_id}/key.json")["Body"].read()
    s3.put_object(Bucket=bucket, Key=f"workspaces/{tenant.workspace_id}/key.json", Body=theirs)
    clock.advance(600)
    out = replication.run({})
    assert out["us-east-1"]["failed"] == 1
    assert out["us-east-1"]["replicated"] == 1  # the other workspace's pass ran
    body = get(c, f"/v1/workspaces/{tenant.workspace_id}", tenant.token).json_body
    assert body["last_replicated_at"] == checkpoint
    assert body["replication_lag_seconds"] == 600
    clock.advance(RPO_SECONDS)
    assert lag_over_rpo(replication.workspaces().get(tenant.workspace_id))
