"""Cached boto3 clients per (service, region), plus resource names from the one declaration.

Endpoints come from ``AWS_ENDPOINT_URL`` (boto3 honours it), so there is no endpoint branching here.
"""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import boto3
from botocore.config import Config

from chalicelib.core.config import settings

_lock = threading.Lock()
_session: boto3.session.Session | None = None
_BOTO_CONFIG = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=5, read_timeout=30)


@lru_cache(maxsize=64)
def client(service: str, region: str) -> Any:
    """A boto3 client for ``service`` in ``region``; created once per process."""
    global _session
    with _lock:  # one session: its loaded service models are shared by every client
        if _session is None:
            _session = boto3.session.Session()
        return _session.client(service, region_name=region, config=_BOTO_CONFIG)


def table_name(name: str) -> str:
    return f"{settings().resource_prefix}-{name}"


def queue_name(name: str) -> str:
    return f"{settings().resource_prefix}-{name}"


def bucket_name(name: str, region: str) -> str:
    return f"{settings().resource_prefix}-{name}-{region}"


def key_alias(name: str) -> str:
    return f"alias/{settings().resource_prefix}-{name}"


@lru_cache(maxsize=32)
def queue_url(name: str, region: str) -> str:
    return client("sqs", region).get_queue_url(QueueName=queue_name(name))["QueueUrl"]


def reset_caches() -> None:
    """Forget clients and URLs (tests switch endpoints between runs)."""
    global _session
    client.cache_clear()
    queue_url.cache_clear()
    _session = None
