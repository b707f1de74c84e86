"""The audit writer appends a hash chain in the workspace's region; the verifier finds any change."""
from __future__ import annotations

import copy
import threading

from chalicelib.core import audit
from chalicelib.core.audit import Actor, verify_chain
from tests.functional.conftest import Tenant, make_tenant

ALICE = Actor("user", "usr_alice", "alice@example.com")


def _chain(t: Tenant, n: int = 5) -> list[dict]:
    for i in range(n):
        audit.append(t.region, t.workspace_id, "test.event", actor=ALICE, target={"type": "thing", "id": str(i)},
                     details={"i": i})
    return list(audit.iter_chain(t.region, t.workspace_id))


def test_chain_links_and_verifies(tenant: Tenant) -> None:
    events = _chain(tenant)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["prev_hash"] == audit.GENESIS
    assert all(b["prev_hash"] == a["hash"] for a, b in zip(events, events[1:], strict=False))
    assert audit.verify_live(tenant.region, tenant.workspace_id).ok


def test_changed_event_detected(tenant: Tenant) -> None:
    events = _chain(tenant)
    tampered = copy.deepcopy(events)
    tampered[2]["details"] = {"i": 999}
    result = verify_chain(tampered)
    assert not result.ok
    assert any("changed" in p for p in result.problems)


def test_deleted_event_detected(tenant: Tenant) -> None:
    events = _chain(tenant)
    result = verify_chain(events[:2] + events[3:])
    assert not result.ok
    assert any("missing or reordered" in p for p in result.problems)


def test_reordered_events_detected(tenant: Tenant) -> None:
    events = _chain(tenant)
    swapped = events[:1] + [events[2], events[1]] + events[3:]
    assert not verify_chain(swapped).ok


def test_rehashed_forgery_detected_by_link(tenant: Tenant) -> None:
    """Recomputing a changed event's own hash still breaks the next event's prev_hash."""
    events = _chain(tenant)
    forged = copy.deepcopy(events)
    forged[1]["actor"] = {"type": "user", "id": "usr_mallory", "email": "m@example.com"}
    forged[1]["hash"] = audit.compute_hash(forged[1])
    result = verify_chain(forged)
    assert not result.ok
    assert any("prev_hash" in p for p in result.problems)


def test_tampering_in_the_table_detected_by_live_verifier(tenant: Tenant) -> None:
    _chain(tenant)
    item = audit.model(tenant.region).get(tenant.workspace_id, 3)
    item.details = '{"i":42}'
    item.save()  # what an attacker with table access could do; no product code path does this
    assert not audit.verify_live(tenant.region, tenant.workspace_id).ok


def test_concurrent_appends_keep_one_unbroken_chain(tenant: Tenant) -> None:
    def writer(k: int) -> None:
        for i in range(5):
            audit.append(tenant.region, tenant.workspace_id, "test.concurrent", actor=ALICE, details={"k": k, "i": i})

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result = audit.verify_live(tenant.region, tenant.workspace_id)
    assert result.ok, result.problems
    assert result.count == 1 + 20  # workspace.created + 20


def test_event_fields_and_region(stack: None) -> None:
    eu = make_tenant(email="eu@example.com", residency="eu-central", name="EU")
    event = audit.append(eu.region, eu.workspace_id, "member.mfa_reset", actor=ALICE,
                         target={"type": "user", "id": "usr_bob"})
    assert {"id", "workspace_id", "occurred_at", "actor", "action", "target", "correlation_id", "ip",
            "user_agent", "details", "prev_hash", "hash"} <= set(event)
    assert event["id"].startswith("evt_")
    assert event["occurred_at"].endswith("Z")
    assert audit.head("eu-central-1", eu.workspace_id).id == event["id"]
    assert audit.head("us-east-1", eu.workspace_id) is None


def test_no_code_path_updates_or_deletes_audit_events() -> None:
    """Static guard: nothing in the product calls update/delete on the audit model or table."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[3]
    offenders = []
    for path in list((root / "chalicelib").rglob("*.py")) + list((root / "infra").rglob("*.py")):
        text = path.read_text()
        if "audit" not in text:
            continue
        for m in re.finditer(r"(AuditEventAttrs|audit\.model\([^)]*\)|audit_events)[^\n]*\.(update|delete)\(", text):
            offenders.append(f"{path.name}: {m.group(0)}")
    assert offenders == []


def test_an_event_that_cannot_be_placed_raises_and_is_logged(tenant: Tenant, monkeypatch, caplog) -> None:
    """A writer that keeps losing the race (here: it always sees a stale head) never returns as if the
    event were written: it raises and logs an error, and the chain is unchanged."""
    before = audit.verify_live(tenant.region, tenant.workspace_id)
    monkeypatch.setattr(audit, "MAX_APPEND_ATTEMPTS", 3)
    stale = audit._Head(0, audit.GENESIS, "", None)  # always proposes seq 1 (taken)
    monkeypatch.setattr(audit, "_read_head", lambda region, workspace_id: stale)
    audit.forget_heads()
    with caplog.at_level("ERROR", logger="aiplat-svc.audit"):
        try:
            audit.append(tenant.region, tenant.workspace_id, "test.lost", actor=ALICE)
        except audit.AuditAppendFailed:
            pass
        else:
            raise AssertionError("append returned although the event was not written")
    assert any(r.getMessage() == "audit append failed" for r in caplog.records)
    monkeypatch.undo()
    after = audit.verify_live(tenant.region, tenant.workspace_id)
    assert after.ok
    assert after.count == before.count
    assert all(e["action"] != "test.lost" for e in audit.iter_chain(tenant.region, tenant.workspace_id))


def test_a_head_item_that_lags_behind_the_events_is_caught_up(tenant: Tenant) -> None:
    """Events appended without moving the head item (an older writer, a bulk load) do not block the
    chain: the next append finds the taken seq, reads the last event and links after it."""
    first = audit.append(tenant.region, tenant.workspace_id, "test.one", actor=ALICE)
    audit.model(tenant.region)(  # an event written around the head item (as an older writer did)
        tenant.workspace_id, first["seq"] + 1, id="evt_x", occurred_at=first["occurred_at"], actor="{}",
        action="test.raw", target="{}", correlation_id="c", details="{}", prev_hash=first["hash"],
        hash="0" * 64).save()
    audit.forget_heads()
    after = audit.append(tenant.region, tenant.workspace_id, "test.two", actor=ALICE)
    assert after["seq"] == first["seq"] + 2
    assert audit.head_model(tenant.region).get(tenant.workspace_id).seq == after["seq"]
