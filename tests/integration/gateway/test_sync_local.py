"""The ingestion path over real HTTP on `make run`'s stack: gateway routes on their port, a presigned
PUT to the emulator's S3 server, the sync message picked up by the local worker loop."""
from __future__ import annotations

import time
import uuid

import requests

from tests.integration.conftest import RunningPlatform


def _wait_for_run(platform: RunningPlatform, headers: dict[str, str], conn_id: str, sync_id: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        run = requests.get(f"{platform.urls['gateway']}/v1/connectors/{conn_id}/syncs/{sync_id}", headers=headers,
                           timeout=10).json()
        if run["status"] in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
            return run
        time.sleep(0.5)


def test_documents_and_s3_connectors_sync_through_the_local_worker_loop(platform: RunningPlatform) -> None:
    gw = platform.urls["gateway"]
    headers = {"Authorization": f"Bearer {platform.demo['api_token']}"}
    r = requests.post(f"{gw}/v1/connectors", headers=headers, timeout=30, json={
        "name": f"Handbook {uuid.uuid4().hex[:6]}", "kind": "documents", "config": {}})
    assert r.status_code == 201, r.text
    docs = r.json()
    up = requests.post(f"{gw}/v1/connectors/{docs['id']}/uploads", headers=headers, timeout=10,
                       json={"file_name": "notes.txt"}).json()
    put = requests.put(up["upload_url"], data=b"First passage.\n\nSecond passage.", headers=up["headers"], timeout=10)
    assert put.status_code == 200, put.text
    r = requests.post(f"{gw}/v1/connectors/{docs['id']}/sync", headers={**headers, "Idempotency-Key": docs["id"]},
                      timeout=10)
    assert r.status_code == 202
    assert r.headers["Location"].endswith(r.json()["id"])
    run = _wait_for_run(platform, headers, docs["id"], r.json()["id"])
    assert run["status"] == "SUCCEEDED" and run["rows_read"] == 1, run

    bucket = f"it-src-{uuid.uuid4().hex[:10]}"
    s3 = platform.source_aws("s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="in/a.jsonl", Body=b'{"id": 1, "email": "a@example.com"}\n{"id": 2}\n')
    r = requests.post(f"{gw}/v1/connectors", headers=headers, timeout=30, json={
        "name": f"Leads {uuid.uuid4().hex[:6]}", "kind": "s3", "config": {"role_arn": "arn:aws:iam::111122223333:role/gateway-reader", "bucket": bucket, "prefix": "in/"}})
    assert r.status_code == 201 and r.json()["status"] == "HEALTHY", r.text
    conn = r.json()
    r = requests.post(f"{gw}/v1/connectors/{conn['id']}/sync", headers=headers, timeout=10, json={"mode": "FULL_REFRESH"})
    run = _wait_for_run(platform, headers, conn["id"], r.json()["id"])
    assert run["status"] == "SUCCEEDED" and run["rows_written"] == 2, run
    listed = requests.get(f"{gw}/v1/connectors?category=STORAGE", headers=headers, timeout=10).json()["connectors"]
    assert conn["id"] in [c["id"] for c in listed]
