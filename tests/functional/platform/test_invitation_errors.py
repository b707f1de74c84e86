"""Only a live invitation for the same address is ``409 invitation_pending``; any other failure of the
invitation's transaction (a conflicting transaction, throttling) is ``503 unavailable`` with nothing
written. DynamoDB's transient cancellations cannot be produced on the emulator on demand, so the
transaction is made to fail with the reasons DynamoDB returns. The invitation's transaction is the
audit's (``audit.append(effects=...)`` through ``core/store/transact.Tx``): items 0 and 1 are the address
claim and the invitation."""
from __future__ import annotations

from typing import Any

import pytest
from chalice.test import Client
from pynamodb.exceptions import CancellationReason, TransactWriteError, VerboseClientError

from chalicelib.core import audit
from chalicelib.core.store import transact
from chalicelib.groups import create_app
from chalicelib.platform.models import invitations
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import call


def _failing_transaction(reasons: list[CancellationReason | None], code: str = "TransactionCanceledException") -> Any:
    class Failing:
        def __init__(self, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> Any:
            return self

        def save(self, *args: Any, **kwargs: Any) -> None:
            pass

        update = delete = condition_check = save

        def __exit__(self, *exc: Any) -> None:
            cause = VerboseClientError({"Error": {"Code": code, "Message": "cancelled"}}, "TransactWriteItems",
                                       cancellation_reasons=reasons)
            raise TransactWriteError("Failed to write transaction items", cause=cause)

    return Failing


def _invite(client: Client, tenant: Tenant, email: str) -> tuple[int, Any, dict[str, str]]:
    return call(client, "POST", f"/v1/workspaces/{tenant.workspace_id}/invitations", tenant.token,
                {"email": email, "role": "member"})


@pytest.mark.parametrize("reasons, code", [
    ([CancellationReason(code="TransactionConflict"), None], "TransactionCanceledException"),
    ([None, CancellationReason(code="ThrottlingError")], "TransactionCanceledException"),
    ([], "ProvisionedThroughputExceededException"),
    ([None, CancellationReason(code="ConditionalCheckFailed")], "TransactionCanceledException"),  # the id, not the address
])
def test_a_transient_failure_is_503_not_invitation_pending(tenant: Tenant, monkeypatch: pytest.MonkeyPatch,
                                                           reasons: list[CancellationReason | None], code: str) -> None:
    client = Client(create_app("platform"))
    before = [e["action"] for e in audit.iter_chain(tenant.region, tenant.workspace_id)]
    monkeypatch.setattr(transact, "TransactWrite", _failing_transaction(reasons, code))
    status, body, headers = _invite(client, tenant, "busy@example.com")
    assert status == 503, body
    assert body["code"] == "unavailable"
    assert headers.get("Retry-After") == "1"
    assert [e["action"] for e in audit.iter_chain(tenant.region, tenant.workspace_id)] == before
    assert not [i for i in invitations(tenant.region).query(tenant.workspace_id) if getattr(i, "email", "") == "busy@example.com"]


def test_only_a_live_invitation_for_the_address_is_409(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    client = Client(create_app("platform"))
    assert _invite(client, tenant, "twice@example.com")[0] == 201
    status, body, _ = _invite(client, tenant, "twice@example.com")  # the real claim condition fails
    assert status == 409 and body["code"] == "invitation_pending"
    monkeypatch.setattr(transact, "TransactWrite", _failing_transaction(
        [CancellationReason(code="ConditionalCheckFailed"), None]))
    status, body, _ = _invite(client, tenant, "other@example.com")
    assert status == 409 and body["code"] == "invitation_pending"
