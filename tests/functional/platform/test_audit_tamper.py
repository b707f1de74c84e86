"""The audit tamper suite: an insider with the application's own table access (PutItem allowed, as
IAM cannot require attribute_not_exists) and even DeleteItem, tries every way to change history. Each
attack is performed for real against the stored chain or export, and the verifier (``audit_cli
verify-live`` / ``verify-export``) must report it: detection 100%.

Digests are written by the scheduled digest job (``jobs.audit_digest``) and signed with a KMS key the
application roles cannot use; the attacks below cannot produce a valid digest signature."""
from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import audit, aws, clock
from chalicelib.core.tenancy import workspace_scope
from chalicelib.groups import create_app
from chalicelib.platform.audit import cli as audit_cli
from chalicelib.platform.audit import digests as audit_digests
from chalicelib.platform.audit import export as audit_export
from tests.functional.conftest import Tenant
from tests.functional.platform.audit_jobs import run_digest_job, run_export_job
from tests.functional.platform.helpers import call

MALLORY = audit.Actor("user", "usr_mallory", "mallory@example.com")


def _fill(t: Tenant, n: int) -> None:
    for i in range(n):
        audit.append(t.region, t.workspace_id, "test.event", actor=MALLORY, details={"i": i})
        clock.advance(1)


def _events(t: Tenant) -> list[dict[str, Any]]:
    return list(audit.iter_chain(t.region, t.workspace_id))


def _put(t: Tenant, event: dict[str, Any]) -> None:
    """A bare PutItem of an event (no condition): what any application role may send. A v2 event is
    stored as ``append`` stores it: personal values outside, their commitments inside."""
    cls = audit.model(t.region)
    v2 = {"v": event["v"], "personal": audit.canonical(event["personal"])} if event.get("v") else {}
    stored, _ = audit.split_personal(event) if v2 else (event, {})
    cls(t.workspace_id, event["seq"], id=event["id"], occurred_at=event["occurred_at"],
        actor=audit.canonical(stored["actor"]), action=event["action"], target=audit.canonical(stored["target"]),
        correlation_id=event["correlation_id"], ip=stored["ip"] or None, user_agent=stored["user_agent"] or None,
        details=audit.canonical(event["details"]), prev_hash=event["prev_hash"], hash=event["hash"], **v2).save()


def _delete(t: Tenant, seq: int) -> None:
    aws.client("dynamodb", t.region).delete_item(
        TableName=aws.table_name("audit_events"), Key={"workspace_id": {"S": t.workspace_id}, "seq": {"N": str(seq)}})


