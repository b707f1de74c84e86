"""The queue workers of one region's `make run` process: Lambda's SQS poller, run locally.

Each declared queue (``chalicelib/workers/jobs.py``, ``QUEUE_HANDLERS``) gets its own threads
(``workers_per_queue``: by default 4 for ``agent-runs`` and 2 for every other queue), so a long agent
run never holds up a sync, an audit export or a restore, and a burst of runs is worked on in parallel.
A thread receives a batch (long poll, ``POLL_SECONDS``), calls the handler with the event Lambda's integration
delivers (``sqs_event``) and deletes what the handler did not report as failed.

Every call to the emulator (receive, the queue's ARN, delete) is retried with exponential backoff
(0.5 s doubling to 15 s) for as long as it fails, so a stopped or restarting emulator pauses the
workers instead of ending them; the queue drains once it answers again. A handler that raises is
Lambda's failed invocation: its messages come back after the visibility timeout (and the redrive policy
dead-letters them in the end). Each thread's health (``ok``/``retrying``, failures in a row, the last
error's type, when it last reached the emulator) is kept in ``Health`` and written by the region's
process to ``<state dir>/health-<region>.json``, which `make run` reports (``status.py``).

A new message wakes a waiting thread at once (the emulator's long poll is notified when a message
arrives), so the poll's length costs no latency; a message that becomes visible again by time (a retry's
shortened visibility, a timed-out delivery) waits at most ``POLL_SECONDS`` for an idle thread. Longer polls
mean fewer empty receives: a region's 14 idle threads polling each second kept a stack's processes and
its emulator busy with about 28 requests a second.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chalicelib.core.logs import get_logger

log = get_logger("local.worker")
Handler = Callable[[dict[str, Any]], dict[str, Any]]
DEFAULT_WORKERS = {"agent-runs": 4}
DEFAULT_PER_QUEUE = 2
BACKOFF_START, BACKOFF_CAP = 0.5, 15.0
POLL_SECONDS = 5


def sqs_event(messages: list[dict[str, Any]], region: str, queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS integration delivers, built from ReceiveMessage results."""
    records = []
    for m in messages:
        attrs = {k: {"stringValue": v.get("StringValue"), "dataType": v.get("DataType", "String")}
                 for k, v in (m.get("MessageAttributes") or {}).items()}
        records.append({
            "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
            "attributes": m.get("Attributes", {}), "messageAttributes": attrs, "md5OfBody": m.get("MD5OfBody", ""),
            "eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": region,
        })
    return {"Records": records}


def workers_per_queue(spec: str | None = None) -> dict[str, int]:
    """Threads per queue: ``DEFAULT_WORKERS`` overridden by ``LOCAL_WORKERS`` (``agent-runs=6,sync-jobs=3``)."""
    from chalicelib.workers.jobs import QUEUE_HANDLERS

    counts = {queue: DEFAULT_WORKERS.get(queue, DEFAULT_PER_QUEUE) for queue in QUEUE_HANDLERS}
    for part in filter(None, (spec if spec is not None else os.environ.get("LOCAL_WORKERS", "")).split(",")):
        name, _, value = part.partition("=")
        if name.strip() not in counts or not value.strip().isdigit() or int(value) < 1:
            raise SystemExit(f"LOCAL_WORKERS: expected queue=count with a declared queue, got {part!r}")
        counts[name.strip()] = int(value)
    return counts


class Health:
    """Each worker thread's state, as `make run` reports it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[str, dict[str, Any]] = {}

    def ok(self, name: str) -> None:
        with self._lock:
            self._workers[name] = {"state": "ok", "failures": 0, "error": None, "last_ok": time.time(),
                                   "handled": self._workers.get(name, {}).get("handled", 0)}

    def handled(self, name: str, count: int) -> None:
        with self._lock:
            entry = self._workers.setdefault(name, {"state": "ok", "failures": 0, "error": None, "handled": 0})
            entry["handled"] = entry.get("handled", 0) + count

    def failing(self, name: str, error: BaseException, retry_in: float) -> None:
        with self._lock:
            entry = self._workers.setdefault(name, {"handled": 0, "last_ok": None})
            entry.update(state="retrying", failures=entry.get("failures", 0) + 1, error=type(error).__name__,
                         retry_in=round(retry_in, 1))

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {name: dict(entry) for name, entry in sorted(self._workers.items())}

    def write(self, path: Path) -> None:
        """Write the health atomically (a reader never sees half a file)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "at": time.time(), "workers": self.snapshot()}))
        os.replace(tmp, path)


