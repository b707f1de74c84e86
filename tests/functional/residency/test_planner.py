"""The region-move planner: a dry run listing what would move, read-only, in JSON and for a person."""
from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.core import aws
from chalicelib.core.ids import new_id
from chalicelib.identity.account import api_tokens
from chalicelib.residency import planner
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.residency.helpers import SECRET, seed, snapshot


def _all_content(t: Tenant) -> Any:
    return snapshot(t.workspace_id, t.region)


def test_plan_lists_tables_objects_indexes_tokens_and_a_window(tenant: Tenant, capsys: Any) -> None:
    other = make_tenant("other@example.com", name="Other")
    seed(tenant.workspace_id, tenant.region, "a")
    seed(other.workspace_id, other.region, "b")
    _, kept = api_tokens.create(tenant.user_id, ["pwd"], name="ci", workspace_id=tenant.workspace_id, expires_in_days=30)
    _, revoked = api_tokens.create(tenant.user_id, ["pwd"], name="old", workspace_id=tenant.workspace_id,
                                   expires_in_days=30)
    api_tokens.revoke(tenant.user_id, revoked.id)
    api_tokens.create(other.user_id, ["pwd"], name="theirs", workspace_id=other.workspace_id, expires_in_days=30)
    before = _all_content(tenant)
    assert planner.main([tenant.workspace_id, "--to", "eu-central", "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["dry_run"] is True
    assert p["workspace"]["region"] == "us-east-1"
    assert p["to"] == {"residency": "eu-central", "region": "eu-central-1"}
    tables = {t["table"]: t for t in p["tables"]}
    assert tables["chats"]["items"] == 2
    assert tables["agents"]["items"] == 1
    assert tables["datasets"]["items"] == 1
    assert tables["agent_memory"]["items"] == 1
    assert tables["agent_run_log"]["items"] == 1  # prefix-keyed tables
    assert tables["memberships"]["items"] == 1
    assert tables["chats"]["bytes"] > len(SECRET)
    objects = {b["bucket"]: b for b in p["objects"]}
    assert objects["data"]["objects"] == 1
    assert objects["data"]["bytes"] == 4 + len(SECRET)
    assert objects["documents"]["bytes"] == 3 * len(SECRET)
    assert objects["knowledge"]["objects"] == 1
    assert p["totals"]["objects"] == 3
    indexes = {ix["index"]: ix for ix in p["indexes_to_rebuild"]}
    assert indexes["knowledge index"]["objects"] == 1
    assert indexes["catalog"]["datasets"] == 1
    assert "audit_events.by_time" in indexes
    assert [t["id"] for t in p["api_tokens_to_reissue"]] == [kept.id]  # not revoked, not another workspace's
    win = p["maintenance_window"]
    assert win["minutes"] >= planner.FIXED_MINUTES
    assert win["rates"]["items_per_second"] == planner.DEFAULT_ITEMS_PER_SECOND
    assert "bench residency" in win["rates"]["source"]
    assert SECRET not in json.dumps(p)  # counts and names, never content
    assert _all_content(tenant) == before  # a dry run changes nothing


def test_window_follows_the_given_rates(tenant: Tenant) -> None:
    seed(tenant.workspace_id, tenant.region)
    aws.client("s3", tenant.region).put_object(Bucket=aws.bucket_name("documents", tenant.region),
                                               Key=f"uploads/{tenant.workspace_id}/big.bin", Body=b"x" * (3 * 1024 * 1024))
    slow = planner.plan(tenant.workspace_id, "eu-central", items_per_second=0.01, mb_per_second=0.001)
    fast = planner.plan(tenant.workspace_id, "eu-central")
    assert slow["maintenance_window"]["minutes"] > fast["maintenance_window"]["minutes"]
    assert slow["maintenance_window"]["objects_copy_seconds"] > 3000
    assert slow["maintenance_window"]["rates"]["source"] == "given on the command line"


def test_human_output(tenant: Tenant, capsys: Any) -> None:
    seed(tenant.workspace_id, tenant.region)
    assert planner.main([tenant.workspace_id, "--to", "eu-central"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DRY RUN: move workspace " + tenant.workspace_id)
    for words in ("Tables (items, bytes):", "chats", "Objects (count, bytes):", "Indexes to rebuild:",
                  "knowledge index", "API tokens to re-issue: 0", "Maintenance window estimate:", "items/s"):
        assert words in out, words


@pytest.mark.parametrize(("ws", "to", "says"), [
    ("unknown", "eu-central", "does not exist"),
    ("../../etc/passwd", "eu-central", "not a workspace id"),
    (None, "us-east", "already in us-east"),
    (None, "br-south", "planned"),
    (None, "mars", "unknown residency"),
])
def test_bad_input_exits_2_and_says_why(tenant: Tenant, capsys: Any, ws: str | None, to: str, says: str) -> None:
    target = new_id("ws") if ws == "unknown" else ws or tenant.workspace_id
    assert planner.main([target, "--to", to]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert says in captured.err