def _rechain(events: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """Re-link and re-hash events[start:] after a change: a chain that verifies on its own."""
    out = copy.deepcopy(events)
    for i in range(start, len(out)):
        if i:
            out[i]["prev_hash"] = out[i - 1]["hash"]
        out[i]["hash"] = audit.compute_hash(out[i])
    return out


# --- attacks on the live chain ----------------------------------------------------------------------

def change_one_event(t: Tenant) -> None:
    event = _events(t)[4]
    event["details"] = {"i": 999}
    _put(t, event)


def delete_a_middle_event(t: Tenant) -> None:
    _delete(t, 7)


def delete_the_newest_events(t: Tenant) -> None:
    """Truncation: the remaining chain is intact from genesis; only the digest knows it was longer."""
    for event in _events(t)[-3:]:
        _delete(t, event["seq"])


def overwrite_and_rechain(t: Tenant) -> None:
    """PutItem over existing events and re-hash everything after: the chain verifies on its own."""
    events = _events(t)
    events[4]["actor"] = MALLORY.as_dict() | {"id": "usr_someone_else"}
    for event in _rechain(events, 4)[4:]:
        _put(t, event)


def truncate_then_regrow(t: Tenant) -> None:
    """Delete the newest events and append forged ones up to the same length (same head seq)."""
    events = _events(t)
    keep = events[:-3]
    forged = copy.deepcopy(events[-3:])
    for e in forged:
        e["details"] = {"forged": True}
    for event in _rechain(keep + forged, len(keep))[len(keep):]:
        _put(t, event)


def forge_a_digest_with_another_key(t: Tenant) -> None:
    """After re-chaining, write a matching digest signed with a key the insider controls."""
    overwrite_and_rechain(t)
    events = _events(t)
    kms = aws.client("kms", t.region)
    own_key = kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
    newest = audit_digests.digests(t.region, t.workspace_id)[-1]
    body = dict(newest.body, head_hash=events[-1]["hash"], key_arn=own_key, created_at=clock.iso())
    sig = kms.sign(KeyId=own_key, Message=hashlib.sha256(audit.canonical(body).encode()).digest(),
                   MessageType="DIGEST", SigningAlgorithm=audit_digests.SIGNING_ALGORITHM)["Signature"]
    raw = audit.canonical({"digest": body, "signature": base64.b64encode(sig).decode()}).encode()
    # a new version of the newest digest object (Object Lock keeps the original version)
    aws.client("s3", t.region).put_object(Bucket=aws.bucket_name(audit_digests.BUCKET, t.region), Key=newest.key, Body=raw)


LIVE_ATTACKS: dict[str, Callable[[Tenant], None]] = {
    "change": change_one_event,
    "delete-middle": delete_a_middle_event,
    "delete-newest": delete_the_newest_events,
    "overwrite-and-rechain": overwrite_and_rechain,
    "truncate-then-regrow": truncate_then_regrow,
    "forged-digest-other-key": forge_a_digest_with_another_key,
}


@pytest.fixture
def digested(tenant: Tenant) -> Tenant:
    """A chain of 16 events with two signed digests (at seq 11 and 16)."""
    _fill(tenant, 10)
    run_digest_job()
    _fill(tenant, 5)
    result = run_digest_job()
    assert result[tenant.region]["written"] >= 1
    assert tenant.workspace_id not in result[tenant.region]["tampered"]
    assert [d.head_seq for d in audit_digests.digests(tenant.region, tenant.workspace_id)] == [11, 16]
    assert audit_export.verify_live(workspace_scope(tenant.workspace_id)).ok
    return tenant


@pytest.mark.parametrize("attack", sorted(LIVE_ATTACKS))
def test_every_attack_on_the_live_chain_is_detected(digested: Tenant, attack: str, capsys) -> None:
    LIVE_ATTACKS[attack](digested)
    assert audit_cli.main(["verify-live", digested.workspace_id]) == 1
    out = capsys.readouterr().out
    report = json.loads(out[out.rindex("{\n"):])
    assert not report["ok"]
    assert report["problems"]


@pytest.mark.parametrize("attack", ["delete-newest", "overwrite-and-rechain", "truncate-then-regrow"])
def test_these_attacks_pass_the_chain_alone_only_the_digests_catch_them(digested: Tenant, attack: str) -> None:
    LIVE_ATTACKS[attack](digested)
    assert audit.verify_live(digested.region, digested.workspace_id).ok  # hash links alone: fooled
    report = audit_export.verify_live(workspace_scope(digested.workspace_id))
    assert not report.ok
    assert any("digest" in p for p in report.problems)


@pytest.mark.parametrize("attack", ["delete-newest", "overwrite-and-rechain", "truncate-then-regrow"])
def test_the_next_digest_run_refuses_to_sign_a_tampered_chain(digested: Tenant, attack: str, caplog) -> None:
    """The job checks incrementally (the previous head and what follows), so it sees every attack that
    reaches the newest digest's head; a change further back breaks a link the verifier checks."""
    LIVE_ATTACKS[attack](digested)
    _fill(digested, 2)
    with caplog.at_level("ERROR"):
        result = run_digest_job()
    assert digested.workspace_id in result[digested.region]["tampered"]
    assert any(r.getMessage() == "audit chain tampered" for r in caplog.records)
    assert [d.head_seq for d in audit_digests.digests(digested.region, digested.workspace_id)] == [11, 16]


def test_the_detection_rate_of_the_live_suite_is_total(stack: None) -> None:
    """Every attack of the suite, each on a fresh workspace: all detected (the rate is 100%)."""
    from tests.functional.conftest import make_tenant

    detected = []
    for n, attack in enumerate(LIVE_ATTACKS[k] for k in sorted(LIVE_ATTACKS)):
        t = make_tenant(email=f"rate{n}@example.com", name=f"Rate {n}")
        _fill(t, 10)
        run_digest_job()
        _fill(t, 5)
        run_digest_job()
        assert audit_export.verify_live(workspace_scope(t.workspace_id)).ok
        attack(t)
        detected.append(not audit_export.verify_live(workspace_scope(t.workspace_id)).ok)
    assert sum(detected) / len(detected) == 1.0, dict(zip(sorted(LIVE_ATTACKS), detected, strict=True))


def test_digests_are_signed_linked_and_object_locked(digested: Tenant) -> None:
    older, newer = audit_digests.digests(digested.region, digested.workspace_id)
    assert newer.body["previous_digest_key"] == older.key
    assert newer.body["previous_digest_sha256"] == hashlib.sha256(older.raw).hexdigest()
    assert (newer.body["head_seq"], newer.body["count"]) == (16, 16)
    assert newer.body["head_hash"] == _events(digested)[-1]["hash"]
    head = aws.client("s3", digested.region).head_object(Bucket=aws.bucket_name(audit_digests.BUCKET, digested.region),
                                                         Key=newer.key)
    assert head["ObjectLockMode"] == "COMPLIANCE"
    # no change, no new digest
    assert run_digest_job()[digested.region]["written"] == 0


# --- attacks on an export -------------------------------------------------------------------------------

@pytest.fixture
def exported(digested: Tenant) -> dict[str, Any]:
    client = Client(create_app("platform"))
    status, exp, _ = call(client, "POST", "/v1/audit/exports", digested.token, {})
    assert status == 202
    assert run_export_job(digested.region) == [{"batchItemFailures": []}]
    assert audit_export.verify_export(exp["uri"]).ok
    return exp


def _resign(exp: dict[str, Any], region: str, key_arn: str, *, name_key: str | None = None) -> None:
    """Change an event, re-chain the export, rewrite the manifest and sign it with ``key_arn``."""
    s3 = aws.client("s3", region)
    lines = s3.get_object(Bucket=exp["bucket"], Key=exp["events_key"])["Body"].read().decode().splitlines()
    events = [json.loads(line) for line in lines]
    events[5]["details"] = {"i": "rewritten"}
    events = _rechain(events, 5)
    body = ("\n".join(audit.canonical(e) for e in events) + "\n").encode()
    digest = json.loads(s3.get_object(Bucket=exp["bucket"], Key=exp["digest_key"])["Body"].read())
    manifest = dict(digest["manifest"], events_sha256=hashlib.sha256(body).hexdigest(), last_hash=events[-1]["hash"],
                    key_arn=name_key or key_arn)
    sig = aws.client("kms", region).sign(KeyId=key_arn, Message=hashlib.sha256(audit.canonical(manifest).encode()).digest(),
                                         MessageType="DIGEST", SigningAlgorithm=audit_export.SIGNING_ALGORITHM)["Signature"]
    s3.put_object(Bucket=exp["bucket"], Key=exp["events_key"], Body=body)
    s3.put_object(Bucket=exp["bucket"], Key=exp["digest_key"], Body=json.dumps(
        {"manifest": manifest, "signature": base64.b64encode(sig).decode(), "signing_algorithm": audit_export.SIGNING_ALGORITHM}).encode())


def _insider_key(region: str) -> str:
    return aws.client("kms", region).create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]


