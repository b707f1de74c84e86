"""Cached boto3 clients per (service, region), plus resource names from the one declaration, and
``alongside`` for a round trip a request need not wait for before it goes on.

Endpoints come from ``AWS_ENDPOINT_URL`` (boto3 honours it), so there is no endpoint branching here.
"""
from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import boto3
from botocore.config import Config

from chalicelib.core import process_state
from chalicelib.core.config import settings
from chalicelib.core.process_state import cached
from chalicelib.core.regions import check_client_region
from chalicelib.core.telemetry import tracing

_lock = threading.Lock()
_session: boto3.session.Session | None = None
_BOTO_CONFIG = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=5, read_timeout=30)
T = TypeVar("T")
ALONGSIDE_WORKERS = 4  # round trips in flight beside their requests at once, per container
_alongside: list[ThreadPoolExecutor] = []


def client(service: str, region: str, *, read_timeout: float | None = None) -> Any:
    """A boto3 client for ``service`` in ``region``; created once per process. A deployment pinned to a
    region gets clients for its own region and the global one only (``core.regions``). ``read_timeout``
    (seconds): a client of its own that waits that long for an answer and does not retry (a model call
    with its own timeout)."""
    check_client_region(region, regional=False)
    return _client(service, region, read_timeout)


def botocore_session() -> Any:
    """The process's one botocore session (under boto3's): its loader parses each service's model once, so
    a client made from it (PynamoDB's included, ``store/tables.py``) costs no second JSON load."""
    with _lock:
        return _shared()._session


def shared_session_lock() -> threading.Lock:
    """The lock every client creation from the shared session takes (botocore's is not thread-safe)."""
    return _lock


@cached(maxsize=64, derived=True)
def _client(service: str, region: str, read_timeout: float | None = None) -> Any:
    config = _BOTO_CONFIG if read_timeout is None else _BOTO_CONFIG.merge(
        Config(read_timeout=read_timeout, retries={"total_max_attempts": 1, "mode": "standard"}))
    with _lock:  # one session: its loaded service models are shared by every client
        return _shared().client(service, region_name=region, config=config)


def _shared() -> boto3.session.Session:
    """The process's boto3 session, made (and traced: one span per AWS call) at first use; under ``_lock``."""
    global _session
    if _session is None:
        _session = boto3.session.Session()
        tracing.instrument_botocore(_session)
    return _session


def table_name(name: str) -> str:
    return f"{settings().resource_prefix}-{name}"


def queue_name(name: str) -> str:
    return f"{settings().resource_prefix}-{name}"


def bucket_name(name: str, region: str) -> str:
    return f"{settings().resource_prefix}-{name}-{region}"


def key_alias(name: str) -> str:
    return f"alias/{settings().resource_prefix}-{name}"


@cached(maxsize=32)
def queue_url(name: str, region: str) -> str:
    return client("sqs", region).get_queue_url(QueueName=queue_name(name))["QueueUrl"]


def _forget_session() -> None:
    global _session
    _session = None


process_state.enrol("core.aws.session", _forget_session, derived=True)


def alongside(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """``fn(*args, **kwargs)`` (work made of AWS calls) on a worker thread in a copy of this context (log
    correlation, trust bounds), so that its round trips overlap what the request does meanwhile: the
    catalog version read while a query runs, the query's lineage write. The caller waits for the result
    (``Future.result``) before it answers: a Lambda function is frozen between requests, so nothing may
    be left running after one."""
    with _lock:
        if not _alongside:
            _alongside.append(ThreadPoolExecutor(ALONGSIDE_WORKERS, thread_name_prefix="alongside"))
    return _alongside[0].submit(contextvars.copy_context().run, fn, *args, **kwargs)
