"""Retention sweeps of expired invitations and e-mail codes: exactly what is due, counts only."""
from __future__ import annotations

from chalicelib.core import audit, aws, clock
from chalicelib.core.config import settings
from chalicelib.identity.signin import email_codes
from chalicelib.platform.workspaces import invitations
from chalicelib.workers.jobs import SCHEDULED
from tests.functional.conftest import Tenant
from tests.functional.residency.helpers import put


def _ids(region: str, table: str, key: str) -> set[str]:
    return {i[key]["S"] for i in aws.client("dynamodb", region).scan(TableName=aws.table_name(table))["Items"]}


def test_expired_invitations_and_claims_go_the_rest_stays(tenant: Tenant) -> None:
    ws, region = {"S": tenant.workspace_id}, tenant.region
    with clock.frozen():
        now = int(clock.now())

        def inv(id_: str, status: str | None, expires: int) -> None:
            item = {"workspace_id": ws, "id": {"S": id_}, "expires_at": {"N": str(expires)}}
            if status:
                item["status"] = {"S": status}
            put(region, "invitations", item)

        inv("inv_due", "pending", now)
        inv("inv_later", "pending", now + 1)
        inv("inv_accepted", "accepted", now - 100)
        inv("inv_revoked", "revoked", now - 100)
        inv("email#due@example.com", None, now - 5)
        inv("email#later@example.com", None, now + 60)
        events_before = list(audit.iter_chain(region, tenant.workspace_id))
        assert invitations.sweep_expired() == {"us-east-1": 2, "eu-central-1": 0}
    assert _ids(region, "invitations", "id") == {"inv_later", "inv_accepted", "inv_revoked", "email#later@example.com"}
    assert list(audit.iter_chain(region, tenant.workspace_id)) == events_before  # never swept


def test_expired_email_codes_go_other_sign_in_state_stays(stack: None) -> None:
    region = settings().global_region
    with clock.frozen():
        now = int(clock.now())
        put(region, "auth_state", {"pk": {"S": "ecode#due@example.com"}, "expires_at": {"N": str(now)}})
        put(region, "auth_state", {"pk": {"S": "ecode#later@example.com"}, "expires_at": {"N": str(now + 1)}})
        put(region, "auth_state", {"pk": {"S": "lock#someone"}, "expires_at": {"N": str(now - 100)}})
        assert email_codes.sweep_expired() == {"email_codes": 1}
    assert _ids(region, "auth_state", "pk") >= {"ecode#later@example.com", "lock#someone"}
    assert "ecode#due@example.com" not in _ids(region, "auth_state", "pk")


def test_sweeps_are_scheduled() -> None:
    names = {job.name: job for job in SCHEDULED}
    for name in ("backup_workspaces", "sweep_backups", "sweep_invitations", "sweep_email_codes",
                 "expire_chats", "sweep_agent_data"):
        assert name in names
    assert names["sweep_email_codes"].scope == "global"
