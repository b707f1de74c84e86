"""Conditional-write failure is detected one way (``core/store/conditions.py``), for single writes and for the
items of a cancelled transaction, against moto's DynamoDB."""
from __future__ import annotations

import pytest
from pynamodb.exceptions import GetError, PutError, TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.core.store.conditions import cancellation_codes, condition_failed, item_condition_failed
from chalicelib.core.store.idempotency import IdempotencyAttrs
from chalicelib.core.store.tables import connection, regional

REGION = "us-east-1"


def _item(key: str) -> IdempotencyAttrs:
    cls = regional(IdempotencyAttrs, REGION)
    return cls("usr_1", key, request_hash="h", state="done", token="t", claimed_until=0, expires_at=0)


def test_a_refused_conditional_put_is_a_condition_failure(stack: None) -> None:
    cls = regional(IdempotencyAttrs, REGION)
    _item("k1").save()
    with pytest.raises(PutError) as err:
        _item("k1").save(condition=cls.user_id.does_not_exist())
    assert condition_failed(err.value)


def test_the_failed_item_of_a_cancelled_transaction_is_named(stack: None) -> None:
    cls = regional(IdempotencyAttrs, REGION)
    _item("present").save()
    with pytest.raises(TransactWriteError) as err:
        with TransactWrite(connection=connection(REGION)) as tx:
            tx.save(_item("fresh"), condition=cls.user_id.does_not_exist())
            tx.save(_item("present"), condition=cls.user_id.does_not_exist())
    assert condition_failed(err.value)
    assert item_condition_failed(err.value, 1)
    assert not item_condition_failed(err.value, 0)
    assert not item_condition_failed(err.value, 5)
    assert len(cancellation_codes(err.value)) == 2


def test_other_errors_are_not_condition_failures(stack: None) -> None:
    class Missing(IdempotencyAttrs):
        class Meta:
            table_name = "no-such-table"
            region = REGION

    with pytest.raises(GetError) as err:
        Missing.get("x", "y")
    assert not condition_failed(err.value)
    assert not condition_failed(ValueError("ConditionalCheckFailedException"))


def test_every_table_connection_shares_the_process_s_one_botocore_session(stack: None) -> None:
    """Each model class has its own PynamoDB connection; their clients come from one botocore session, so
    its loader parses the DynamoDB model once per process rather than once per table (docs/webapp.md)."""
    from chalicelib.core.aws import botocore_session
    from chalicelib.core.tenancy import MembershipAttrs, WorkspaceAttrs

    clients = [regional(m, REGION)._get_connection().connection.client for m in (IdempotencyAttrs, WorkspaceAttrs, MembershipAttrs)]
    clients.append(connection(REGION).client)
    loader = botocore_session().get_component("data_loader")
    assert all(c._loader is loader for c in clients)
    assert len({id(c) for c in clients}) == len(clients)  # still one client per connection (its own config)
    _item("k-shared").save()  # and they work
    assert regional(IdempotencyAttrs, REGION).get("usr_1", "k-shared").state == "done"
