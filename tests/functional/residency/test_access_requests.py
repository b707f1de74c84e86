"""Access requests: an export holds the user's data from the global store and from both regions; an
erasure removes it while every audit chain still verifies and shows the pseudonym; an erased user stays
erased after a restore of an older backup; refusals change nothing."""
from __future__ import annotations

import io
import json
import zipfile
from typing import Any
from urllib.parse import urlparse

from chalicelib.core import audit, aws, clock
from chalicelib.core.tenancy import memberships, workspace_scope
from chalicelib.platform.audit import export as audit_export
from chalicelib.residency import backups
from chalicelib.residency.models import erased_users, erasure_ledger
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.data import Caller, token_for
from tests.functional.platform import scenario
from tests.functional.platform.audit_jobs import run_digest_job
from tests.functional.residency.helpers import client, get, post, put
from tests.functional.residency.jobs import run_residency_jobs

BOB = "bob.personal@example.com"
US_SECRET, EU_SECRET = "bob-us-diary-4471", "bob-eu-diary-9902"


class _Caller:
    def __init__(self, ip: str) -> None:
        self.ip, self.user_agent, self.correlation_id = ip, "BobBrowser/1.0", "cid-bob"


def _seed_bob(t: Tenant, bob: Caller, secret: str) -> None:
    """Bob's content in one workspace: a chat, agent memory, a run with its log, an invitation to his
    address, an audit event he caused (with his IP), and a chat of someone else that must survive."""
    ws, s = t.workspace_id, {"S": t.workspace_id}
    put(t.region, "chats", {"workspace_id": s, "id": {"S": "chat_bob"}, "user_id": {"S": bob.user_id},
                            "title": {"S": secret}, "messages": {"S": json.dumps([{"role": "user", "content": secret}])}})
    put(t.region, "chats", {"workspace_id": s, "id": {"S": "chat_owner"}, "user_id": {"S": t.user_id},
                            "title": {"S": "owner's chat"}})
    put(t.region, "chats", {"workspace_id": s, "id": {"S": "pre_bob"}, "owner": {"S": bob.user_id},  # a private preset
                            "user_id": {"S": bob.user_id}, "name": {"S": "Bob's tone"}, "instructions": {"S": secret},
                            "created_by": {"S": bob.user_id}, "created_at": {"S": "2026-01-01T00:00:00Z"}})
    put(t.region, "agent_memory", {"scope": {"S": f"{ws}#agt_1#{bob.user_id}"}, "key": {"S": "diary"},
                                   "value": {"S": secret}})
    put(t.region, "agent_runs", {"workspace_id": s, "id": {"S": "run_bob"}, "user_id": {"S": bob.user_id},
                                 "user_email": {"S": BOB}, "input": {"S": json.dumps({"q": secret})}})
    put(t.region, "agent_run_log", {"run_key": {"S": f"{ws}#run_bob"}, "sk": {"S": "step#0001"}, "text": {"S": secret}})
    put(t.region, "invitations", {"workspace_id": s, "id": {"S": "inv_bob"}, "email": {"S": BOB},
                                  "status": {"S": "pending"}, "invited_by": {"S": json.dumps({"id": t.user_id})}})
    audit.append(t.region, ws, "chat.created", actor=audit.Actor("user", bob.user_id, BOB), caller=_Caller("203.0.113.7"),
                 target={"type": "chat", "id": "chat_bob"})
    audit.append(t.region, ws, "member.role_changed", actor=audit.Actor("user", t.user_id, t.email),
                 target={"type": "user", "id": bob.user_id, "email": BOB})


