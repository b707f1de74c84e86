"""The README's first calls, taken from README.md itself, pasted in order into one bash shell against a
fresh `make run` stack (its own emulator and state directory, on free ports)."""
from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.integration.conftest import ROOT, RunningPlatform, running_platform

DEFAULT_PORTS = {("platform",): 8000, ("gateway",): 8001, ("identity",): 8002, ("app",): 8003,
                 ("eu-central-1", "platform"): 8010, ("eu-central-1", "gateway"): 8011}
# every curl fails on an HTTP error status, so a call that answers 4xx/5xx fails the shell
PRELUDE = "set -euo pipefail\ncurl() { command curl --fail-with-body \"$@\"; }\n"


def first_call_blocks(readme: str) -> list[str]:
    """The ```bash blocks of the README's "First calls" section, in order."""
    section = readme.split("\n## First calls\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


def on_stack(block: str, running: RunningPlatform) -> str:
    """The block with the default ports and state directory replaced by this stack's."""
    for where, default in DEFAULT_PORTS.items():
        urls = running.regions[where[0]] if len(where) == 2 else running.urls
        port = urlsplit(urls[where[-1]]).port
        block = block.replace(f"localhost:{default}", f"localhost:{port}")
    return block.replace(".local/", f"{running.state_dir}/")


@pytest.fixture(scope="module")
def fresh_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPlatform]:
    with running_platform(tmp_path_factory.mktemp("readme-platform")) as running:
        yield running


def test_readme_has_first_calls() -> None:
    blocks = first_call_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 3
    assert "make -s token" in blocks[0]


def test_readme_first_calls_succeed_in_order(fresh_platform: RunningPlatform) -> None:
    blocks = first_call_blocks((ROOT / "README.md").read_text())
    script = PRELUDE + "\n".join(f"echo '--- block {i}'\n{on_stack(b, fresh_platform)}" for i, b in enumerate(blocks))
    env = {**os.environ, "LOCAL_STATE_DIR": str(fresh_platform.state_dir), "RESOURCE_PREFIX": "aiplat"}
    env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    out = done.stdout
    assert f'"workspace_id":"{fresh_platform.demo["workspace_id"]}"' in out.replace(" ", "")
    assert '"residency":"eu-central"' in out.replace(" ", "")
    assert '"invitation.created"' in out
    assert '"model":"builtin/extractive"' in out.replace(" ", "")  # the grounded chat answered
    assert '"status":"completed"' in out.replace(" ", "")  # the demo agent's run went through queue and worker