def test_a_re_signed_export_naming_another_key_is_detected(digested: Tenant, exported: dict[str, Any]) -> None:
    _resign(exported, digested.region, _insider_key(digested.region))
    report = audit_export.verify_export(exported["uri"])
    assert not report.ok
    assert any("signing key other" in p for p in report.problems)
    assert any("chain digest" in p for p in report.problems)  # and the chain digests disagree


def test_a_re_signed_export_claiming_the_export_key_is_detected(digested: Tenant, exported: dict[str, Any]) -> None:
    export_key = aws.client("kms", digested.region).describe_key(KeyId=aws.key_alias(audit_export.SIGNING_KEY))
    _resign(exported, digested.region, _insider_key(digested.region), name_key=export_key["KeyMetadata"]["Arn"])
    report = audit_export.verify_export(exported["uri"])
    assert not report.ok
    assert any("signature is not valid" in p for p in report.problems)


def test_an_export_re_signed_with_the_export_key_itself_is_still_caught_by_the_chain_digests(
        digested: Tenant, exported: dict[str, Any]) -> None:
    """Even a holder of the export key (only the export job's role) cannot re-chain past a digest."""
    export_key = aws.client("kms", digested.region).describe_key(KeyId=aws.key_alias(audit_export.SIGNING_KEY))
    _resign(exported, digested.region, export_key["KeyMetadata"]["Arn"])
    report = audit_export.verify_export(exported["uri"])
    assert not report.ok
    assert any("chain digest" in p for p in report.problems)


