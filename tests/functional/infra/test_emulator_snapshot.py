"""A snapshot of the emulator's backends (infra/emulator/snapshot.py) brings back what moto held: items,
every S3 object version with its Object Lock retention, KMS keys with their key material (old ciphertexts
decrypt, old signatures verify) and queued messages; only requests that can change state count as changes
(infra/emulator/server.py)."""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws
from moto.core.base_backend import BackendDict

from infra.emulator import snapshot
from infra.emulator.server import _ChangeCounter

REGION = "us-east-1"


def _clients() -> dict[str, Any]:
    return {s: boto3.client(s, region_name=REGION) for s in ("dynamodb", "s3", "kms", "sqs")}


def _make(c: dict[str, Any]) -> dict[str, Any]:
    c["dynamodb"].create_table(TableName="snap", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                               AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                               BillingMode="PAY_PER_REQUEST")
    c["dynamodb"].put_item(TableName="snap", Item={"k": {"S": "a"}, "v": {"N": "1"}})
    c["s3"].create_bucket(Bucket="snap-bucket", ObjectLockEnabledForBucket=True)
    first = c["s3"].put_object(Bucket="snap-bucket", Key="doc", Body=b"one")["VersionId"]
    second = c["s3"].put_object(Bucket="snap-bucket", Key="doc", Body=b"two", ObjectLockMode="COMPLIANCE",
                                ObjectLockRetainUntilDate="2099-01-01T00:00:00Z")["VersionId"]
    signer = c["kms"].create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    data_key = c["kms"].create_key()["KeyMetadata"]["KeyId"]
    queue = c["sqs"].create_queue(QueueName="snap-queue")["QueueUrl"]
    c["sqs"].send_message(QueueUrl=queue, MessageBody="queued work")
    return {"versions": (first, second), "signer": signer,
            "ciphertext": c["kms"].encrypt(KeyId=data_key, Plaintext=b"secret")["CiphertextBlob"],
            "signature": c["kms"].sign(KeyId=signer, Message=b"token", MessageType="RAW",
                                       SigningAlgorithm="RSASSA_PKCS1_V1_5_SHA_256")["Signature"]}


def test_a_snapshot_restores_items_versions_locks_keys_and_messages(tmp_path: Path) -> None:
    held = snapshot.dumps(snapshot.capture())  # what moto holds now (a package-wide mock's state), put back after
    try:
        _round_trip(tmp_path)
    finally:
        BackendDict.reset()
        snapshot.install(pickle.loads(held))


def _round_trip(tmp_path: Path) -> None:
    with mock_aws():
        made = _make(_clients())
        snapshot.write(tmp_path, 7, snapshot.dumps(snapshot.capture()))
    BackendDict.reset()  # moto forgets everything, as a new process would start
    with mock_aws():
        c = _clients()
        assert c["dynamodb"].list_tables()["TableNames"] == []
        assert snapshot.load_newest(tmp_path)[0] == 7
        assert c["dynamodb"].get_item(TableName="snap", Key={"k": {"S": "a"}})["Item"]["v"] == {"N": "1"}
        first, second = made["versions"]
        assert c["s3"].get_object(Bucket="snap-bucket", Key="doc", VersionId=first)["Body"].read() == b"one"
        locked = c["s3"].get_object(Bucket="snap-bucket", Key="doc", VersionId=second)
        assert locked["Body"].read() == b"two" and locked["ObjectLockMode"] == "COMPLIANCE"
        versions = c["s3"].list_object_versions(Bucket="snap-bucket")["Versions"]
        assert sorted(v["VersionId"] for v in versions) == sorted(made["versions"])
        assert c["kms"].decrypt(CiphertextBlob=made["ciphertext"])["Plaintext"] == b"secret"
        assert c["kms"].verify(KeyId=made["signer"], Message=b"token", MessageType="RAW", Signature=made["signature"],
                               SigningAlgorithm="RSASSA_PKCS1_V1_5_SHA_256")["SignatureValid"]
        queue = c["sqs"].get_queue_url(QueueName="snap-queue")["QueueUrl"]
        assert [m["Body"] for m in c["sqs"].receive_message(QueueUrl=queue)["Messages"]] == ["queued work"]


def test_the_newest_complete_generation_wins_and_older_ones_are_removed(tmp_path: Path) -> None:
    state = {"format": snapshot.FORMAT, "services": {}}
    snapshot.write(tmp_path, 1, pickle.dumps(state))
    snapshot.write(tmp_path, 2, pickle.dumps(state))
    (tmp_path / "state-000000000003.pickle.tmp999999").write_bytes(b"half written")  # a writer that died
    assert [g for g, _ in snapshot.generations(tmp_path)] == [2]
    (tmp_path / "state-000000000009.pickle").write_bytes(b"not a pickle")
    assert snapshot.load_newest(tmp_path) == (2, 0)  # a damaged file falls back to the one before
    snapshot.write(tmp_path, 10, pickle.dumps(state))
    assert [g for g, _ in snapshot.generations(tmp_path)] == [10]
    assert not list(tmp_path.glob("*.tmp*"))
    assert oct((tmp_path / "state-000000000010.pickle").stat().st_mode)[-3:] == "600"


def _call(counter: _ChangeCounter, method: str, target: str = "", body: bytes = b"{}") -> None:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        return [body]

    counter.app = app
    counter({"REQUEST_METHOD": method, "HTTP_X_AMZ_TARGET": target}, lambda *a: None)


def test_only_requests_that_can_change_state_count() -> None:
    counter = _ChangeCounter(None)
    for method, target in (("GET", ""), ("HEAD", ""), ("POST", "DynamoDB_20120810.GetItem"),
                           ("POST", "DynamoDB_20120810.Query"), ("POST", "TrentService.Decrypt"),
                           ("POST", "TrentService.Sign"), ("POST", "AmazonSQS.GetQueueUrl")):
        _call(counter, method, target)
    assert counter.changes == 0
    _call(counter, "POST", "AmazonSQS.ReceiveMessage", b'{"Messages": []}')  # an empty poll
    assert counter.changes == 0
    _call(counter, "POST", "AmazonSQS.ReceiveMessage", b'{"Messages": [{"ReceiptHandle": "x"}]}')
    _call(counter, "POST", "DynamoDB_20120810.TransactWriteItems")
    _call(counter, "PUT", "")  # an S3 object
    _call(counter, "POST", "")  # a query-protocol action (SES, STS)
    assert counter.changes == 4
