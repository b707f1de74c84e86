"""Dead-letter queues are visible to the provider's operators (chalicelib/platform/support/dead_letters.py):
the API counts for staff signed in with a second factor, and the operator command lists and peeks
(ids and delivery facts, never a body's other content)."""
from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import aws
from chalicelib.groups import create_app
from chalicelib.identity.oauth.signing import issue_access_token
from chalicelib.platform.support import dead_letters, dead_letters_cli
from chalicelib.platform.support import service as support
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.platform.helpers import call, user_token

SECRET = "customer-secret-0001@example.com"


def _dead_letter(region: str, queue: str, body: dict[str, Any]) -> None:
    sqs = aws.client("sqs", region)
    url = sqs.get_queue_url(QueueName=aws.queue_name(queue + dead_letters.DLQ_SUFFIX))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))


@pytest.fixture
def client() -> Client:
    return Client(create_app("platform"))


def test_operators_see_counts_per_region_and_queue(tenant: Tenant, client: Client) -> None:
    staff = make_tenant("ops@support.aiplatform.dev", "us-east", "Provider Support")
    support.register_staff(staff.user_id, "Olu Ops", "US")
    _dead_letter("eu-central-1", "sync-jobs", {"workspace_id": tenant.workspace_id})
    _dead_letter("us-east-1", "agent-runs", {"workspace_id": tenant.workspace_id})
    _dead_letter("us-east-1", "agent-runs", {"workspace_id": tenant.workspace_id})
    token = user_token(staff.user_id, staff.email, staff.workspace_id, "admin")
    status, body, _ = call(client, "GET", "/v1/support/dead-letters", token)
    assert status == 200, body
    assert set(body["regions"]) == {"us-east-1", "eu-central-1"}
    us = {q["queue"]: q for q in body["regions"]["us-east-1"]["dead_letter_queues"]}
    eu = {q["queue"]: q for q in body["regions"]["eu-central-1"]["dead_letter_queues"]}
    assert set(us) == {"sync-jobs", "agent-runs", "audit-exports", "residency-jobs", "chat-answers", "knowledge-index"}
    assert set(us) == set(dead_letters.queues("us-east-1"))
    assert us["agent-runs"]["messages"] == 2 and us["sync-jobs"]["messages"] == 0
    assert eu["sync-jobs"]["messages"] == 1 and body["regions"]["eu-central-1"]["messages"] == 1
    assert us["agent-runs"]["dead_letter_queue"] == "aiplat-test-agent-runs-dlq"


def test_only_staff_with_a_second_factor_see_them(tenant: Tenant, client: Client) -> None:
    status, body, _ = call(client, "GET", "/v1/support/dead-letters", tenant.token)  # a workspace Admin
    assert status == 403 and body["code"] == "operators_only"
    staff = make_tenant("ops@support.aiplatform.dev", "us-east", "Provider Support")
    support.register_staff(staff.user_id, "Olu Ops", "US")
    password_only, _ = issue_access_token(user_id=staff.user_id, email=staff.email, workspace_id=staff.workspace_id,
                                          roles=["admin"], amr=["pwd"])
    status, body, _ = call(client, "GET", "/v1/support/dead-letters", password_only)
    assert status == 403 and body["code"] == "mfa_required"
    assert call(client, "GET", "/v1/support/dead-letters", None)[0] == 401


def test_the_operator_command_lists_and_peeks_without_bodies(tenant: Tenant, capsys: pytest.CaptureFixture[str]) -> None:
    assert dead_letters_cli.main(["list"]) == 0  # all empty
    capsys.readouterr()
    _dead_letter("us-east-1", "residency-jobs", {"kind": "backup", "workspace_id": tenant.workspace_id,
                                                  "backup_id": "bkp_01ARZ3NDEKTSV4RRFFQ69G5FAV", "email": SECRET})
    assert dead_letters_cli.main(["list"]) == 1  # something waits
    listed = json.loads(capsys.readouterr().out)
    assert listed["regions"]["us-east-1"]["messages"] == 1
    assert dead_letters_cli.main(["peek", "residency-jobs", "--region", "us-east-1"]) == 0
    out = capsys.readouterr().out
    (peeked,) = json.loads(out)
    assert peeked["kind"] == "backup" and peeked["receive_count"] == 1
    assert peeked["ids"] == {"workspace_id": tenant.workspace_id, "backup_id": "bkp_01ARZ3NDEKTSV4RRFFQ69G5FAV"}
    assert SECRET not in out
    # a peek leaves the message where it is
    assert dead_letters.counts("us-east-1")[[q["queue"] for q in dead_letters.counts("us-east-1")].index(
        "residency-jobs")]["messages"] == 1
    assert dead_letters_cli.main(["peek", "no-such-queue"]) == 2
