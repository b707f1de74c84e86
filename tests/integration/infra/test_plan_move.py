"""`make plan-move` from the work tree, as an operator runs it: only ``LOCAL_STATE_DIR`` tells it where
`make run` wrote ``run.json``; no AWS variable is set, and it finds the emulator by itself."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, RunningPlatform

pytestmark = pytest.mark.integration


def make(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in ("REGION", "STAGE")}
    env["LOCAL_STATE_DIR"] = str(state_dir)
    # -o: the virtualenv counts as built (as after `make run`), so make does not reinstall it
    return subprocess.run(["make", "-s", "-o", ".venv/.installed", "plan-move", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_plan_move_reads_the_running_stack(platform: RunningPlatform) -> None:
    ws = platform.demo["workspace_id"]
    done = make(platform.state_dir, f"WS={ws}", "TO=eu-central", "ARGS=--json")
    assert done.returncode == 0, done.stdout + done.stderr
    plan = json.loads(done.stdout)
    assert plan["dry_run"] is True and plan["workspace"]["id"] == ws
    assert plan["to"] == {"residency": "eu-central", "region": "eu-central-1"}
    assert {t["table"]: t["items"] for t in plan["tables"]}["memberships"] >= 1  # the seeded demo content

    done = make(platform.state_dir, f"WS={ws}", "TO=us-east")  # its own residency: bad input, nothing read
    assert done.returncode != 0 and "us-east" in done.stderr


def test_plan_move_says_how_to_call_it(platform: RunningPlatform) -> None:
    done = make(platform.state_dir, f"WS={platform.demo['workspace_id']}")
    assert done.returncode != 0 and "make plan-move WS=" in done.stderr


def test_plan_move_without_a_running_platform_says_so(tmp_path: Path) -> None:
    done = make(tmp_path, "WS=ws_x", "TO=eu-central")
    assert done.returncode != 0 and "`make run` first" in done.stderr and "Traceback" not in done.stderr
