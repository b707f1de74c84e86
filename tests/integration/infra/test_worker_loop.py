"""`make run`'s queue workers (infra/local/workers.py) survive the emulator going away: they retry with
backoff, report it in their health, and drain the queue once the emulator answers again."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from chalicelib.core import aws, process_state
from infra.local.workers import Backoff, Health, QueueWorker
from tests.integration.sso_peers import free_port

QUEUE = "worker-loop-check"
REGION = "us-east-1"


@pytest.fixture()
def emulator_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    port = free_port()
    for name, value in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "local",
                        "AWS_SECRET_ACCESS_KEY": "local"}.items():
        monkeypatch.setenv(name, value)
    process_state.reset_all(derived=True)  # clients and queue URLs are per endpoint
    try:
        yield {"port": port}
    finally:  # the variables come back with monkeypatch's teardown
        process_state.reset_all(derived=True)  # clients and queue URLs are per endpoint


def _wait(predicate: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _send(bodies: range) -> None:
    sqs = aws.client("sqs", REGION)
    url = aws.queue_url(QUEUE, REGION)
    for n in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"n": n}))


def test_workers_retry_while_the_emulator_is_down_and_drain_the_queue_after(emulator_env: dict[str, Any]) -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=emulator_env["port"], verbose=False)
    server.start()
    aws.client("sqs", REGION).create_queue(QueueName=aws.queue_name(QUEUE))
    handled: list[int] = []
    lock = threading.Lock()

    def handler(event: dict[str, Any]) -> dict[str, Any]:
        with lock:
            handled.extend(json.loads(r["body"])["n"] for r in event["Records"])
        return {"batchItemFailures": []}

    stop, health = threading.Event(), Health()
    workers = [QueueWorker(QUEUE, REGION, handler, stop, health, n, backoff=Backoff(0.1, 0.5)) for n in (1, 2)]
    for worker in workers:
        worker.start()
    try:
        _send(range(5))
        _wait(lambda: sorted(handled) == list(range(5)), "the first messages")

        server.stop()  # the emulator goes away
        _wait(lambda: all(w["state"] == "retrying" for w in health.snapshot().values()), "workers to notice")
        assert all(w.is_alive() for w in workers)
        failures = {name: w["failures"] for name, w in health.snapshot().items()}
        _wait(lambda: any(health.snapshot()[n]["failures"] > f for n, f in failures.items()), "a retry")

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=emulator_env["port"], verbose=False)
        server.start()  # back, with its queue (moto keeps state in this process)
        _send(range(5, 45))
        _wait(lambda: sorted(handled) == list(range(45)), "the queue to drain")
        _wait(lambda: all(w["state"] == "ok" for w in health.snapshot().values()), "workers to recover")
        # a batch counts in the health once its messages are deleted, after the handler has seen them
        _wait(lambda: sum(w["handled"] for w in health.snapshot().values()) >= 45, "the health to count every message")
        assert sum(w["handled"] for w in health.snapshot().values()) == 45
        sqs = aws.client("sqs", REGION)
        attrs = sqs.get_queue_attributes(QueueUrl=aws.queue_url(QUEUE, REGION), AttributeNames=["All"])["Attributes"]
        assert attrs["ApproximateNumberOfMessages"] == "0"
        assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"  # every handled message was deleted
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=10)
        server.stop()
    assert not any(w.is_alive() for w in workers)


def test_a_failing_handler_leaves_its_messages_for_redelivery(emulator_env: dict[str, Any]) -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=emulator_env["port"], verbose=False)
    server.start()
    try:
        sqs = aws.client("sqs", REGION)
        sqs.create_queue(QueueName=aws.queue_name(QUEUE), Attributes={"VisibilityTimeout": "30"})
        seen: list[int] = []

        def handler(event: dict[str, Any]) -> dict[str, Any]:
            records = event["Records"]
            seen.extend(json.loads(r["body"])["n"] for r in records)
            return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records
                                          if json.loads(r["body"])["n"] % 2]}

        _send(range(4))
        worker = QueueWorker(QUEUE, REGION, handler, threading.Event(), Health(), 1)
        got = 0
        while got < 4:
            got += worker.poll_once()
        assert sorted(seen) == [0, 1, 2, 3]
        attrs = sqs.get_queue_attributes(QueueUrl=aws.queue_url(QUEUE, REGION), AttributeNames=["All"])["Attributes"]
        assert attrs["ApproximateNumberOfMessagesNotVisible"] == "2"  # 1 and 3 come back; 0 and 2 deleted
    finally:
        server.stop()
