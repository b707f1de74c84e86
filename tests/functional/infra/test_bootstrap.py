"""An EU bootstrap creates nothing in us-east-1 beyond the global directory (tables and token key).

Each test uses its own resource prefix, so only what its bootstrap created is looked at."""
from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3
import pytest

from chalicelib.core import aws
from chalicelib.core.config import settings
from infra import bootstrap
from infra.resources import GLOBAL, TABLES, keys


@pytest.fixture
def own_prefix(_moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    prefix = f"iso{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("RESOURCE_PREFIX", prefix)
    settings.cache_clear()
    aws.queue_url.cache_clear()
    yield prefix
    monkeypatch.undo()
    settings.cache_clear()
    aws.queue_url.cache_clear()


def _mine(names: list[str], prefix: str) -> set[str]:
    return {n for n in names if prefix in n}


def test_eu_bootstrap_touches_us_east_1_only_for_global_directory(own_prefix: str) -> None:
    bootstrap.bootstrap_global()
    bootstrap.bootstrap_region("eu-central-1")
    us = "us-east-1"
    tables = _mine(boto3.client("dynamodb", region_name=us).list_tables()["TableNames"], own_prefix)
    assert tables == {aws.table_name(t.name) for t in TABLES if t.scope == GLOBAL}
    assert _mine(boto3.client("sqs", region_name=us).list_queues().get("QueueUrls", []), own_prefix) == set()
    s3 = boto3.client("s3", region_name=us)
    for bucket in _mine([b["Name"] for b in s3.list_buckets()["Buckets"]], own_prefix):
        assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == "eu-central-1"
    aliases = _mine([a["AliasName"] for a in boto3.client("kms", region_name=us).list_aliases()["Aliases"]], own_prefix)
    assert aliases == {aws.key_alias(k.name) for k in keys(GLOBAL)}
    eu_tables = _mine(boto3.client("dynamodb", region_name="eu-central-1").list_tables()["TableNames"], own_prefix)
    assert aws.table_name("audit_events") in eu_tables
    assert aws.table_name("users") not in eu_tables


def test_bootstrap_is_idempotent(own_prefix: str) -> None:
    first = bootstrap.bootstrap_all()
    second = bootstrap.bootstrap_all()
    assert all(first["us-east-1"].values())
    assert all(first["global"].values())
    assert not any(v for region in ("us-east-1", "eu-central-1") for v in second[region].values())
    assert not any(second["global"].values())
