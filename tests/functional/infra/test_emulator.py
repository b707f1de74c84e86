"""The emulator's conditional writes are atomic (infra/emulator.py): of several threads putting the same
key with ``attribute_not_exists``, exactly one succeeds, as on DynamoDB. Without the lock moto lets two
of them "succeed" and the second silently replaces the first (the cause of a lost audit event)."""
from __future__ import annotations

import sys
import threading
from collections import Counter

import boto3
from moto import mock_aws

from infra.emulator import WRITE_OPERATIONS, serialise_writes


def test_every_write_operation_is_wrapped() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    serialise_writes()
    serialise_writes()  # idempotent: wrapped once
    for name in WRITE_OPERATIONS:
        method = getattr(DynamoDBBackend, name)
        assert getattr(method, "_aiplat_serialised", False), name
        assert not getattr(method.__wrapped__, "_aiplat_serialised", False), name


def test_concurrent_conditional_puts_have_one_winner_per_key() -> None:
    serialise_writes()
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows within ~20 keys
    try:
        with mock_aws():
            ddb = boto3.client("dynamodb", region_name="us-east-1")
            ddb.create_table(TableName="race", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                             AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                             BillingMode="PAY_PER_REQUEST")
            wins: list[str] = []

            def put(key: str, writer: int) -> None:
                try:
                    ddb.put_item(TableName="race", Item={"k": {"S": key}, "w": {"N": str(writer)}},
                                 ConditionExpression="attribute_not_exists(k)")
                    wins.append(key)
                except ddb.exceptions.ConditionalCheckFailedException:
                    pass

            keys = [f"key{n}" for n in range(150)]
            for key in keys:
                threads = [threading.Thread(target=put, args=(key, w)) for w in range(4)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
    finally:
        sys.setswitchinterval(previous)
    assert Counter(wins) == Counter(keys)  # exactly one winner for every key