def _seed_global(bob: Caller) -> None:
    g = "us-east-1"
    aws.client("dynamodb", g).update_item(TableName=aws.table_name("users"), Key={"id": {"S": bob.user_id}},
                                          UpdateExpression="SET password_hash = :p, totp_secret_enc = :t",
                                          ExpressionAttributeValues={":p": {"S": "$argon2id$bob"}, ":t": {"S": "ENC"}})
    put(g, "sessions", {"sid_hash": {"S": "h1"}, "session_id": {"S": "sess_bob"}, "user_id": {"S": bob.user_id},
                        "ip": {"S": "203.0.113.7"}, "created_at": {"N": "1"}, "expires_at": {"N": "9999999999"}})
    put(g, "api_tokens", {"id": {"S": "tok_bob"}, "user_id": {"S": bob.user_id}, "name": {"S": "laptop"}})
    put(g, "webauthn_credentials", {"user_id": {"S": bob.user_id}, "credential_id": {"S": "cred1"},
                                    "kind": {"S": "passkey"}, "name": {"S": "Bob's key"}, "public_key": {"S": "pk"}})
    put(g, "oauth_consents", {"user_id": {"S": bob.user_id}, "key": {"S": "cli_x#ws_x"}, "client_id": {"S": "cli_x"},
                              "client_name": {"S": "Bob's calendar app"}, "scopes": {"S": "openid"}})
    put(g, "auth_state", {"pk": {"S": f"rc#{bob.user_id}"}, "hashes": {"SS": ["x", "y"]}})
    put(g, "auth_state", {"pk": {"S": f"totp#{bob.user_id}"}, "step": {"N": "5"}})


def _world() -> tuple[Tenant, Tenant, Caller, Caller]:
    us = make_tenant("owner@example.com", name="US Co")
    eu = make_tenant("eu-owner@example.com", residency="eu-central", name="EU GmbH")
    bob_us = token_for(us.workspace_id, "member", email=BOB)
    bob_eu = token_for(eu.workspace_id, "member", email=BOB)
    assert bob_us.user_id == bob_eu.user_id  # one identity, a member in both regions
    _seed_bob(us, bob_us, US_SECRET)
    _seed_bob(eu, bob_eu, EU_SECRET)
    _seed_global(bob_us)
    return us, eu, bob_us, bob_eu


def _read_zip(url: str, region: str) -> dict[str, list[dict[str, Any]]]:
    parsed = urlparse(url)
    bucket = aws.bucket_name("access-exports", region)
    assert "Signature=" in parsed.query
    assert bucket in url  # presigned, on the region's own bucket
    key = parsed.path.lstrip("/").removeprefix(bucket + "/")
    body = aws.client("s3", region).get_object(Bucket=bucket, Key=key)["Body"].read()
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        return {n: [json.loads(line) for line in z.read(n).decode().splitlines()] for n in z.namelist()}


def _everything() -> str:
    """Every item of every table in every region, and every object, as one string to search."""
    snap = scenario.snapshot()
    blobs = [json.dumps(snap)]
    for region in ("us-east-1", "eu-central-1"):
        s3 = aws.client("s3", region)
        for bucket in ("data", "documents", "knowledge"):
            name = aws.bucket_name(bucket, region)
            for o in s3.list_objects_v2(Bucket=name).get("Contents", []):
                blobs.append(s3.get_object(Bucket=name, Key=o["Key"])["Body"].read().decode(errors="replace"))
    return "\n".join(blobs)


