"""Both regions on `make run`'s stack over real HTTP: an EU workspace is created at the global address,
then invited to, synced, queried and audited (read and export) at the EU addresses; the US addresses
answer 421; afterwards no us-east-1 table outside the global directory, no us-east-1 bucket and no
us-east-1 queue holds anything of the EU workspace."""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from infra.resources import GLOBAL, QUEUES, TABLES
from tests.integration.conftest import RunningPlatform

US, EU = "us-east-1", "eu-central-1"


@pytest.fixture
def user_token(platform: RunningPlatform, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An interactive user token of the demo user (for the US demo workspace), signed by the stack's own
    identity key in its emulator, as a browser sign-in would obtain it."""
    from chalicelib.core import process_state
    from chalicelib.core.config import settings
    from chalicelib.identity.oauth import signing

    env = {"AWS_ENDPOINT_URL": platform.urls["aws_endpoint"], "AWS_ACCESS_KEY_ID": "local",
           "AWS_SECRET_ACCESS_KEY": "local", "AUTH_URL": platform.urls["identity"], "RESOURCE_PREFIX": "aiplat"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings.cache_clear()
    process_state.reset_all(derived=True)
    try:
        token, _ = signing.issue_access_token(user_id=platform.demo["user_id"], email=platform.demo["email"],
                                              workspace_id=platform.demo["workspace_id"], roles=["admin"],
                                              amr=["pwd", "otp", "mfa"])
        yield token
    finally:  # the variables come back with monkeypatch's teardown; nothing cached keeps them
        settings.cache_clear()
        process_state.reset_all(derived=True)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_run_json_lists_both_regions(platform: RunningPlatform) -> None:
    assert set(platform.regions) == {US, EU}
    assert platform.regions[US]["platform"] == platform.urls["platform"]
    assert platform.regions[EU]["platform"] != platform.urls["platform"]
    assert {"eu_workspace_id", "eu_api_token"} <= set(platform.demo)


def test_us_and_eu_demo_workspaces_both_work(platform: RunningPlatform) -> None:
    for region, token in ((US, platform.demo["api_token"]), (EU, platform.demo["eu_api_token"])):
        where = platform.regions[region]
        r = requests.post(where["gateway"] + "/v1/query", headers=_auth(token), timeout=30,
                          json={"sql": "SELECT city FROM customers"})
        assert r.status_code == 200, r.text
        cities = {row[0] if isinstance(row, list) else row["city"] for row in r.json()["rows"]}
        assert ("Vienna" in cities) == (region == EU)  # each region's own demo data
        other = platform.regions[EU if region == US else US]
        r = requests.get(other["gateway"] + "/v1/connectors", headers=_auth(token), timeout=10)
        assert r.status_code == 421 and r.json()["gateway_url"] == where["gateway"]


def test_eu_workspace_lifecycle_at_the_eu_addresses(platform: RunningPlatform, user_token: str) -> None:
    identity, eu = platform.urls["identity"], platform.regions[EU]
    # created at the global address (the us-east-1 platform doubles as the global deployment)
    r = requests.post(platform.urls["platform"] + "/workspaces", headers=_auth(user_token), timeout=30,
                      json={"name": f"Residency {uuid.uuid4().hex[:6]}", "residency": "eu-central"})
    assert r.status_code == 201, r.text
    ws = r.json()
    assert ws["api_base_url"] == eu["platform"] and ws["gateway_url"] == eu["gateway"]
    r = requests.post(identity + "/oauth2/token", timeout=30, data={
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token": user_token,
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token", "workspace_id": ws["id"]})
    assert r.status_code == 200, r.text
    exchanged = r.json()
    assert exchanged["api_base_url"] == eu["platform"] and exchanged["gateway_url"] == eu["gateway"]
    token = exchanged["access_token"]
    h = _auth(token)

    r = requests.post(f"{eu['platform']}/workspaces/{ws['id']}/invitations", headers=h, timeout=30,
                      json={"email": f"eu-{uuid.uuid4().hex[:6]}@example.com", "role": "member"})
    assert r.status_code == 201, r.text

    bucket = f"eu-src-{uuid.uuid4().hex[:10]}"
    s3 = platform.source_aws("s3", region=EU)  # the customer's own account, in the EU
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": EU})
    s3.put_object(Bucket=bucket, Key="people/p.csv", Body=b"id,name,city\n1,Ada,Vienna\n2,Grace,Lisbon\n")
    r = requests.post(f"{eu['gateway']}/v1/connectors", headers=h, timeout=30, json={
        "name": "EU people", "kind": "s3", "dataset_name": "people",
        "config": {"role_arn": "arn:aws:iam::111122223333:role/gateway-reader", "bucket": bucket,
                   "prefix": "people/", "format": "csv", "primary_key": ["id"]}})
    assert r.status_code == 201, r.text
    conn = r.json()
    r = requests.post(f"{eu['gateway']}/v1/connectors/{conn['id']}/sync", headers=h, timeout=10,
                      json={"mode": "FULL_REFRESH"})
    assert r.status_code == 202, r.text
    sync_id, deadline = r.json()["id"], time.monotonic() + 60
    while True:  # picked up by the EU region's worker loop
        run = requests.get(f"{eu['gateway']}/v1/connectors/{conn['id']}/syncs/{sync_id}", headers=h, timeout=10).json()
        if run["status"] in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert run["status"] == "SUCCEEDED", run
    r = requests.post(f"{eu['gateway']}/v1/query", headers=h, timeout=30, json={"sql": "SELECT name FROM people"})
    assert r.status_code == 200 and len(r.json()["rows"]) == 2, r.text
    graphql = requests.post(f"{eu['gateway']}/graphql", headers=h, timeout=30, json={"query": "{ connectors { id } }"})
    assert graphql.status_code == 200 and graphql.json()["data"]["connectors"], graphql.text

    r = requests.get(f"{eu['platform']}/audit/events", headers=h, timeout=10)
    assert r.status_code == 200 and r.json()["events"], r.text
    r = requests.post(f"{eu['platform']}/audit/exports", headers=h, timeout=60, json={})
    assert r.status_code == 202, r.text  # built and signed by the EU export job
    assert f"-{EU}" in r.json()["uri"]  # exported into the EU audit archive

    for url in (f"{platform.urls['platform']}/audit/events", f"{platform.urls['gateway']}/v1/connectors"):
        r = requests.get(url, headers=h, timeout=10)
        assert r.status_code == 421 and r.json()["code"] == "wrong_region", r.text
        assert r.json()["api_base_url"] == eu["platform"]

    leaks = _us_east_content_of(platform, ws["id"], bucket)
    assert leaks == [], leaks


def _us_east_content_of(platform: RunningPlatform, workspace_id: str, source_bucket: str) -> list[str]:
    """Every place in us-east-1 outside the global directory that mentions the workspace or its data."""
    needles = (workspace_id, source_bucket, "Vienna")
    found: list[str] = []
    ddb = platform.aws("dynamodb", US)
    directory = {f"aiplat-{t.name}" for t in TABLES if t.scope == GLOBAL}
    for name in ddb.list_tables()["TableNames"]:
        items = [i for page in ddb.get_paginator("scan").paginate(TableName=name) for i in page["Items"]]
        text = json.dumps(items)
        if workspace_id in text and name not in directory:
            found.append(f"table {name}")
        if name in directory and any(n in text for n in needles[1:]):
            found.append(f"content in directory table {name}")
    s3 = platform.aws("s3", US)
    for bucket in s3.list_buckets()["Buckets"]:
        if s3.get_bucket_location(Bucket=bucket["Name"]).get("LocationConstraint") not in (None, US):
            continue
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            for obj in page.get("Contents", []):
                body: Any = s3.get_object(Bucket=bucket["Name"], Key=obj["Key"])["Body"].read()
                if any(n in obj["Key"] or n.encode() in body for n in needles):
                    found.append(f"s3://{bucket['Name']}/{obj['Key']}")
    sqs = platform.aws("sqs", US)
    for queue in QUEUES:
        for name in (queue.name, queue.name + "-dlq"):
            url = sqs.get_queue_url(QueueName=f"aiplat-{name}")["QueueUrl"]
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
            if any(workspace_id in m["Body"] for m in got.get("Messages", [])):
                found.append(f"queue {name}")
    return found
