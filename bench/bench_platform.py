"""Platform API throughput through the Chalice test client under moto (in-process ``mock_aws``):
``GET /v1/workspaces/{id}``, ``POST /v1/workspaces/{id}/invitations`` and ``GET /v1/audit/events`` over a
100,000-event chain, page 1 against page 1000 (cursor paging must cost the same on every page). Each
figure has a same-run reference: the bare PynamoDB call of the same shape on the same moto tables."""
from __future__ import annotations

import json
import os
import time
from typing import Any

from bench.common import use_emulator

EVENTS = int(os.environ.get("BENCH_AUDIT_EVENTS", "100000"))
PAGE = 100


def _env() -> None:
    use_emulator()
    os.environ.pop("MAIL_OUTBOX_DIR", None)


def _fill_chain(region: str, workspace_id: str, n: int) -> float:
    """Append ``n`` well-formed chained events after the existing head with batch writes; returns seconds."""
    from chalicelib.core import audit, clock

    cls = audit.model(region)
    last = audit.head(region, workspace_id)
    seq, prev = (int(last.seq), last.hash) if last else (0, audit.GENESIS)
    base = clock.now()
    actors = [audit.Actor("user", f"usr_bench{i}", f"user{i}@example.com") for i in range(10)]
    started = time.perf_counter()
    with cls.batch_write() as batch:
        for i in range(n):
            seq += 1
            event: dict[str, Any] = {
                "id": f"evt_bench{seq:012d}", "workspace_id": workspace_id, "seq": seq,
                "occurred_at": clock.iso(base + i * 0.01), "actor": actors[i % 10].as_dict(),
                "action": "member.role_changed" if i % 100 == 0 else "chat.message_sent",
                "target": {"type": "chat", "id": f"chat_{i}"}, "correlation_id": f"bench-{i:08d}",
                "ip": "127.0.0.1", "user_agent": "bench", "details": {"i": i}, "prev_hash": prev,
            }
            event["hash"] = audit.compute_hash(event)
            prev = event["hash"]
            batch.save(cls(workspace_id, seq, id=event["id"], occurred_at=event["occurred_at"],
                           actor=audit.canonical(event["actor"]), action=event["action"],
                           target=audit.canonical(event["target"]), correlation_id=event["correlation_id"],
                           ip=event["ip"], user_agent=event["user_agent"], details=audit.canonical(event["details"]),
                           prev_hash=event["prev_hash"], hash=event["hash"]))
    clock.advance(n * 0.01 + 1)
    return time.perf_counter() - started


