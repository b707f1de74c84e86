"""Schemathesis against one surface's OpenAPI document on a local platform of its own.

The run sends every operation of the document, DELETE of the demo workspace and removal of the demo
user included, so it gets its own stack (``own_platform``) instead of the session-wide one the other
integration tests share. It authenticates as the demo Admin with a sign-in access token
(``python -m infra.demo_token``, 15 minutes: longer than the bounded run). Checks: all; phases:
examples, coverage and fuzzing; deterministic; bounded by ``--max-time``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, RunningPlatform, running_platform

MAX_TIME_SECONDS = 150


@pytest.fixture(scope="module")
def own_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPlatform]:
    with running_platform(tmp_path_factory.mktemp("conformance-platform")) as running:
        yield running


def demo_access_token(platform: RunningPlatform) -> str:
    """A fresh access token of the demo Admin, signed by the stack's identity service."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env["LOCAL_STATE_DIR"] = str(platform.state_dir)
    done = subprocess.run([sys.executable, "-m", "infra.demo_token"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.strip()


def run_schemathesis(document_url: str, config: Path, token: str | None, report_dir: Path,
                     *extra: str) -> subprocess.CompletedProcess[str]:
    """One bounded, deterministic run with every check (``extra``: more CLI options, e.g. a path filter);
    its cache and report stay in ``report_dir``, out of the tree."""
    st = shutil.which("schemathesis", path=str(ROOT / ".venv" / "bin"))
    assert st, "schemathesis is pinned in requirements-dev.txt"
    auth = ["-H", f"Authorization: Bearer {token}"] if token else []
    return subprocess.run(
        [st, "--config-file", str(config), "run", document_url, *auth, *extra,
         "--checks", "all", "--phases", "examples,coverage,fuzzing", "--max-examples", "10",
         "--generation-deterministic", "--max-time", str(MAX_TIME_SECONDS), "--no-color",
         "--report", "junit", "--report-dir", str(report_dir)],
        cwd=report_dir, capture_output=True, text=True, timeout=MAX_TIME_SECONDS + 150)
