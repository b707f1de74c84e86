"""The emulator answers DynamoDB's item operations with plain JSON (infra/emulator/plain_items.py): the
same answer moto's generic serialiser gives, for every item operation and every kind of attribute value
(binary ones in base64), and table descriptions still go through the serialiser."""
from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.responses import ActionResult
from moto.dynamodb.responses import DynamoResult

from infra.emulator import plain_items, serialise_writes

ITEM = {"pk": {"S": "a"}, "g": {"S": "x"}, "b": {"B": b"\x00\x01\xffhi"}, "ss": {"SS": ["1", "2"]},
        "ns": {"NS": ["1.5", "-2"]}, "bs": {"BS": [b"a", b"\x00"]},
        "m": {"M": {"x": {"L": [{"N": "1"}, {"NULL": True}, {"BOOL": False}, {"S": "é ✓"}]}}}}


def _sk(i: int) -> dict[str, Any]:
    return {"sk": {"N": str(i)}}


def test_item_operations_answer_as_the_serialiser_does(monkeypatch: pytest.MonkeyPatch) -> None:
    serialise_writes()
    seen: dict[str, int] = {}
    differ: list[tuple[str, Any, Any]] = []

    def both(self: Any, context: Any) -> Any:
        status, headers, body = ActionResult.execute_result(self, context)  # moto's own serialiser
        plain = plain_items.encode(context.operation_model, self.result)
        name = context.operation_model.name
        if plain is not None:
            seen[name] = seen.get(name, 0) + 1
            assert status == 200 and headers == {"Content-Type": plain_items.CONTENT_TYPE}
            if json.loads(plain) != json.loads(body):
                differ.append((name, json.loads(body), json.loads(plain)))
        else:
            assert name not in plain_items.ITEM_OPERATIONS, name
        return status, headers, body

    monkeypatch.setattr(DynamoResult, "execute_result", both)
    with mock_aws():
        c = boto3.client("dynamodb", region_name="us-east-1")
        c.create_table(TableName="t", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                                 {"AttributeName": "sk", "KeyType": "RANGE"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                             {"AttributeName": "sk", "AttributeType": "N"},
                                             {"AttributeName": "g", "AttributeType": "S"}],
                       GlobalSecondaryIndexes=[{"IndexName": "by_g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                                "Projection": {"ProjectionType": "ALL"}}],
                       BillingMode="PAY_PER_REQUEST")
        for i in range(5):
            c.put_item(TableName="t", Item={**ITEM, **_sk(i)})
        c.put_item(TableName="t", Item={**ITEM, **_sk(1)}, ReturnValues="ALL_OLD", ReturnConsumedCapacity="TOTAL")
        got = c.get_item(TableName="t", Key={"pk": {"S": "a"}, **_sk(1)}, ConsistentRead=True)["Item"]
        assert got["b"] == {"B": b"\x00\x01\xffhi"} and got["bs"] == {"BS": [b"a", b"\x00"]}  # base64 on the wire
        assert got["m"] == ITEM["m"] and got["ns"]["NS"] == ["1.5", "-2"]
        assert "Item" not in c.get_item(TableName="t", Key={"pk": {"S": "a"}, **_sk(99)})
        page = c.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "a"}},
                       Limit=2, ScanIndexForward=False, ReturnConsumedCapacity="TOTAL")
        assert [i["sk"]["N"] for i in page["Items"]] == ["4", "3"] and page["LastEvaluatedKey"]["sk"] == {"N": "3"}
        c.query(TableName="t", IndexName="by_g", KeyConditionExpression="g = :g", ExpressionAttributeValues={":g": {"S": "x"}},
                ProjectionExpression="pk, b")
        assert c.scan(TableName="t", Select="COUNT")["Count"] == 5
        c.scan(TableName="t", FilterExpression="sk > :n", ExpressionAttributeValues={":n": {"N": "2"}})
        c.batch_get_item(RequestItems={"t": {"Keys": [{"pk": {"S": "a"}, **_sk(1)}, {"pk": {"S": "a"}, **_sk(7)}],
                                             "ConsistentRead": True}})
        c.update_item(TableName="t", Key={"pk": {"S": "a"}, **_sk(1)}, UpdateExpression="ADD c :one",
                      ExpressionAttributeValues={":one": {"N": "1"}}, ReturnValues="ALL_NEW")
        c.delete_item(TableName="t", Key={"pk": {"S": "a"}, **_sk(2)}, ReturnValues="ALL_OLD")
        c.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": {"pk": {"S": "b"}, **_sk(1)}}}])
        c.transact_get_items(TransactItems=[{"Get": {"TableName": "t", "Key": {"pk": {"S": "a"}, **_sk(1)}}}])
        c.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": {"pk": {"S": "c"}, **_sk(1)}}}]})
        assert c.describe_table(TableName="t")["Table"]["TableName"] == "t"  # through the serialiser
    assert set(seen) == plain_items.ITEM_OPERATIONS, seen
    assert not differ, differ[:2]


def test_it_is_installed_once() -> None:
    serialise_writes()
    serialise_writes()
    method = DynamoResult.execute_result
    assert getattr(method, "_aiplat_plain_items", False)
