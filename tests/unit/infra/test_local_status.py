"""`make run`'s status (infra/local/status.py): a worker that starts retrying, recovers or stops reporting
is printed once; ``LOCAL_WORKERS`` is checked (infra/local/workers.py)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from infra.local.status import STALE_SECONDS, changes, collect, health_file, render
from infra.local.workers import Backoff, Health, workers_per_queue


def _write(state: Path, region: str, workers: dict[str, dict[str, object]], at: float | None = None) -> None:
    health_file(state, region).write_text(json.dumps({"pid": 1, "at": at or time.time(), "workers": workers}))


def test_a_retrying_worker_is_reported_once_and_its_recovery_too(tmp_path: Path) -> None:
    emulator = {"persistent": True, "directory": str(tmp_path), "last_snapshot": {}, "failed_snapshots": 0}
    _write(tmp_path, "us-east-1", {"sync-jobs#1@us-east-1": {"state": "ok", "handled": 3}})
    first = collect(tmp_path, ("us-east-1",), emulator)
    assert changes(None, first) == []
    _write(tmp_path, "us-east-1", {"sync-jobs#1@us-east-1": {"state": "retrying", "failures": 2,
                                                             "error": "EndpointConnectionError", "handled": 3}})
    failing = collect(tmp_path, ("us-east-1",), emulator)
    assert failing["regions"]["us-east-1"]["state"] == "retrying"
    (line,) = changes(first, failing)
    assert "sync-jobs#1@us-east-1" in line and "EndpointConnectionError" in line
    assert changes(failing, failing) == []  # said once
    assert "2 failure(s) in a row (EndpointConnectionError)" in render(failing)
    _write(tmp_path, "us-east-1", {"sync-jobs#1@us-east-1": {"state": "ok", "handled": 9}})
    (line,) = changes(failing, collect(tmp_path, ("us-east-1",), emulator))
    assert "reaches the emulator again" in line


def test_a_region_that_stops_writing_is_stale_and_a_failed_snapshot_is_reported(tmp_path: Path) -> None:
    emulator = {"persistent": True, "directory": str(tmp_path), "last_snapshot": {}, "failed_snapshots": 0}
    _write(tmp_path, "eu-central-1", {}, at=time.time() - STALE_SECONDS - 1)
    before = {"regions": {"eu-central-1": {"state": "ok", "workers": {}}}, "emulator": emulator}
    now = collect(tmp_path, ("eu-central-1", "us-east-1"), {**emulator, "failed_snapshots": 1})
    assert now["regions"]["eu-central-1"]["state"] == "stale"
    assert now["regions"]["us-east-1"]["state"] == "starting"  # no file yet
    lines = changes(before, now)
    assert any("eu-central-1" in line and "no health report" in line for line in lines)
    assert any("snapshot could not be written" in line for line in lines)


def test_health_and_backoff() -> None:
    health, backoff = Health(), Backoff(0.5, 4)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 4, 4]
    backoff.reset()
    assert backoff.next() == 0.5
    health.failing("w", ConnectionError(), 1.0)
    health.failing("w", ConnectionError(), 2.0)
    assert health.snapshot()["w"]["failures"] == 2 and health.snapshot()["w"]["state"] == "retrying"
    health.handled("w", 3)
    health.ok("w")
    assert health.snapshot()["w"] == {**health.snapshot()["w"], "state": "ok", "failures": 0, "handled": 3}


def test_workers_per_queue_defaults_and_overrides() -> None:
    counts = workers_per_queue("")
    assert counts["agent-runs"] == 4 and counts["sync-jobs"] == 2
    assert workers_per_queue("sync-jobs=5")["sync-jobs"] == 5
    for bad in ("nope=2", "sync-jobs=0", "sync-jobs=x"):
        with pytest.raises(SystemExit):
            workers_per_queue(bad)
