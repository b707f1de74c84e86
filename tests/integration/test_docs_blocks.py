"""Every shell block of docs/ (```bash and ```sh, also indented in a list), pasted in order into one bash
shell per document against a running `make run` stack, the module's own (the blocks add users, workspaces
and support staff and restore a backup: not on the stack other test files share), on free ports: the
default ports and `.local/` are rewritten as tests/integration/test_readme.py does for the README. A
```python block runs in that shell with the virtualenv's Python (it sees what earlier blocks exported).
A block fails the document when a command fails or a curl answers an HTTP error it does not say it
expects (a `# 4xx` comment on the next line). No block may leave files in the work tree.

A block that cannot run against `make run` (it needs Docker, a deployment's AWS account, a person in a
browser, a second stack) is preceded by ``<!-- not-pasteable: <reason> -->`` on the line before its
fence; it is left out, and the rest of its page still runs."""
from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, RunningPlatform, running_platform
from tests.integration.test_readme import on_stack

pytestmark = pytest.mark.integration
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>bash|sh|python)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*not-pasteable:(?P<reason>.*?)-->")
DOCS = sorted(p for p in (ROOT / "docs").rglob("*.md") if FENCE.search(p.read_text()))
# curl fails on an HTTP error status unless the line after it says which error it shows (# 4xx / # 5xx)
PRELUDE = "set -euo pipefail\ncurl() { command curl --fail-with-body \"$@\"; }\n"
EXPECTS_ERROR = re.compile(r"^\s*#\s*(?:->\s*)?[45]\d\d\b")


def code_blocks(text: str) -> list[tuple[str, str | None]]:
    """Each block as a shell script (a Python block as a here-document for the virtualenv's Python), with
    the reason of its ``not-pasteable`` marker, or None."""
    out = []
    for m in FENCE.finditer(text):
        line_before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(line_before)
        indent = len(m["indent"])
        body = "".join(line[indent:] if line[:indent].strip() == "" else line
                       for line in m["body"].splitlines(keepends=True))
        if m["lang"] == "python":
            body = f".venv/bin/python - <<'PYTHON_BLOCK'\n{body}PYTHON_BLOCK\n"
        out.append((body, marker["reason"].strip() if marker else None))
    return out


def blocks(path: Path) -> list[str]:
    """The blocks of ``path`` that are meant to run when pasted."""
    return [body for body, reason in code_blocks(path.read_text()) if reason is None]


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


@pytest.fixture(scope="module")
def docs_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPlatform]:
    with running_platform(tmp_path_factory.mktemp("docs-platform")) as running:
        yield running


def test_docs_have_shell_blocks() -> None:
    assert DOCS, "no document with a shell block"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_every_excluded_block_says_why(doc: Path) -> None:
    text = doc.read_text()
    marked = [reason for _, reason in code_blocks(text) if reason is not None]
    assert len(marked) == len(MARKER.findall(text)), "a not-pasteable marker not directly before a code block"
    assert all(len(reason) >= 10 for reason in marked), marked
    assert blocks(doc), "every block of the page is excluded"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_doc_blocks_work_as_pasted(doc: Path, docs_platform: RunningPlatform) -> None:
    platform = docs_platform
    name = str(doc.relative_to(ROOT / "docs"))
    script = PRELUDE + "\n".join(f"echo '--- {name} block {i}'\n{allow_shown_errors(on_stack(b, platform))}"
                                 for i, b in enumerate(blocks(doc)))
    env = {**os.environ, "LOCAL_STATE_DIR": str(platform.state_dir), "RESOURCE_PREFIX": "aiplat"}
    env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
    before = _work_tree_status()
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{name}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert _work_tree_status() == before, "the blocks left files in the work tree"


def _work_tree_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                          text=True).stdout