def test_export_holds_the_users_data_from_the_global_store_and_both_regions(stack: None) -> None:
    us, eu, bob, _ = _world()
    c = client()
    res = post(c, "/v1/access-requests", bob.token, {"kind": "export", "user_id": bob.user_id})
    assert res.status_code == 202, res.body
    req = res.json_body
    assert req["status"] == "queued"
    assert req["scope"] == "account"
    assert (clock.parse_iso(req["due_at"]) - clock.parse_iso(req["requested_at"])).total_seconds() == 7 * 24 * 3600
    run_residency_jobs()
    done = get(c, f"/v1/access-requests/{req['id']}", bob.token).json_body
    assert done["status"] == "completed"
    parts = {p["region"]: p for p in done["downloads"]}
    assert set(parts) == {"us-east-1", "eu-central-1"}
    us_zip, eu_zip = _read_zip(parts["us-east-1"]["url"], "us-east-1"), _read_zip(parts["eu-central-1"]["url"], "eu-central-1")
    # the global store's part (in the request's region): directory entry, sessions, tokens, passkeys
    glob = {(r["table"]): r["item"] for r in us_zip["global.jsonl"]}
    assert glob["users"]["email"] == BOB
    assert glob["users"]["password_hash"] == "(exists; not exported)"
    assert "$argon2id$bob" not in json.dumps(us_zip)
    assert {r["table"] for r in us_zip["global.jsonl"]} >= {"users", "sessions", "api_tokens", "webauthn_credentials",
                                                           "oauth_consents", "auth_state"}
    # each region's part holds that region's workspace data, and only that region's
    us_rows = us_zip[f"us-east-1/{us.workspace_id}.jsonl"]
    eu_rows = eu_zip[f"eu-central-1/{eu.workspace_id}.jsonl"]
    for rows, secret in ((us_rows, US_SECRET), (eu_rows, EU_SECRET)):
        tables = {r["table"] for r in rows}
        assert tables >= {"memberships", "chats", "presets", "agent_runs", "agent_memory", "invitations", "audit_events"}
        # a private preset is exported as a preset, not listed among the chats
        assert [r["item"]["id"] for r in rows if r["table"] == "presets"] == ["pre_bob"]
        assert all(r["item"]["id"].startswith("chat_") for r in rows if r["table"] == "chats")
        assert secret in json.dumps(rows)
        assert "owner's chat" not in json.dumps(rows)  # another member's content is not Bob's
        events = [r["item"] for r in rows if r["table"] == "audit_events"]
        assert any(e["ip"] == "203.0.113.7" and e["actor"]["email"] == BOB for e in events)
    assert EU_SECRET not in json.dumps(us_zip)
    assert US_SECRET not in json.dumps(eu_zip)
    assert "global.jsonl" not in eu_zip
    actions = [e["action"] for e in audit.iter_chain(us.region, us.workspace_id) if e["action"].startswith("access_request.")]
    assert actions == ["access_request.created", "access_request.completed"]


def test_erasure_removes_personal_data_and_every_chain_still_verifies(stack: None) -> None:
    us, eu, bob_us, bob_eu = _world()
    c = client()
    # an Admin erases Bob from the US workspace: his data there goes; his EU membership and identity stay
    res = post(c, "/v1/access-requests", us.token, {"kind": "erase", "user_id": bob_us.user_id})
    assert res.status_code == 202
    assert res.json_body["scope"] == "workspace"
    run_residency_jobs()
    done = get(c, f"/v1/access-requests/{res.json_body['id']}", us.token).json_body
    assert done["status"] == "completed"
    assert "identity" not in done["erased"]
    assert done["erased"]["workspaces"][us.workspace_id]["chats"] == 1
    assert done["erased"]["workspaces"][us.workspace_id]["presets"] == 1  # his private preset, counted as one
    everything = _everything()
    assert US_SECRET not in everything
    assert EU_SECRET in everything
    assert BOB in everything
    # Bob erases his own account (from the EU workspace): every region and the global directory
    res = post(c, "/v1/access-requests", bob_eu.token, {"kind": "erase", "user_id": bob_eu.user_id})
    assert res.status_code == 202
    assert res.json_body["scope"] == "account"
    run_residency_jobs()
    done = get(c, f"/v1/access-requests/{res.json_body['id']}", eu.token).json_body
    assert done["status"] == "completed"
    assert done["erased"]["identity"]["directory"] >= 2  # entry + e-mail claim
    for token in (bob_eu.token, bob_us.token):  # his tokens die with the account, on global routes too
        assert get(c, "/v1/me", token).status_code == 401
    everything = _everything()
    for personal in (BOB, US_SECRET, EU_SECRET, "203.0.113.7", "$argon2id$bob", "Bob's key", "BobBrowser",
                     "Bob's calendar app"):
        assert personal not in everything, personal
    assert not list(memberships("us-east-1").by_user.query(bob_us.user_id))
    assert not list(memberships("eu-central-1").by_user.query(bob_us.user_id))
    assert "owner's chat" in everything  # nobody else's data went
    # the ledgers hold only ids and a MAC
    entry = erasure_ledger("eu-central-1").get(eu.workspace_id, bob_eu.user_id)
    assert BOB not in json.dumps(entry.attribute_values)
    assert len(entry.email_mac) == 64
    assert erased_users().get(bob_eu.user_id).email_mac
    # every chain verifies (alone, against the signed digests, and the export verification) with pseudonyms
    run_digest_job()
    for t in (us, eu):
        assert audit.verify_live(t.region, t.workspace_id).ok
        assert audit_export.verify_live(workspace_scope(t.workspace_id)).ok
        bobs = [e for e in audit.iter_chain(t.region, t.workspace_id) if e["actor"].get("id") == bob_us.user_id]
        assert bobs
        assert (all(e["erased"] and e["actor"]["pseudonym"] == audit.pseudonym(bob_us.user_id)
                            and e["ip"] == "" and "email" not in e["actor"] for e in bobs))
        [changed] = [e for e in audit.iter_chain(t.region, t.workspace_id) if e["action"] == "member.role_changed"]
        assert changed["erased"]
        assert "email" not in changed["target"]
        assert changed["actor"]["email"] == t.email  # the Admin's own values are not Bob's and remain
        listed = get(c, "/v1/audit/events?limit=1000", t.token).json_body["events"]
        assert BOB not in json.dumps(listed)
        assert "user.erased" in [e["action"] for e in listed]


