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
    return cls(key, request_hash="h", status=200, response="{}", expires_at=0)


def test_a_refused_conditional_put_is_a_condition_failure(stack: None) -> None:
    cls = regional(IdempotencyAttrs, REGION)
    _item("k1").save()
    with pytest.raises(PutError) as err:
        _item("k1").save(condition=cls.key.does_not_exist())
    assert condition_failed(err.value)


def test_the_failed_item_of_a_cancelled_transaction_is_named(stack: None) -> None:
    cls = regional(IdempotencyAttrs, REGION)
    _item("present").save()
    with pytest.raises(TransactWriteError) as err:
        with TransactWrite(connection=connection(REGION)) as tx:
            tx.save(_item("fresh"), condition=cls.key.does_not_exist())
            tx.save(_item("present"), condition=cls.key.does_not_exist())
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
        Missing.get("x")
    assert not condition_failed(err.value)
    assert not condition_failed(ValueError("ConditionalCheckFailedException"))
