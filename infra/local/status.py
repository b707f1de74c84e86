"""The status of a running `make run`: the emulator's state on disk and every queue worker's health.

The main process (``StatusReporter``) gathers, every ``EVERY`` seconds, the emulator's snapshot status and
the health each region's process writes (``health-<region>.json``, ``workers.Health``) into
``<state dir>/status.json``, and prints a line to its own output whenever a worker starts retrying,
reaches the emulator again, or a snapshot fails. ``make status`` (``python -m infra.local.status``)
prints the last status of the `make run` whose state directory is ``LOCAL_STATE_DIR`` (``.local``).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

EVERY = 2.0
STALE_SECONDS = 10  # a region's health older than this: its process is not writing (stopped, stuck)


def health_file(state_dir: Path, region: str) -> Path:
    return state_dir / f"health-{region}.json"


def collect(state_dir: Path, regions: tuple[str, ...], emulator: dict[str, Any]) -> dict[str, Any]:
    now = time.time()
    out: dict[str, Any] = {"at": now, "pid": os.getpid(), "emulator": emulator, "regions": {}}
    for region in regions:
        try:
            health = json.loads(health_file(state_dir, region).read_text())
        except (OSError, ValueError):
            out["regions"][region] = {"state": "starting", "workers": {}}
            continue
        stale = now - float(health.get("at", 0)) > STALE_SECONDS
        workers = health.get("workers", {})
        state = "stale" if stale else "retrying" if any(w.get("state") != "ok" for w in workers.values()) else "ok"
        out["regions"][region] = {"state": state, "workers": workers}
    return out


def changes(before: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """Lines worth printing: a worker that starts retrying or recovers, a region whose health went
    stale, a snapshot that failed to be written."""
    lines = []
    old_regions = (before or {}).get("regions", {})
    for region, entry in now["regions"].items():
        old = old_regions.get(region, {})
        if entry["state"] == "stale" and old.get("state") != "stale":
            lines.append(f"workers {region}: no health report for {STALE_SECONDS}s (process stopped?)")
        for name, worker in entry["workers"].items():
            was = old.get("workers", {}).get(name, {}).get("state", "ok")
            if worker.get("state") == "retrying" and was != "retrying":
                lines.append(f"worker {name}: cannot reach the emulator ({worker.get('error')}), "
                             f"retrying with backoff")
            elif worker.get("state") == "ok" and was == "retrying":
                lines.append(f"worker {name}: reaches the emulator again")
    failed = now["emulator"].get("failed_snapshots", 0)
    if failed > (before or {}).get("emulator", {}).get("failed_snapshots", 0):
        lines.append("emulator: a state snapshot could not be written (see the log above)")
    return lines


class StatusReporter(threading.Thread):
    """Writes ``status.json`` and prints what changed, until ``stop`` is set."""

    def __init__(self, state_dir: Path, regions: tuple[str, ...], emulator: Callable[[], dict[str, Any]],
                 stop: threading.Event, out: Callable[[str], None] = print) -> None:
        super().__init__(name="status", daemon=True)
        self.state_dir, self.regions, self.emulator, self.stop, self.out = state_dir, regions, emulator, stop, out
        self.last: dict[str, Any] | None = None

    def run(self) -> None:
        while not self.stop.wait(EVERY):
            self.report()

    def report(self) -> dict[str, Any]:
        now = collect(self.state_dir, self.regions, self.emulator())
        for line in changes(self.last, now):
            self.out(f"[status] {line}")
        self.last = now
        path = self.state_dir / "status.json"
        tmp = path.with_name("status.json.tmp")
        tmp.write_text(json.dumps(now, indent=1))
        os.replace(tmp, path)
        return now


def render(status: dict[str, Any]) -> str:
    emulator = status.get("emulator", {})
    lines = []
    if emulator.get("persistent"):
        last = emulator.get("last_snapshot") or {}
        saved = (f"last snapshot {time.time() - last['at']:.0f}s ago ({last['bytes'] / 2**20:.1f} MB, "
                 f"{last['seconds']:.2f}s to write)" if last else "no snapshot yet")
        lines.append(f"emulator state: {emulator['directory']}: {saved}; "
                     f"{emulator.get('unsaved_changes', 0)} change(s) not yet saved")
    elif emulator:
        lines.append("emulator state: in memory only (AWS_ENDPOINT_URL names another endpoint, or LOCAL_PERSIST=0)")
    for region, entry in status.get("regions", {}).items():
        lines.append(f"workers {region}: {entry['state']}")
        for name, worker in entry.get("workers", {}).items():
            detail = f"handled {worker.get('handled', 0)}"
            if worker.get("state") != "ok":
                detail += f", {worker.get('failures')} failure(s) in a row ({worker.get('error')})"
            lines.append(f"  {name:<32} {worker.get('state', '?'):<9} {detail}")
    return "\n".join(lines)


def main() -> None:
    state_dir = Path(os.environ.get("LOCAL_STATE_DIR", ".local")).resolve()
    try:
        status = json.loads((state_dir / "status.json").read_text())
    except (OSError, ValueError):
        raise SystemExit(f"no status in {state_dir}: is `make run` running?") from None
    try:
        os.kill(int(status["pid"]), 0)
    except (OSError, KeyError, ValueError):
        raise SystemExit(f"the `make run` that wrote {state_dir / 'status.json'} is not running") from None
    print(render(status))


if __name__ == "__main__":
    main()
    sys.exit(0)
