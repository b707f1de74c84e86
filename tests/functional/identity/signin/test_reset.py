"""Password reset requests for any well-formed address, the longest included."""
from __future__ import annotations

from typing import Any

from chalice.test import Client

from chalicelib.groups import create_app
from chalicelib.identity import users
from tests.functional.identity.helpers import body, post


def test_a_254_character_address_gets_its_reset_link(outbox: Any) -> None:
    """The longest address RFC 5321 allows (254 characters, 63-character labels) is accepted and its
    message is delivered (the local outbox file name stays within the 255 bytes a file name may have)."""
    address = "00@" + ".".join(["a" * 63] * 3) + "." + "b" * 59
    assert len(address) == 254
    users.create_user(address, email_verified=True)
    with Client(create_app("identity")) as c:
        r = post(c, "/signin/reset", {"email": address})
        assert r.status_code == 202, r.body
        assert body(r)["status"] == "accepted"
    assert [m["tag"] for m in outbox.messages(address)] == ["reset"]


class _AwsCalls:
    """Every AWS API call made while active, as (service, operation), counted through botocore's one
    entry point (boto3 clients and PynamoDB's alike); the calls themselves go through unchanged."""

    def __init__(self, monkeypatch: Any) -> None:
        import botocore.client

        self.calls: list[tuple[str, str]] = []
        real = botocore.client.BaseClient._make_api_call

        def counting(client: Any, operation: str, params: Any) -> Any:
            self.calls.append((client.meta.service_model.service_name, operation))
            return real(client, operation, params)

        monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counting)

    def dynamodb(self) -> list[str]:
        return [op for service, op in self.calls if service == "dynamodb"]


def test_a_known_and_an_unknown_address_cost_the_same_reads_and_writes(outbox: Any, monkeypatch: Any) -> None:
    """The answer's timing must not tell whether an account exists: a reset request for a known address
    and for an unknown one make the same DynamoDB calls, operation by operation, and the same number of
    other AWS calls (one message each)."""
    users.create_user("known@example.com", email_verified=True)
    counted = _AwsCalls(monkeypatch)
    with Client(create_app("identity")) as c:
        for address in ("known@example.com", "unknown@example.com"):
            assert post(c, "/signin/reset", {"email": "warm-up-" + address}).status_code == 202
        runs: dict[str, list[tuple[str, str]]] = {}
        for address in ("known@example.com", "unknown@example.com"):
            counted.calls.clear()
            assert post(c, "/signin/reset", {"email": address}).status_code == 202
            runs[address] = list(counted.calls)
    known, unknown = runs["known@example.com"], runs["unknown@example.com"]
    assert [op for s, op in known if s == "dynamodb"] == [op for s, op in unknown if s == "dynamodb"]
    assert sorted(known) == sorted(unknown)
    assert [op for s, op in known if s == "dynamodb"].count("GetItem") >= 2  # the claim and the user
    assert [m["tag"] for m in outbox.messages("known@example.com")] == ["reset"]
    assert [m["tag"] for m in outbox.messages("unknown@example.com")] == ["reset-unknown"]