def main() -> None:
    _env()
    from chalice.test import Client
    from moto import mock_aws

    from bench.common import measure, table
    from chalicelib.core import audit
    from chalicelib.core.http import paging
    from chalicelib.core.tenancy import workspaces
    from chalicelib.groups import create_app
    from chalicelib.identity import users
    from chalicelib.identity.oauth.signing import issue_access_token
    from chalicelib.platform.models import invitations
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_all

    with mock_aws():
        bootstrap_all()
        user = users.create_user("bench@example.com", email_verified=True)
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench", residency="us-east",
                              enforce_mfa=False)
        token, _ = issue_access_token(user_id=user.id, email=user.email, workspace_id=ws.id, roles=["admin"],
                                      amr=["pwd", "otp", "mfa"], ttl=24 * 3600)
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        client = Client(create_app("platform"))

        def get_ws() -> None:
            r = client.http.get(f"/v1/workspaces/{ws.id}", headers=auth)
            assert r.status_code == 200, r.body

        def bare_get() -> None:
            workspaces().get(ws.id)

        counter = iter(range(10**9))

        def post_inv() -> None:
            body = json.dumps({"email": f"invitee{next(counter)}@example.com", "role": "member"})
            r = client.http.post(f"/v1/workspaces/{ws.id}/invitations", headers=auth, body=body)
            assert r.status_code == 201, r.body

        inv_cls = invitations(ws.region)

        def bare_put() -> None:
            n = next(counter)
            inv_cls(ws.id, f"inv_bare{n:012d}", email=f"b{n}@example.com", role="member", status="pending",
                    invited_by="{}", created_at="2026-01-01T00:00:00.000Z", expires_at=0).save()

        rows = [
            (measure("GET /v1/workspaces/{id}", get_ws, n=200), measure("bare PynamoDB get_item (workspace)", bare_get, n=200),
             "reads: token check, live membership, directory entry"),
            (measure("POST /v1/workspaces/{id}/invitations", post_inv, n=50, repeat=3, warmup=5),
             measure("bare PynamoDB put_item (invitation)", bare_put, n=50, repeat=3, warmup=5),
             "transaction + mail + audit append"),
        ]
        table("Platform API through the Chalice test client (moto in-process)", rows)

        seconds = _fill_chain(ws.region, ws.id, EVENTS)
        total = audit.head(ws.region, ws.id).seq
        print(f"wrote {EVENTS:,} chained audit events by batch writes in {seconds:.1f} s "
              f"({EVENTS / seconds:,.0f} events/s); chain length {int(total):,}\n", flush=True)
        deep = min(1000, EVENTS // PAGE)  # page 1000 with the full 100k chain
        deep_after = paging.encode("audit", (deep - 1) * PAGE)  # the cursor that page `deep` is asked with
        cls = audit.model(ws.region)

        def audit_page(after: str | None, extra: str = "") -> Any:
            def run() -> None:
                q = f"/v1/audit/events?limit={PAGE}" + (f"&after={after}" if after else "") + extra
                r = client.http.get(q, headers=auth)
                assert r.status_code == 200 and len(json.loads(r.body)["events"]) == PAGE, r.body[:300]
            return run

        def sparse_page(after: str | None) -> Any:
            def run() -> None:
                q = "/v1/audit/events?limit=10&action=member.role_changed" + (f"&after={after}" if after else "")
                r = client.http.get(q, headers=auth)
                assert r.status_code == 200 and json.loads(r.body)["events"], r.body[:300]
            return run

        middle = audit.to_dict(cls.get(ws.id, int(total) // 2))["occurred_at"]

        def bare_query(start: int) -> Any:
            def run() -> None:
                assert len(list(cls.query(ws.id, cls.seq > start, limit=PAGE, page_size=PAGE + 1))) == PAGE
            return run

        reps = {"n": 2, "repeat": 2, "warmup": 1}
        ref1 = measure("bare PynamoDB query, 100 items from seq 1", bare_query(0), **reps)
        ref_deep = measure(f"bare PynamoDB query, 100 items from seq {(deep - 1) * PAGE + 1:,}",
                           bare_query((deep - 1) * PAGE), **reps)
        rows = [
            (measure("GET /v1/audit/events page 1 (limit 100)", audit_page(None), **reps), ref1,
             f"same as page {deep}"),
            (measure(f"GET /v1/audit/events page {deep} (limit 100)", audit_page(deep_after), **reps), ref_deep,
             "same as page 1"),
            (measure("GET /v1/audit/events?from=<middle> page 1", audit_page(None, f"&from={middle}"), **reps),
             ref_deep, "one by_time lookup more"),
        ]
        sparse = [
            (measure("GET /v1/audit/events?action=member.role_changed (1 in 100 match), page 1",
                     sparse_page(None), **reps), None, "reads <= MAX_SCANNED events per request"),
            (measure(f"... same filter, from seq {(deep - 1) * PAGE:,}", sparse_page(deep_after), **reps), None,
             "same as page 1"),
        ]
        table(f"Audit events over {int(total):,} events: cursor paging cost by page number", rows)
        table("Audit events with a sparse server-side filter (the answer may hold fewer than limit events)", sparse)
        _dynamodb_work(client, auth, cls, deep, deep_after, middle)


def _dynamodb_work(client: Any, auth: dict[str, str], cls: Any, deep: int, deep_after: str, middle: str) -> None:
    """Backend-independent proof: the DynamoDB Query calls and items read for one API request."""
    counts = {"queries": 0, "scanned": 0, "returned": 0}

    def on_query(parsed: dict[str, Any], **_: Any) -> None:
        counts["queries"] += 1
        counts["scanned"] += int(parsed.get("ScannedCount", 0))
        counts["returned"] += int(parsed.get("Count", 0))

    events = cls._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb.Query", on_query)
    cases = [("page 1", "/v1/audit/events?limit=100"),
             (f"page {deep}", f"/v1/audit/events?limit=100&after={deep_after}"),
             ("from=<middle>, page 1", f"/v1/audit/events?limit=100&from={middle}"),
             ("action filter, page 1", "/v1/audit/events?limit=10&action=member.role_changed"),
             (f"action filter, from page {deep}", f"/v1/audit/events?limit=10&action=member.role_changed&after={deep_after}")]
    lines = ["### DynamoDB work per GET /v1/audit/events request (counted on the client)", "",
             "| request | Query calls | items read (ScannedCount) | items matched | events answered |",
             "|---|---:|---:|---:|---:|"]
    for label, path in cases:
        for k in counts:
            counts[k] = 0
        r = client.http.get(path, headers=auth)
        answered = len(json.loads(r.body)["events"])
        lines.append(f"| {label} | {counts['queries']} | {counts['scanned']} | {counts['returned']} | {answered} |")
    events.unregister("after-call.dynamodb.Query", on_query)
    print("\n".join(lines) + "\n", flush=True)


if __name__ == "__main__":
    main()
