"""`make run` keeps its state (infra/emulator/): content of every kind survives a clean stop and a
``kill -9`` (DynamoDB items in both regions, S3 objects with every version and Object Lock, KMS keys so
old ciphertexts decrypt and old tokens verify, SQS messages, the audit chain), the demo tenant is seeded
once, and ``make reset`` empties it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from tests.integration.conftest import ROOT, RunningPlatform, free_port, start_platform, stop_platform

REGIONS = ("us-east-1", "eu-central-1")
BUCKET = "aiplat-persist-check"


GROUPS = ("platform", "gateway", "identity", "app", "platform-eu-central-1", "gateway-eu-central-1")
# the same addresses on every start, as `make run` has: a token names its issuer's URL
PORTS = {"LOCAL_PORTS": ",".join(f"{g}={free_port()}" for g in GROUPS), "EMULATOR_PORT": str(free_port())}


def _start(state_dir: Path) -> RunningPlatform:
    (state_dir / "run.json").unlink(missing_ok=True)  # start_platform waits for the new one
    return start_platform(state_dir, {"LOCAL_PERSIST": "1", "LOCAL_SNAPSHOT_SECONDS": "1", **PORTS})


def _items(platform: RunningPlatform) -> dict[str, list[str]]:
    """Every item of every table in both regions, as canonical JSON, sorted; not the API request counters
    (every request counts, the check's own included)."""
    out: dict[str, list[str]] = {}
    for region in REGIONS:
        ddb = platform.aws("dynamodb", region)
        for table in ddb.list_tables()["TableNames"]:
            if table.endswith("-request_counters"):
                continue
            items: list[str] = []
            for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
                items += [json.dumps(i, sort_keys=True) for i in page["Items"]]
            out[f"{region}:{table}"] = sorted(items)
    return out


def _objects(platform: RunningPlatform) -> dict[str, list[tuple[str, str, str]]]:
    """Every object version of every bucket: (key, version id, ETag)."""
    s3 = platform.aws("s3")
    out: dict[str, list[tuple[str, str, str]]] = {}
    for bucket in s3.list_buckets()["Buckets"]:
        name = bucket["Name"]
        versions: list[tuple[str, str, str]] = []
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
            versions += [(v["Key"], v["VersionId"], v["ETag"]) for v in page.get("Versions", [])]
        out[name] = sorted(versions)
    return out


def _token(state_dir: Path) -> str:
    """A 15-minute access token of the demo user, as `make token` mints it (signed with the signing key)."""
    env = {**os.environ, "LOCAL_STATE_DIR": str(state_dir)}
    env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
    return subprocess.run([sys.executable, "-m", "infra.demo_token"], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()


def _verify_audit(state_dir: Path, workspace_id: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env["LOCAL_STATE_DIR"] = str(state_dir)
    done = subprocess.run([sys.executable, "-m", "infra.verify_audit", workspace_id, ""], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def _me(platform: RunningPlatform, token: str) -> requests.Response:
    return requests.get(platform.urls["platform"] + "/me", headers={"Authorization": f"Bearer {token}"}, timeout=10)


def _invite(platform: RunningPlatform, email: str) -> str:
    demo = platform.demo
    r = requests.post(f"{platform.urls['platform']}/workspaces/{demo['workspace_id']}/invitations",
                      headers={"Authorization": f"Bearer {demo['api_token']}"},
                      json={"email": email, "role": "member"}, timeout=30)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _settled(state_dir: Path, timeout: float = 60) -> None:
    """Wait until the state's last snapshot holds every change (``status.json``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = json.loads((state_dir / "status.json").read_text())
            emulator = status["emulator"]
            if emulator["unsaved_changes"] == 0 and not emulator["writing"] and emulator["last_snapshot"]:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    raise AssertionError("the emulator's state was not saved")


def _content(platform: RunningPlatform, tag: str) -> dict[str, Any]:
    """Create content of every kind the API cannot reach directly, and return how to find it again."""
    s3, kms, sqs = platform.aws("s3"), platform.aws("kms"), platform.aws("sqs")
    if BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=BUCKET, ObjectLockEnabledForBucket=True)
    first = s3.put_object(Bucket=BUCKET, Key="doc.txt", Body=f"{tag} one".encode())["VersionId"]
    second = s3.put_object(Bucket=BUCKET, Key="doc.txt", Body=f"{tag} two".encode(), ObjectLockMode="COMPLIANCE",
                           ObjectLockRetainUntilDate="2099-01-01T00:00:00Z")["VersionId"]
    ciphertext = kms.encrypt(KeyId="alias/aiplat-data", Plaintext=tag.encode())["CiphertextBlob"]
    dlq = sqs.get_queue_url(QueueName="aiplat-sync-jobs-dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"check": tag}))
    return {"versions": (first, second), "ciphertext": ciphertext, "tag": tag,
            "invitation": _invite(platform, f"{tag}@example.com"), "token": _token(platform.state_dir)}


def _check(platform: RunningPlatform, made: dict[str, Any]) -> None:
    s3, kms, sqs = platform.aws("s3"), platform.aws("kms"), platform.aws("sqs")
    first, second = made["versions"]
    assert s3.get_object(Bucket=BUCKET, Key="doc.txt", VersionId=first)["Body"].read() == f"{made['tag']} one".encode()
    locked = s3.get_object(Bucket=BUCKET, Key="doc.txt", VersionId=second)
    assert locked["Body"].read() == f"{made['tag']} two".encode()
    assert locked["ObjectLockMode"] == "COMPLIANCE"
    assert kms.decrypt(CiphertextBlob=made["ciphertext"])["Plaintext"] == made["tag"].encode()
    dlq = sqs.get_queue_url(QueueName="aiplat-sync-jobs-dlq")["QueueUrl"]
    bodies = [json.loads(m["Body"]) for m in sqs.receive_message(
        QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])]
    assert {"check": made["tag"]} in bodies
    assert _me(platform, made["token"]).status_code == 200  # signed before the restart, verifies after
    demo = platform.demo
    r = requests.get(f"{platform.urls['platform']}/workspaces/{demo['workspace_id']}/invitations/{made['invitation']}",
                     headers={"Authorization": f"Bearer {demo['api_token']}"}, timeout=30)
    assert r.status_code == 200 and r.json()["status"] == "pending", r.text


def test_state_survives_a_clean_stop_and_a_kill_and_reset_empties_it(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    platform = _start(state_dir)
    try:
        demo = dict(platform.demo)
        assert _me(platform, demo["api_token"]).status_code == 200
        before_stop = _content(platform, "clean")
        _settled(state_dir)
        items, objects = _items(platform), _objects(platform)
        chain = _verify_audit(state_dir, demo["workspace_id"])
    finally:
        stop_platform(platform)
    assert platform.process.returncode == 0

    platform = _start(state_dir)  # after a clean stop
    try:
        assert platform.demo == demo  # seeded once: the same user, secrets and tokens
        assert _me(platform, demo["api_token"]).status_code == 200
        assert _items(platform) == items
        assert _objects(platform) == objects
        assert _verify_audit(state_dir, demo["workspace_id"]) == chain
        _check(platform, before_stop)
        refused = subprocess.run(["make", "-s", "reset"], cwd=ROOT, env={**os.environ, "LOCAL_STATE_DIR": str(state_dir)},
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0 and "in use" in refused.stdout  # never under a running make run
        assert (state_dir / "demo.json").exists()
        before_kill = _content(platform, "killed")
        _settled(state_dir)
        items = _items(platform)
    finally:
        platform.process.send_signal(signal.SIGKILL)
        platform.process.wait()

    platform = _start(state_dir)  # after kill -9
    try:
        assert platform.demo == demo
        assert _items(platform) == items
        _check(platform, before_stop)
        _check(platform, before_kill)
        assert _verify_audit(state_dir, demo["workspace_id"])
    finally:
        stop_platform(platform)

    env = {**os.environ, "LOCAL_STATE_DIR": str(state_dir)}
    subprocess.run(["make", "-s", "reset"], cwd=ROOT, env=env, check=True, timeout=60)
    assert not state_dir.exists()
    platform = _start(state_dir)
    try:
        assert platform.demo["user_id"] != demo["user_id"]  # a fresh tenant
        assert _me(platform, before_stop["token"]).status_code == 401  # the old signing key is gone
        assert BUCKET not in {b["Name"] for b in platform.aws("s3").list_buckets()["Buckets"]}
    finally:
        stop_platform(platform)