def test_an_erased_user_stays_erased_after_restoring_an_older_backup(stack: None) -> None:
    us, _eu, bob, _ = _world()
    older = backups.create(us.region, us.workspace_id)["id"]  # holds Bob's chat, memory, run, invitation
    c = client()
    post(c, "/v1/access-requests", us.token, {"kind": "erase", "user_id": bob.user_id})
    run_residency_jobs()
    aws.client("dynamodb", us.region).delete_item(TableName=aws.table_name("chats"), Key={
        "workspace_id": {"S": us.workspace_id}, "id": {"S": "chat_owner"}})  # lost after the backup
    second = token_for(us.workspace_id, "admin")
    rid = post(c, f"/v1/backups/{older}/restore-requests", us.token).json_body["id"]
    assert post(c, f"/v1/backups/{older}/restore-requests/{rid}/approve", second.token).status_code == 202
    run_residency_jobs()
    done = get(c, f"/v1/backups/{older}/restore-requests/{rid}", us.token).json_body
    assert done["status"] == "restored"
    assert done["report"]["erasures_replayed"] == 1
    assert done["report"]["tables"]["chats"]["added"] == 3  # all came back (Bob's chat and preset, the owner's) ...
    everything = _everything()
    assert "owner's chat" in everything  # ... the owner's stays restored
    assert US_SECRET not in everything  # ... Bob's chat, preset, memory, run and log were erased again
    chats = aws.client("dynamodb", us.region).query(
        TableName=aws.table_name("chats"), KeyConditionExpression="workspace_id = :w",
        ExpressionAttributeValues={":w": {"S": us.workspace_id}})["Items"]
    assert [i["id"]["S"] for i in chats] == ["chat_owner"]
    invitations = aws.client("dynamodb", us.region).query(
        TableName=aws.table_name("invitations"), KeyConditionExpression="workspace_id = :w",
        ExpressionAttributeValues={":w": {"S": us.workspace_id}})["Items"]
    assert not [i for i in invitations if BOB in json.dumps(i)]
    assert audit.verify_live(us.region, us.workspace_id).ok


