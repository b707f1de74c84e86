"""The isolation proof, in both directions: a workspace uses every kind of content (members,
invitations, chats, documents, datasets, the knowledge index, agent definitions, runs, memory, audit
events, backups and access-request exports); then every table, bucket and queue of the other region is
listed and holds none of it, the global store holds only directory fields, and with replication other
than ``cross-region-dr`` no disaster-recovery region holds a copy."""
from __future__ import annotations

import gzip
import json

import pytest

from chalicelib.core import aws
from chalicelib.core.regions import DR_ONLY_REGIONS
from chalicelib.gateway import demo
from chalicelib.knowledge import indexer
from chalicelib.residency import backups
from chalicelib.workers import jobs
from infra.resources import BUCKETS, DR_BUCKETS, GLOBAL, QUEUES, REGIONAL, TABLES
from tests.functional.agents.helpers import create_agent, deliver, get_run, platform_client, start_run
from tests.functional.chat import helpers as chat
from tests.functional.conftest import is_scope_version_item, make_tenant, stored_items
from tests.functional.gateway.data import field, token_for
from tests.functional.knowledge.helpers import put_keyed
from tests.functional.platform.audit_jobs import run_digest_job
from tests.functional.platform.helpers import call
from tests.functional.residency.jobs import run_residency_jobs

OTHER = {"eu-central-1": "us-east-1", "us-east-1": "eu-central-1"}
# global tables that may name a workspace, and why: the directory entry, aggregate usage counters,
# identity records bound to a workspace id (tokens, clients), the request scope's version item (counters,
# ``revoked_tokens``); none may hold its content
GLOBAL_MAY_NAME_WORKSPACE = frozenset({"workspaces", "usage_counters", "api_tokens", "oauth_clients", "sessions",
                                       "auth_state", "revoked_tokens"})
DIRECTORY_FIELDS = frozenset({"id", "name", "slug", "residency", "region", "enforce_mfa", "replication", "created_at",
                              "created_by", "settings", "billing_plan", "member_count",
                              "replication_secondary_region", "replication_acknowledged_by",
                              "replication_acknowledged_at",
                              "workspace_id"})  # the directory's claim items (e.g. of a slug) point at the id

AGENT = {"name": "Notes keeper", "instructions": "Keep the topic.", "model": "auto",
         "tools": ["query", "memory_write"],
         "plan": [{"name": "rows", "tool": "query", "input": {"sql": "{{input.sql}}", "limit": 5}},
                  {"name": "remember", "tool": "memory_write", "input": {"key": "last_topic", "value": "{{input.topic}}"}}],
         "limits": {"max_steps": 4, "deadline": "PT10M", "max_tokens": 2000}}


def _objects_text(region: str, buckets: tuple[str, ...]) -> str:
    s3 = aws.client("s3", region)
    out = []
    for bucket in buckets:
        name = aws.bucket_name(bucket, region)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for obj in page.get("Contents", []):
                out.append(obj["Key"])
                data = s3.get_object(Bucket=name, Key=obj["Key"])["Body"].read()
                out.append((gzip.decompress(data) if obj["Key"].endswith(".gz") else data).decode(errors="replace"))
    return "\n".join(out)


def _queues_text(region: str) -> str:
    sqs = aws.client("sqs", region)
    out = []
    for q in QUEUES:
        for name in (q.name, q.name + "-dlq"):
            for m in sqs.receive_message(QueueUrl=aws.queue_url(name, region), MaxNumberOfMessages=10,
                                         VisibilityTimeout=0).get("Messages", []):
                out.append(m["Body"])
    return "\n".join(out)


