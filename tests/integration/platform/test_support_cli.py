"""`make support-staff` from the work tree against the running local platform (the same targeting as
`make verify-audit`: ``LOCAL_STATE_DIR``'s ``run.json``, no AWS variables)."""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.integration.conftest import ROOT, RunningPlatform
from tests.integration.platform.test_verify_audit import _env

pytestmark = pytest.mark.integration


def support_staff(platform: RunningPlatform, args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "-o", ".venv/.installed", "support-staff", f"ARGS={args}"], cwd=ROOT,
                          env=_env(platform.state_dir), capture_output=True, text=True, timeout=300)


def test_make_support_staff_adds_lists_removes_and_shows_the_history(platform: RunningPlatform) -> None:
    email = platform.demo["email"]
    done = support_staff(platform, f"add {email} --name 'Demo Support' --location EU --by ops@example.com")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["active"] is True
    assert email in [s["email"] for s in json.loads(support_staff(platform, "list").stdout)]
    assert support_staff(platform, f"remove {email} --by ops@example.com").returncode == 0
    assert email not in [s["email"] for s in json.loads(support_staff(platform, "list").stdout)]
    hist = support_staff(platform, "history")
    assert hist.returncode == 0, hist.stdout + hist.stderr
    actions = [e["action"] for e in json.loads(hist.stdout)["events"]]
    assert actions[-2:] == ["support.staff_added", "support.staff_removed"]
    bad = support_staff(platform, "add nobody@example.com --name N --by ops")
    assert bad.returncode != 0 and "no user" in json.loads(bad.stdout)["problem"]  # make exits 2 for any failure
