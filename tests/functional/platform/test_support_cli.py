"""The support staff operator command: add, list, remove, history; every change audited in the
operators' chain; a removed person loses support access at once, live grant or not."""
from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import audit
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.platform.support import cli as support_cli
from chalicelib.platform.support import service as support
from chalicelib.platform.support import staff as support_staff
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.platform.helpers import call, user_token


def run(capsys: Any, *argv: str) -> tuple[int, Any]:
    status = support_cli.main(list(argv))
    return status, json.loads(capsys.readouterr().out)


def test_add_list_remove_and_history(tenant: Tenant, capsys: Any) -> None:
    own = make_tenant("sam@support.example", "us-east", "Provider Support")
    status, added = run(capsys, "add", "SAM@support.example", "--name", "Sam Support", "--location", "US",
                        "--by", "ops@example.com")
    assert status == 0
    assert added["user_id"] == own.user_id
    assert added["active"]
    assert added["location"] == "US"
    assert support.is_staff(own.user_id)
    assert [s["email"] for s in run(capsys, "list")[1]] == ["sam@support.example"]

    status, removed = run(capsys, "remove", "sam@support.example", "--by", "ops@example.com")
    assert status == 0
    assert removed["active"] is False
    assert not support.is_staff(own.user_id)
    assert run(capsys, "list")[1] == []
    assert [s["active"] for s in run(capsys, "list", "--all")[1]] == [False]

    status, hist = run(capsys, "history")
    assert status == 0
    assert hist["ok"]
    assert hist["count"] == 2
    added_ev, removed_ev = hist["events"]
    assert (added_ev["action"], removed_ev["action"]) == ("support.staff_added", "support.staff_removed")
    assert added_ev["actor"]["type"] == "operator"
    assert added_ev["actor"]["email"] == "ops@example.com"
    assert added_ev["actor"]["id"].startswith("arn:aws:")  # the AWS principal that ran the command
    assert added_ev["target"] == {"type": "user", "id": own.user_id}
    assert added_ev["details"]["name"] == "Sam Support"


def test_refusals_change_nothing(stack: None, capsys: Any) -> None:
    status, out = run(capsys, "add", "nobody@example.com", "--name", "N", "--by", "ops")
    assert status == 1
    assert "no user" in out["problem"]
    make_tenant("kim@example.com")
    status, out = run(capsys, "remove", "kim@example.com", "--by", "ops")
    assert status == 1
    assert "not registered" in out["problem"]
    status, out = run(capsys, "add", "kim@example.com", "--name", "Kim", "--by", "  ")
    assert status == 1
    assert "--by" in out["problem"]
    with pytest.raises(SystemExit) as exit_info:
        support_cli.main(["add", "kim@example.com", "--name", "Kim"])  # --by is required
    assert exit_info.value.code == 2
    capsys.readouterr()
    assert run(capsys, "list", "--all")[1] == []
    assert list(audit.iter_chain(settings().global_region, support_staff.OPERATOR_CHAIN)) == []


def test_removed_staff_lose_access_despite_a_live_grant(tenant: Tenant, capsys: Any) -> None:
    own = make_tenant("sue@support.example", "us-east", "Provider Support")
    token = user_token(own.user_id, own.email, own.workspace_id, "admin", ttl=86400)
    assert run(capsys, "add", own.email, "--name", "Sue", "--by", "ops")[0] == 0
    client = Client(create_app("platform"))
    status, grant, _ = call(client, "POST", f"/v1/workspaces/{tenant.workspace_id}/support-grants", tenant.token,
                            {"support_email": own.email, "duration": "PT2H", "reason": "Ticket 1: sync stuck"})
    assert status == 201, grant
    assert call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", token)[0] == 200
    assert run(capsys, "remove", own.email, "--by", "ops")[0] == 0
    status, body, _ = call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", token)
    assert status == 403
    assert body["code"] == "support_access_denied"


def test_a_changed_history_event_is_detected(tenant: Tenant, capsys: Any) -> None:
    make_tenant("lee@support.example", "us-east", "Provider Support")
    run(capsys, "add", "lee@support.example", "--name", "Lee", "--by", "ops")
    run(capsys, "remove", "lee@support.example", "--by", "ops")
    cls = audit.model(settings().global_region)
    first = cls.get(support_staff.OPERATOR_CHAIN, 1)
    first.update(actions=[cls.action.set("support.staff_removed")])  # someone rewrites what happened
    status, hist = run(capsys, "history")
    assert status == 1
    assert not hist["ok"]
    assert hist["problems"]
