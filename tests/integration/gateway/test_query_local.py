"""The read side over real HTTP on `make run`'s stack: a connector synced by the local worker loop, then
its dataset searched, policy-set, queried (PII masked) and traced, through REST and GraphQL."""
from __future__ import annotations

import time
import uuid

import requests

from tests.integration.conftest import RunningPlatform


def test_sync_then_search_query_and_lineage_over_http(platform: RunningPlatform) -> None:
    gw = platform.urls["gateway"]
    h = {"Authorization": f"Bearer {platform.demo['api_token']}"}
    bucket, name = f"it-q-{uuid.uuid4().hex[:10]}", f"people_{uuid.uuid4().hex[:6]}"
    s3 = platform.source_aws("s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="in/p.csv", Body=b"id,email,city\n1,alice@example.com,Berlin\n2,bob@example.com,Paris\n")
    conn = requests.post(f"{gw}/v1/connectors", headers=h, timeout=30, json={
        "name": name, "kind": "s3", "dataset_name": name,
        "config": {"role_arn": "arn:aws:iam::111122223333:role/gateway-reader", "bucket": bucket, "prefix": "in/", "format": "csv", "primary_key": ["id"]}}).json()
    run = requests.post(f"{gw}/v1/connectors/{conn['id']}/sync", headers=h, timeout=10, json={"mode": "FULL_REFRESH"}).json()
    deadline = time.monotonic() + 60
    while run["status"] not in ("SUCCEEDED", "FAILED") and time.monotonic() < deadline:
        time.sleep(0.5)
        run = requests.get(f"{gw}/v1/connectors/{conn['id']}/syncs/{run['id']}", headers=h, timeout=10).json()
    assert run["status"] == "SUCCEEDED", run
    ds_id = conn["dataset"]["id"]
    r = requests.put(f"{gw}/v1/catalog/datasets/{ds_id}/fields/email/policy", headers=h, timeout=10,
                     json={"policy": "MASK"})
    assert r.status_code == 200, r.text
    time.sleep(2.5)  # another process's catalog snapshot may be up to CATALOG_CACHE_SECONDS old
    found = requests.get(f"{gw}/v1/catalog/datasets", params={"q": name}, headers=h, timeout=30).json()
    assert [d["id"] for d in found["items"]] == [ds_id]
    r = requests.post(f"{gw}/v1/query", headers=h, timeout=60,
                      json={"sql": f"SELECT email, city FROM {name} WHERE email LIKE 'a%' OR id = 1"})
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == [["*************.com", "Berlin"]]
    for _ in range(60):  # the query's lineage is written by the sync worker from its queued message
        gql = requests.post(f"{gw}/graphql", headers=h, timeout=30, json={
            "query": "query($id: ID!) { dataset(id: $id) { name freshness source { kind } } "
                     "lineage(datasetId: $id) { truncated nodes { type } } }", "variables": {"id": ds_id}}).json()
        assert "errors" not in gql, gql
        if "QUERY" in {n["type"] for n in gql["data"]["lineage"]["nodes"]}:
            break
        time.sleep(0.5)
    assert gql["data"]["dataset"]["source"]["kind"] == "s3"
    assert {"CONNECTOR", "DATASET", "QUERY"} <= {n["type"] for n in gql["data"]["lineage"]["nodes"]}
    assert requests.get(f"{gw}/graphql?sdl", timeout=10).text.startswith('"""')
    assert requests.get(f"{gw}/v1/openapi.json", timeout=10).json()["openapi"] == "3.1.0"