def test_the_export_job_refuses_to_sign_a_range_that_disagrees_with_a_digest(digested: Tenant, caplog) -> None:
    overwrite_and_rechain(digested)
    client = Client(create_app("platform"))
    status, exp, _ = call(client, "POST", "/v1/audit/exports", digested.token, {})
    with caplog.at_level("ERROR"):
        [result] = run_export_job(digested.region)
    assert result["batchItemFailures"]  # retried, then the dead-letter queue; nothing signed
    assert any(r.getMessage() == "audit chain tampered" for r in caplog.records)
    assert call(client, "GET", f"/v1/audit/exports/{exp['id']}", digested.token)[0] == 404  # nothing written


def test_the_export_job_refuses_a_re_chained_range_between_two_digests(digested: Tenant, caplog) -> None:
    """Events 12..14 changed and re-chained up to the head: no digest head lies inside 12..14, but the
    range no longer leads to the next digest's head (16)."""
    events = _events(digested)
    events[12]["details"] = {"i": "rewritten"}
    for event in _rechain(events, 12)[12:]:
        _put(digested, event)
    frm, to = events[11]["occurred_at"], events[14]["occurred_at"]
    client = Client(create_app("platform"))
    status, exp, _ = call(client, "POST", "/v1/audit/exports", digested.token, {"from": frm, "to": to})
    assert status == 202
    assert (exp["first_seq"], exp["last_seq"]) == (12, 14)
    with caplog.at_level("ERROR"):
        [result] = run_export_job(digested.region)
    assert result["batchItemFailures"]
    assert any(r.getMessage() == "audit chain tampered" for r in caplog.records)


def test_an_untouched_range_between_two_digests_exports_and_verifies(digested: Tenant) -> None:
    events = _events(digested)
    client = Client(create_app("platform"))
    status, exp, _ = call(client, "POST", "/v1/audit/exports", digested.token,
                          {"from": events[11]["occurred_at"], "to": events[14]["occurred_at"]})
    assert status == 202
    assert run_export_job(digested.region) == [{"batchItemFailures": []}]
    report = audit_export.verify_export(exp["uri"])
    assert report.ok
    assert "no signed chain digest has its head inside the export" in report.checks


# --- after the newest digest: the change stream ------------------------------------------------------

def rechain_after_the_newest_digest(t: Tenant) -> None:
    """Overwrite the events appended since the newest digest and re-chain them: the chain still reaches
    the digest's head, so only the change stream shows the PutItem over existing events."""
    events = _events(t)
    events[16]["details"] = {"i": "rewritten"}
    for event in _rechain(events, 16)[16:]:
        _put(t, event)


def truncate_after_the_newest_digest(t: Tenant) -> None:
    for event in _events(t)[16:]:
        _delete(t, event["seq"])


@pytest.mark.parametrize("attack", [rechain_after_the_newest_digest, truncate_after_the_newest_digest],
                         ids=["rechain", "truncate"])
def test_tampering_after_the_newest_digest_is_caught_by_the_change_stream(digested: Tenant, attack, caplog) -> None:
    _fill(digested, 3)  # seq 17..19, not yet digested
    assert audit_export.verify_live(workspace_scope(digested.workspace_id)).ok
    attack(digested)
    assert audit.verify_live(digested.region, digested.workspace_id).ok  # the chain alone: fooled
    with caplog.at_level("ERROR"):
        result = run_digest_job()
    assert any("change stream record" in f for f in result[digested.region]["tampered"][digested.workspace_id])
    assert any(r.getMessage() == "audit chain tampered" for r in caplog.records)
    report = audit_export.verify_live(workspace_scope(digested.workspace_id))
    assert not report.ok
    assert any("tamper alarm" in p for p in report.problems)
    run_digest_job()  # the alarm stays: later runs do not clear it
    assert not audit_export.verify_live(workspace_scope(digested.workspace_id)).ok


def test_appends_alone_raise_no_alarm(digested: Tenant) -> None:
    _fill(digested, 3)
    result = run_digest_job()
    assert digested.workspace_id not in result[digested.region]["tampered"]
    assert audit_digests.alarms(digested.region, digested.workspace_id) == []
    assert audit_export.verify_live(workspace_scope(digested.workspace_id)).ok
