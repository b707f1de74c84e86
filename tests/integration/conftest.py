"""Integration fixtures: the real local platform (`python -m infra.local_run`, the same code `make run`
starts) in a subprocess, on free loopback ports with its own emulator and state directory."""
from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest

ROOT = Path(__file__).resolve().parents[2]
logging.getLogger("werkzeug").setLevel(logging.ERROR)
START_TIMEOUT = 180  # both regions are seeded (two demo workspaces, four syncs)


# Parallel test workers (pytest-xdist) each pick ports from a range of their own, below the kernel's
# ephemeral range: two workers never hand out the same free port before its server has bound it. A run
# without workers takes one of twelve ranges below those by its process id, so that test runs started
# side by side (a developer's, an editor's) rarely pick the same port either.
_XDIST = os.environ.get("PYTEST_XDIST_WORKER")
_BASE = 20000 + 1000 * (int(_XDIST.removeprefix("gw") or 0) % 12) if _XDIST else 8000 + 1000 * (os.getpid() % 12)
_PORTS = itertools.cycle(range(_BASE, _BASE + 1000))


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback port nothing listens on, from this worker's own range."""
    for _ in range(1000):
        port = next(_PORTS)
        if _free(port):
            return port
    raise RuntimeError("no free loopback port in this worker's range")


def free_port_pair() -> int:
    """The first of two consecutive free loopback ports, both taken from this worker's range (the local model
    servers: ``LOCAL_MODEL_PORT`` for the first region, the next port for the second; their default, 8020,
    lies inside the ranges of runs without workers)."""
    for _ in range(1000):
        port, following = free_port(), next(_PORTS)
        if following == port + 1 and _free(following):  # not where the range wrapped round
            return port
    raise RuntimeError("no two free consecutive loopback ports in this worker's range")


@dataclass
class RunningPlatform:
    urls: dict[str, str]
    demo: dict[str, Any]
    outbox: Path
    state_dir: Path
    process: subprocess.Popen[bytes]
    regions: dict[str, dict[str, str]] = field(default_factory=dict)  # region -> {"platform", "gateway"}

    def aws(self, service: str, region: str = "us-east-1") -> Any:
        """A client of the platform's emulator (explicit endpoint: the test process env is untouched)."""
        return boto3.client(service, region_name=region, endpoint_url=self.urls["aws_endpoint"],
                            aws_access_key_id="local", aws_secret_access_key="local")

    def source_aws(self, service: str, account: str = "111122223333", region: str = "us-east-1") -> Any:
        """A client acting in a workspace's own AWS account, where its connector sources live; the role
        ``arn:aws:iam::<account>:role/gateway-reader`` names it in a connector config."""
        creds = self.aws("sts", region).assume_role(RoleArn=f"arn:aws:iam::{account}:role/owner",
                                                    RoleSessionName="source-owner")["Credentials"]
        return boto3.client(service, region_name=region, endpoint_url=self.urls["aws_endpoint"],
                            aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                            aws_session_token=creds["SessionToken"])

    def outbox_messages(self, to: str | None = None) -> list[dict[str, Any]]:
        if not self.outbox.exists():
            return []
        messages = [json.loads(p.read_text()) for p in sorted(self.outbox.glob("*.json"))]
        return [m for m in messages if to is None or m["to"] == to]


def start_platform(state_dir: Path, extra_env: dict[str, str] | None = None) -> RunningPlatform:
    ports = {g: free_port() for g in ("platform", "gateway", "identity", "app", "platform-eu-central-1",
                                      "gateway-eu-central-1")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update({
        "LOCAL_STATE_DIR": str(state_dir),
        "LOCAL_PORTS": ",".join(f"{g}={p}" for g, p in ports.items()),
        "EMULATOR_PORT": str(free_port()),
        "RESOURCE_PREFIX": "aiplat",
        "PYTHONUNBUFFERED": "1",
        # fuzzers and many tests share a few tokens per stack: raise the request quotas (core/http/rate_limits.py,
        # tested in process) rather than switch them off
        "API_RATE_LIMIT_FACTOR": "100",
        # the emulator's state in memory only: a test stack is never restarted on its state (the tests of
        # persistence, tests/integration/infra/test_local_state.py, turn it on), and a snapshot each
        # second of a growing state cost a stack more CPU than its requests
        "LOCAL_PERSIST": "0",
        **(extra_env or {}),
    })
    state_dir.mkdir(parents=True, exist_ok=True)
    log = open(state_dir / "platform.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "infra.local_run"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    run_json = state_dir / "run.json"
    deadline = time.monotonic() + START_TIMEOUT
    while not run_json.exists() or not run_json.read_text().strip().endswith("}"):  # written, not being written
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("local platform did not start:\n" + (state_dir / "platform.log").read_text()[-4000:])
        time.sleep(0.2)
    info = json.loads(run_json.read_text())
    return RunningPlatform(info["urls"], info["demo"], Path(info["outbox"]), state_dir, proc, info.get("regions", {}))


def stop_platform(running: RunningPlatform) -> None:
    running.process.send_signal(signal.SIGTERM)
    try:
        running.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        running.process.kill()
        running.process.wait()


@contextmanager
def running_platform(state_dir: Path) -> Iterator[RunningPlatform]:
    """A fresh local platform in ``state_dir`` for the duration of the block."""
    running = start_platform(state_dir)
    try:
        yield running
    finally:
        stop_platform(running)


def _forget_a_leaked_running_loop() -> None:
    """An asyncio client test earlier on this worker can leave its loop marked as running in this thread;
    Playwright's sync API then refuses to start. No loop runs while a sync fixture runs: clear the mark."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    asyncio.events._set_running_loop(None)


CHROMIUM = "/usr/bin/chromium"  # Debian's package (infra/scripts/system_deps.sh): nothing downloads a browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium for the module's tests (Playwright driving Debian's package). One per module and
    never two at once in a worker: a session-wide browser kept alive across modules lost its Playwright
    connection when another module started one of its own."""
    from playwright.sync_api import sync_playwright

    _forget_a_leaked_running_loop()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPlatform]:
    with running_platform(tmp_path_factory.mktemp("local-platform")) as running:
        yield running
