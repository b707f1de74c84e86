"""Schemathesis against one surface's OpenAPI document on a local platform of its own.

The run sends every operation of the document, DELETE of the demo workspace and removal of the demo
user included, so it gets its own stack (``own_platform``) instead of the session-wide one the other
integration tests share. It authenticates as the demo Admin with a sign-in access token
(``python -m infra.demo_token``, 15 minutes: longer than the bounded run). Checks: all; phases:
examples, coverage and fuzzing; deterministic.

The run is bounded by case counts, not by time: ``--max-examples`` cases per operation, generated
deterministically, in one pass. (Schemathesis 4 treats ``--max-time`` as a budget to spend: fuzzing and
coverage repeat until it runs out, so a time bound makes a loaded machine test fewer cases than an
idle one.) A loaded CI machine therefore runs the same cases, only slower; ``SAFETY_TIMEOUT_SECONDS``
ends a run that hangs, and the test fails then instead of passing on fewer cases.
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

MAX_EXAMPLES = 4  # generated cases per operation in the fuzzing phase (the coverage phase sends every case the
# schema defines: boundaries, each field missing or of another type, unexpected methods)
SAFETY_TIMEOUT_SECONDS = 900  # a safety net only: a run takes about 3 minutes on a loaded 2-core machine
MAX_TIME_SECONDS = SAFETY_TIMEOUT_SECONDS  # the name earlier callers knew


@pytest.fixture(scope="module")
def own_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPlatform]:
    with running_platform(tmp_path_factory.mktemp("conformance-platform")) as running:
        yield running


def demo_access_token(platform: RunningPlatform, *options: str) -> str:
    """A fresh access token of the demo Admin, signed by the stack's identity service (``options``: of
    ``infra.demo_token``, e.g. ``--mcp`` for the gateway's MCP resource)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env["LOCAL_STATE_DIR"] = str(platform.state_dir)
    done = subprocess.run([sys.executable, "-m", "infra.demo_token", *options], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.strip()


def run_schemathesis(document_url: str, config: Path, token: str | None, report_dir: Path,
                     *extra: str, max_examples: int = MAX_EXAMPLES) -> subprocess.CompletedProcess[str]:
    """One deterministic run with every check, ``max_examples`` cases per operation (``extra``: more CLI
    options, e.g. a path filter); its cache and report stay in ``report_dir``, out of the tree. A run that
    outlives ``SAFETY_TIMEOUT_SECONDS`` fails the calling test."""
    st = shutil.which("schemathesis", path=str(ROOT / ".venv" / "bin"))
    assert st, "schemathesis is pinned in requirements-dev.txt"
    auth = ["-H", f"Authorization: Bearer {token}"] if token else []
    command = [st, "--config-file", str(config), "run", document_url, *auth, *extra,
               "--checks", "all", "--phases", "examples,coverage,fuzzing", "--max-examples", str(max_examples),
               "--generation-deterministic", "--workers", "1", "--no-color",
               "--report", "junit", "--report-dir", str(report_dir)]
    try:
        return subprocess.run(command, cwd=report_dir, capture_output=True, text=True,
                              timeout=SAFETY_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
        pytest.fail(f"Schemathesis did not finish its {max_examples} cases per operation within "
                    f"{SAFETY_TIMEOUT_SECONDS} s (the safety net):\n{out[-4000:]}")
