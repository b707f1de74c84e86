"""Every shell block of docs/ (```bash and ```sh), pasted in order into one bash shell per document against
a running `make run` stack (the session's, on free ports: the default ports and `.local/` are rewritten
as tests/integration/test_readme.py does for the README). A block fails the document when a command
fails or a curl answers an HTTP error it does not say it expects (a `# 4xx` comment on the next line).

Documents whose blocks are still reference material (placeholders such as `ws_01J...`, a deployment's
AWS profile, a second stack) are listed in ``NOT_PASTEABLE`` with the reason; they are expected to fail
(strict: once one passes, the list must lose it)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import ROOT
from tests.integration.test_readme import on_stack

pytestmark = pytest.mark.integration
DOCS = sorted(p for p in (ROOT / "docs").rglob("*.md") if re.search(r"^```(bash|sh)$", p.read_text(), re.M))
NOT_PASTEABLE = {
    "operations.md": "LocalStack (docker compose), a deployment's AWS profiles and audit ids written as ws_...",
    "residency.md": "the planner's examples name a workspace as ws_01H...",
    "api/identity.md": "sign-in examples with placeholder passwords, codes and client ids",
    "api/platform.md": "reference examples with placeholder ids (ws_01J..., usr_01J..., inv_01J...)",
    "api/models.md": "starts a second `make run` with a GGUF model file (LOCAL_MODEL=/path/model.gguf)",
    "api/mcp.md": "an MCP token comes from an MCP client's browser sign-in (authorization code + PKCE)",
    "api/openai.md": "the Open WebUI and LibreChat blocks start containers (Docker)",
}
# curl fails on an HTTP error status unless the line after it says which error it shows (# 4xx / # 5xx)
PRELUDE = "set -euo pipefail\ncurl() { command curl --fail-with-body \"$@\"; }\n"
EXPECTS_ERROR = re.compile(r"^\s*#\s*(?:->\s*)?[45]\d\d\b")


def blocks(path: Path) -> list[str]:
    return re.findall(r"^```(?:bash|sh)\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def allow_shown_errors(block: str) -> str:
    """A curl whose next line documents an error answer runs with plain curl (its error is the point)."""
    out: list[str] = []
    command_start = None
    for line in block.split("\n"):
        if EXPECTS_ERROR.match(line) and command_start is not None:
            out[command_start] = re.sub(r"^(\s*)curl ", r"\1command curl ", out[command_start], count=1)
        continues = bool(out) and out[-1].endswith("\\")
        if not continues and line.strip() and not line.lstrip().startswith("#"):
            command_start = len(out)
        out.append(line)
    return "\n".join(out)


def test_docs_have_shell_blocks() -> None:
    assert DOCS, "no document with a shell block"
    for name in NOT_PASTEABLE:
        assert (ROOT / "docs" / name).exists(), name


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_doc_blocks_work_as_pasted(doc: Path, platform: Any, request: pytest.FixtureRequest) -> None:
    name = str(doc.relative_to(ROOT / "docs"))
    if name in NOT_PASTEABLE:
        request.applymarker(pytest.mark.xfail(reason=NOT_PASTEABLE[name], strict=True))
    script = PRELUDE + "\n".join(f"echo '--- {name} block {i}'\n{allow_shown_errors(on_stack(b, platform))}"
                                 for i, b in enumerate(blocks(doc)))
    env = {**os.environ, "LOCAL_STATE_DIR": str(platform.state_dir), "RESOURCE_PREFIX": "aiplat"}
    env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{name}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