def _use_everything(residency: str, tag: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, list[str]]:
    """Create a workspace in ``residency`` and use every kind of content; returns (workspace id, region,
    needles that only that content contains)."""
    chat.use_providers(monkeypatch, None)
    owner = make_tenant(f"owner-{tag}@example.com", residency=residency, name=f"Iso {tag}")
    ws, region = owner.workspace_id, owner.region
    secret = {k: f"{tag}-{k}-7c1e" for k in ("note", "doc", "topic", "question")}
    mia = token_for(ws, "member", email=f"mia-{tag}@example.com")  # a member
    with platform_client() as c:
        status, inv, _ = call(c, "POST", f"/v1/workspaces/{ws}/invitations", owner.token,
                              {"email": f"ivy-{tag}@invited.example", "role": "viewer"})
        assert status == 201, inv  # an invitation (its mail goes out through the region's SES)
        # a dataset, indexed into the knowledge index, and an uploaded document (the object a presigned
        # PUT writes)
        ds = put_keyed(ws, region, f"notes_{tag}", [field("note")], [(f"The lantern word is {secret['note']}.",)])
        indexer.index_dataset(region, ws, ds)
        aws.client("s3", region).put_object(Bucket=aws.bucket_name("documents", region),
                                            Key=f"uploads/{ws}/conn_{tag}/doc_1/handbook.txt",
                                            Body=f"handbook {secret['doc']}".encode())
        # a chat that cites the index
        res = chat.post(c, "/v1/chats", mia.token, chat.ask(f"What is the lantern word? {secret['question']}"))
        assert res.status_code == 201, res.body
        # an agent definition, a run and the memory it writes
        demo.seed(ws, region, owner.email)
        agent = create_agent(c, mia.token, AGENT)
        run = start_run(c, mia.token, agent["id"], {"topic": secret["topic"], "sql": "SELECT 1 AS one"})[1]
        deliver(region)
        assert get_run(c, mia.token, agent["id"], run["id"])["status"] == "completed"
        assert call(c, "GET", f"/v1/agents/{agent['id']}/memory", mia.token)[1] == {
            "memory": {"last_topic": secret["topic"]}, "withheld": 0}
        # a backup and an access-request export; audit events all along, and their digest
        backups.create(region, ws)
        status, dsr, _ = call(c, "POST", "/v1/access-requests", mia.token, {"kind": "export", "user_id": mia.user_id})
        assert status == 202, dsr
        run_residency_jobs(region)
        assert call(c, "GET", f"/v1/access-requests/{dsr['id']}", mia.token)[1]["status"] == "completed"
    run_digest_job()
    jobs.replicate_workspaces({})  # replication is "none": the DR job must copy nothing
    needles = [ws, f"mia-{tag}@example.com", f"ivy-{tag}@invited.example", *secret.values(), agent["id"], run["id"],
               res.json_body["chat_id"], ds]
    return ws, region, needles


@pytest.mark.parametrize("residency", ["eu-central", "us-east"])
def test_a_workspaces_content_stays_in_its_region(stack: None, residency: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    tag = residency.split("-")[0]
    ws, region, needles = _use_everything(residency, tag, monkeypatch)
    other = OTHER[region]
    # every kind of content is there, in the workspace's region
    home = {t.name: [i for i in stored_items(region, t.name) if ws in i] for t in TABLES if t.scope == REGIONAL}
    for table in ("memberships", "invitations", "chats", "datasets", "knowledge", "agents", "agent_runs",
                  "agent_run_log", "audit_events", "audit_personal", "access_requests"):
        assert home[table], table
    assert [i for i in stored_items(region, "agent_memory") if needles[5] in i]  # the topic, in memory
    home_objects = _objects_text(region, tuple(b.name for b in BUCKETS))
    for bucket_prefix in (f"datasets/{ws}/", f"uploads/{ws}/", f"indexes/{ws}/", f"workspaces/{ws}/",
                          f"exports/{ws}/", f"digests/{ws}/"):
        assert bucket_prefix in home_objects, bucket_prefix
    # ... and none of it in any table, bucket or queue of the other region
    for table in (t.name for t in TABLES if t.scope == REGIONAL):
        leaked = [i for i in stored_items(other, table) if any(n in i for n in needles)]
        assert not leaked, (other, table, leaked[:1])
    elsewhere = _objects_text(other, tuple(b.name for b in BUCKETS)) + _queues_text(other)
    assert not [n for n in needles if n in elsewhere]
    # the global store: only directory fields name the workspace, and no content is there
    content = needles[1:]
    for table in (t.name for t in TABLES if t.scope == GLOBAL):
        for item in stored_items("us-east-1", table):
            if ws in item:
                assert table in GLOBAL_MAY_NAME_WORKSPACE, (table, item)
                if table == "revoked_tokens":  # only the scope version item: its key and counters
                    assert is_scope_version_item(json.loads(item), ws), item
            leaked = [n for n in content if n in item and not n.startswith("mia-")]
            assert not leaked, (table, leaked)  # the member's address lives only in the identity directory
            if "mia-" in item:
                assert table in ("users", "sessions", "auth_state"), (table, item)
    named = [json.loads(i) for i in stored_items("us-east-1", "workspaces") if ws in i]
    assert [e["id"]["S"] for e in named if e["id"]["S"] == ws] == [ws]
    for entry in named:
        assert set(entry) <= DIRECTORY_FIELDS, set(entry) - DIRECTORY_FIELDS
    # no cross-border copy: every DR-only region's buckets hold nothing of it
    for dr_region in DR_ONLY_REGIONS:
        dr_text = _objects_text(dr_region, tuple(b.name for b in DR_BUCKETS))
        assert ws not in dr_text