class Backoff:
    """Exponential backoff: BACKOFF_START doubling up to BACKOFF_CAP seconds."""

    def __init__(self, start: float = BACKOFF_START, cap: float = BACKOFF_CAP) -> None:
        self.start, self.cap, self.delay = start, cap, start

    def next(self) -> float:
        delay, self.delay = self.delay, min(self.cap, self.delay * 2)
        return delay

    def reset(self) -> None:
        self.delay = self.start


class QueueWorker(threading.Thread):
    """One consumer of one queue in one region."""

    def __init__(self, queue: str, region: str, handler: Handler, stop: threading.Event, health: Health,
                 index: int, *, backoff: Backoff | None = None) -> None:
        super().__init__(name=f"{queue}#{index}@{region}", daemon=True)
        self.queue, self.region, self.handler, self.stop, self.health = queue, region, handler, stop, health
        self.backoff = backoff or Backoff()
        self._arn: str | None = None
        self._failing = False

    def _emulator(self, call: Callable[[], Any]) -> Any:
        """Run one emulator call, retrying it with backoff until it answers (or the worker stops)."""
        while True:
            try:
                result = call()
            except Exception as err:  # noqa: BLE001 - connection refused, timeouts, 5xx: wait and retry
                delay = self.backoff.next()
                if not self._failing:
                    log.warning("worker cannot reach the emulator; retrying",
                                extra={"worker": self.name, "error": type(err).__name__})
                    self._failing = True
                self.health.failing(self.name, err, delay)
                if self.stop.wait(delay):
                    raise _Stopped() from None
                continue
            if self._failing:
                log.info("worker reaches the emulator again", extra={"worker": self.name})
                self._failing = False
            self.backoff.reset()
            self.health.ok(self.name)
            return result

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.poll_once()
        except _Stopped:
            return

    def poll_once(self) -> int:
        """Receive one batch, handle it, delete what succeeded; returns how many messages were handled."""
        from chalicelib.core import aws

        sqs = aws.client("sqs", self.region)
        url = self._emulator(lambda: aws.queue_url(self.queue, self.region))
        got = self._emulator(lambda: sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=POLL_SECONDS, AttributeNames=["All"],
            MessageAttributeNames=["All"]))
        messages = got.get("Messages", [])
        if not messages:
            return 0
        if self._arn is None:
            self._arn = self._emulator(lambda: sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])
        try:
            result = self.handler(sqs_event(messages, self.region, self._arn)) or {}
        except Exception:  # noqa: BLE001 - Lambda would retry the whole batch after the visibility timeout
            log.exception("queue handler failed", extra={"queue": self.queue, "region": self.region})
            return 0
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        for m in messages:
            if m["MessageId"] not in failed:
                self._emulator(lambda m=m: sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"]))
        self.health.handled(self.name, len(messages) - len(failed))
        return len(messages)


class _Stopped(Exception):
    """The worker was asked to stop while it waited to retry."""


def start_workers(region: str, handlers: dict[str, Handler], stop: threading.Event, health: Health,
                  counts: dict[str, int] | None = None) -> list[QueueWorker]:
    """Start ``counts[queue]`` threads for each queue of ``handlers`` in ``region``. Each queue's address is
    asked once first (cached by ``aws.queue_url``): the threads' first polls all at once each asked for it,
    dozens of calls flooding the emulator just as the first requests of a fresh start arrived."""
    from chalicelib.core import aws

    for queue in handlers:
        try:
            aws.queue_url(queue, region)
        except Exception:  # noqa: BLE001 - the emulator not answering yet: each thread retries on its own
            break
    counts = counts or workers_per_queue()
    threads = [QueueWorker(queue, region, handler, stop, health, n + 1)
               for queue, handler in handlers.items() for n in range(counts.get(queue, DEFAULT_PER_QUEUE))]
    for thread in threads:
        thread.start()
    return threads
