"""The emulator's transactions cost the items they touch, not the tables they name (infra/emulator/
transactions.py), and still behave as DynamoDB's: all or nothing, with a reason per item."""
from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from infra.emulator import serialise_writes

TABLE = "tx"
ITEMS = 5_000
TRANSACTIONS = 1_000
BUDGET_MB = 50


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.fixture()
def ddb() -> Iterator[Any]:
    serialise_writes()
    with mock_aws():  # the package's own mock may be active: the table is removed again below
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName=TABLE, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                                       {"AttributeName": "sk", "KeyType": "RANGE"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST")
        yield client
        client.delete_table(TableName=TABLE)


def _item(n: int, **extra: Any) -> dict[str, Any]:
    return {"pk": {"S": f"p{n % 50}"}, "sk": {"S": f"s{n:06d}"}, "body": {"S": "x" * 200}, **extra}


def _get(ddb: Any, n: int) -> dict[str, Any] | None:
    return ddb.get_item(TableName=TABLE, Key={"pk": {"S": f"p{n % 50}"}, "sk": {"S": f"s{n:06d}"}},
                        ConsistentRead=True).get("Item")


def test_a_thousand_transactions_on_a_large_table_stay_flat(ddb: Any) -> None:
    for start in range(0, ITEMS, 25):
        ddb.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": _item(n)}}
                                                   for n in range(start, start + 25)]})
    gc.collect()
    before = _rss_mb()
    for n in range(TRANSACTIONS):
        ddb.transact_write_items(TransactItems=[
            {"Update": {"TableName": TABLE, "Key": {"pk": {"S": f"p{n % 50}"}, "sk": {"S": f"s{n:06d}"}},
                        "UpdateExpression": "SET hits = if_not_exists(hits, :z) + :one",
                        "ExpressionAttributeValues": {":z": {"N": "0"}, ":one": {"N": "1"}},
                        "ConditionExpression": "attribute_exists(pk)"}},
            {"Put": {"TableName": TABLE, "Item": _item(ITEMS + n), "ConditionExpression": "attribute_not_exists(pk)"}},
        ])
    gc.collect()
    grown = _rss_mb() - before
    assert grown < BUDGET_MB, f"{TRANSACTIONS} transactions grew the process by {grown:.0f} MB"
    assert _get(ddb, 0)["hits"] == {"N": "1"}
    assert _get(ddb, ITEMS + TRANSACTIONS - 1) is not None
    assert ddb.describe_table(TableName=TABLE)["Table"]["ItemCount"] == ITEMS + TRANSACTIONS


def test_a_cancelled_transaction_leaves_every_item_as_it_was(ddb: Any) -> None:
    for n in range(3):
        ddb.put_item(TableName=TABLE, Item=_item(n, v={"N": "1"}))
    with pytest.raises(ClientError) as err:
        ddb.transact_write_items(TransactItems=[
            {"Update": {"TableName": TABLE, "Key": {"pk": {"S": "p0"}, "sk": {"S": "s000000"}},
                        "UpdateExpression": "SET v = :two", "ExpressionAttributeValues": {":two": {"N": "2"}}}},
            {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": "p1"}, "sk": {"S": "s000001"}}}},
            {"Put": {"TableName": TABLE, "Item": _item(7)}},
            {"Put": {"TableName": TABLE, "Item": _item(2, v={"N": "9"}),
                     "ConditionExpression": "attribute_not_exists(pk)"}},  # exists: the transaction fails
        ])
    assert err.value.response["Error"]["Code"] == "TransactionCanceledException"
    codes = [r["Code"] for r in err.value.response["CancellationReasons"]]
    assert codes == ["None", "None", "None", "ConditionalCheckFailed"]
    assert _get(ddb, 0)["v"] == {"N": "1"}  # the in-place update undone
    assert _get(ddb, 1) is not None  # the delete undone
    assert _get(ddb, 7) is None  # the new item removed
    assert _get(ddb, 2)["v"] == {"N": "1"}


def test_a_failed_transaction_does_not_erase_other_items_of_its_table(ddb: Any) -> None:
    """moto put back a whole-table copy, which dropped any write made to the table since the copy."""
    ddb.put_item(TableName=TABLE, Item=_item(0))
    ddb.put_item(TableName=TABLE, Item=_item(1, v={"N": "1"}))
    with pytest.raises(ClientError):
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": TABLE, "Item": _item(5)}},
            {"ConditionCheck": {"TableName": TABLE, "Key": {"pk": {"S": "p0"}, "sk": {"S": "s000000"}},
                                "ConditionExpression": "attribute_not_exists(pk)"}},
        ])
    table = ddb.scan(TableName=TABLE)["Items"]
    assert sorted(i["sk"]["S"] for i in table) == ["s000000", "s000001"]


def test_one_item_twice_in_a_transaction_is_refused_and_nothing_is_written(ddb: Any) -> None:
    with pytest.raises(ClientError) as err:
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": TABLE, "Item": _item(3)}},
            {"Put": {"TableName": TABLE, "Item": _item(3, v={"N": "2"})}},
        ])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert _get(ddb, 3) is None
