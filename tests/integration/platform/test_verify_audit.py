"""`make verify-audit` from the work tree against the running local platform, as an operator runs it:
only ``LOCAL_STATE_DIR`` tells it where `make run` wrote ``run.json``; no AWS variables are set."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.integration.conftest import ROOT, RunningPlatform

pytestmark = pytest.mark.integration


def _env(state_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in ("REGION", "STAGE")}
    env["LOCAL_STATE_DIR"] = str(state_dir)
    return env


def make(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # -o: the virtualenv counts as built (as after `make run`), so make does not reinstall it
    return subprocess.run(["make", "-s", "-o", ".venv/.installed", "verify-audit", *args], cwd=ROOT,
                          env=_env(state_dir), capture_output=True, text=True, timeout=300)


def test_verify_audit_checks_the_live_chain_and_an_export(platform: RunningPlatform) -> None:
    ws = platform.demo["workspace_id"]
    done = make(platform.state_dir, f"WS={ws}")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["count"] >= 1 and not report["problems"]

    token = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "infra.demo_token"], cwd=ROOT,
                           env=_env(platform.state_dir), capture_output=True, text=True, timeout=120,
                           check=True).stdout.strip()
    base = platform.urls["platform"]
    h = {"Authorization": f"Bearer {token}"}
    r = requests.post(f"{base}/audit/exports", headers=h, json={}, timeout=30)
    assert r.status_code == 202, r.text
    exp, location = r.json(), r.headers["Location"]
    deadline = time.monotonic() + 90  # the worker loop of the running platform writes the export
    while requests.get(base.removesuffix("/v1") + location, headers=h, timeout=10).status_code == 404:
        assert time.monotonic() < deadline, "the export was never written"
        time.sleep(1)
    done = make(platform.state_dir, f"EXPORT={exp['uri']}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["ok"] and json.loads(done.stdout)["count"] == exp["count"]


def test_verify_audit_says_how_to_call_it_and_fails_for_a_missing_export(platform: RunningPlatform) -> None:
    done = make(platform.state_dir)
    assert done.returncode == 2 and "make verify-audit WS=" in done.stderr
    done = make(platform.state_dir, f"EXPORT=s3://no-such-bucket/exports/{platform.demo['workspace_id']}/exp_missing/")
    assert done.returncode != 0 and json.loads(done.stdout)["ok"] is False


def test_verify_audit_without_a_running_platform_says_so(tmp_path: Path) -> None:
    done = make(tmp_path, "WS=ws_x")
    assert done.returncode != 0 and "make run" in done.stderr