def test_refusals_change_nothing(stack: None) -> None:
    us, eu, bob, _ = _world()
    carol = make_tenant("carol@example.com", name="Carol's")  # a member of another workspace only
    member = token_for(us.workspace_id, "member")
    c = client()
    before = scenario.snapshot()
    attempts = [
        (us.token, {"kind": "erase", "user_id": carol.user_id}, 404),  # erasure of another workspace's user
        (us.token, {"kind": "export", "user_id": carol.user_id}, 404),
        (us.token, {"kind": "erase", "user_id": "usr_not-an-id"}, 404),
        (member.token, {"kind": "export", "user_id": bob.user_id}, 403),  # a non-Admin about someone else
        (member.token, {"kind": "erase", "user_id": bob.user_id}, 403),
        (us.token, {"kind": "erase", "user_id": us.user_id}, 409),  # the only Admin
        (us.token, {"kind": "shred", "user_id": bob.user_id}, 400),
        (us.token, {"kind": "erase", "user_id": bob.user_id, "force": True}, 400),
    ]
    for token, body, status in attempts:
        res = post(c, "/v1/access-requests", token, body)
        assert res.status_code == status, (body, res.body)
        assert res.headers["Content-Type"].startswith("application/problem+json")
    assert scenario.snapshot() == before
    assert run_residency_jobs() == []
    # a request is not readable from another workspace, nor by an unrelated member
    rid = post(c, "/v1/access-requests", bob.token, {"kind": "export", "user_id": bob.user_id}).json_body["id"]
    assert get(c, f"/v1/access-requests/{rid}", eu.token).status_code == 404
    assert get(c, f"/v1/access-requests/{rid}", member.token).status_code == 404
    assert get(c, f"/v1/access-requests/{rid}", us.token).status_code == 404  # a member's own: hers only
    assert get(c, f"/v1/access-requests/{rid}", bob.token).status_code == 200


ADMIN_IP, ADMIN_UA = "198.51.100.9", "AdminBrowser/9.9"


class _AdminCaller:
    ip, user_agent, correlation_id = ADMIN_IP, ADMIN_UA, "cid-admin"


def _zips(done: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    return {p["region"]: _read_zip(p["url"], p["region"]) for p in done["downloads"]}


def test_an_admin_gets_nothing_of_a_members_own_export_whatever_the_id(stack: None) -> None:
    """Bob exports his own account (his private chats in every tenant). The Admin of the workspace finds
    the request id in the audit trail and asks for it: 404, no link, nothing of the archive."""
    us, eu, bob, _ = _world()
    c = client()
    rid = post(c, "/v1/access-requests", bob.token, {"kind": "export", "user_id": bob.user_id}).json_body["id"]
    run_residency_jobs()
    listed = get(c, "/v1/audit/events?limit=1000", us.token).json_body["events"]
    seen = {e["target"]["id"] for e in listed if e["action"].startswith("access_request.")}
    assert rid in seen  # the attacker's starting point
    second_admin = token_for(us.workspace_id, "admin")
    for admin in (us.token, second_admin.token, eu.token):
        res = get(c, f"/v1/access-requests/{rid}", admin)
        assert res.status_code == 404, res.body
        assert res.headers["Content-Type"].startswith("application/problem+json")
        for secret in (US_SECRET, EU_SECRET, "Signature=", "access-exports"):
            assert secret not in res.body.decode()
    own = get(c, f"/v1/access-requests/{rid}", bob.token).json_body
    assert own["status"] == "completed" and all(p["url"] for p in own["downloads"])


def test_an_admins_export_about_a_member_holds_neither_account_wide_nor_private_records(stack: None) -> None:
    """An Admin (who only had to get Bob to accept an invitation) exports Bob's data in the workspace:
    no global store records (sessions with IP and user agent, API tokens of every workspace, sign-in
    state), none of Bob's private content (chats, runs, agent memory: the same rule as
    ``GET /v1/chats/{id}``, which answers the Admin 404), and nothing of his other workspaces."""
    us, eu, bob, _ = _world()
    put("us-east-1", "sessions", {"sid_hash": {"S": "h2"}, "session_id": {"S": "sess_bob2"},
                                  "user_id": {"S": bob.user_id}, "ip": {"S": "192.0.2.55"},
                                  "user_agent": {"S": "BobPhone/2"}, "expires_at": {"N": "9999999999"}})
    c = client()
    res = post(c, "/v1/access-requests", us.token, {"kind": "export", "user_id": bob.user_id})
    assert res.status_code == 202 and res.json_body["scope"] == "workspace"
    run_residency_jobs()
    done = get(c, f"/v1/access-requests/{res.json_body['id']}", us.token).json_body
    assert done["status"] == "completed"
    zips = _zips(done)
    assert set(zips) == {"us-east-1"}
    files = zips["us-east-1"]
    assert list(files) == [f"us-east-1/{us.workspace_id}.jsonl"]  # no global.jsonl
    text = json.dumps(files)
    for leaked in ("192.0.2.55", "BobPhone", "sess_bob", "tok_bob", "laptop", "Bob's key", "rc#", "totp#",
                   US_SECRET, EU_SECRET, eu.workspace_id):
        assert leaked not in text, leaked
    rows = files[f"us-east-1/{us.workspace_id}.jsonl"]
    tables = {r["table"] for r in rows}
    assert not tables & {"chats", "presets", "agent_runs", "agent_memory", "sessions", "api_tokens", "auth_state"}
    [withheld] = [r["item"] for r in rows if r["table"] == "withheld"]
    assert withheld["tables"] == ["chats", "presets", "agent_runs", "agent_memory"]
    assert {"memberships", "invitations", "audit_events"} <= tables
    # the chat route says the same to the same Admin
    assert get(c, "/v1/chats/chat_bob", us.token).status_code == 404
    # the links go to the Admin who asked, while an Admin: not to another Admin, not to Bob
    other_admin = token_for(us.workspace_id, "admin")
    for caller in (other_admin.token, bob.token):
        seen = get(c, f"/v1/access-requests/{done['id']}", caller).json_body
        assert [p["url"] for p in seen["downloads"]] == [None], seen
    memberships(us.region)(us.workspace_id, us.user_id).update(
        actions=[memberships(us.region).role.set("member")])  # the requester is demoted
    demoted = get(c, f"/v1/access-requests/{done['id']}", us.token)
    assert demoted.status_code == 200
    assert [p["url"] for p in demoted.json_body["downloads"]] == [None]


def test_a_users_own_export_shows_other_people_only_as_pseudonyms(stack: None) -> None:
    """Bob's own export holds the audit events about him; the Admin who acted on him appears under a
    pseudonym, without her e-mail, IP address or user agent, and no other person's address is in it."""
    us, _eu, bob, _ = _world()
    audit.append(us.region, us.workspace_id, "member.role_changed", actor=audit.Actor("user", us.user_id, us.email),
                 caller=_AdminCaller(), target={"type": "user", "id": bob.user_id, "email": BOB},
                 details={"from": "viewer", "to": "member", "note": f"asked by {us.email}, cc {BOB}"})
    c = client()
    rid = post(c, "/v1/access-requests", bob.token, {"kind": "export", "user_id": bob.user_id}).json_body["id"]
    run_residency_jobs()
    zips = _zips(get(c, f"/v1/access-requests/{rid}", bob.token).json_body)
    text = json.dumps(zips)
    for other in (us.email, ADMIN_IP, ADMIN_UA, "eu-owner@example.com"):
        assert other not in text, other
    rows = zips["us-east-1"][f"us-east-1/{us.workspace_id}.jsonl"]
    events = [r["item"] for r in rows if r["table"] == "audit_events"]
    [changed] = [e for e in events if e["action"] == "member.role_changed" and e["ip"] == ""
                 and e["details"].get("note")]
    assert changed["actor"] == {"type": "user", "pseudonym": audit.pseudonym(us.user_id)}
    assert changed["user_agent"] == ""
    assert changed["target"]["email"] == BOB  # Bob's own values stay
    assert BOB in changed["details"]["note"]
    [own] = [e for e in events if e["action"] == "chat.created"]
    assert own["actor"]["email"] == BOB and own["ip"] == "203.0.113.7" and own["user_agent"] == "BobBrowser/1.0"
    [inv] = [r["item"] for r in rows if r["table"] == "invitations"]
    assert json.loads(inv["invited_by"]) == {"type": "user", "pseudonym": audit.pseudonym(us.user_id)}
