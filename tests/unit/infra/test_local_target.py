"""Where operator commands point (infra/local_target.py): a running `make run`'s emulator, what
``AWS_ENDPOINT_URL`` / ``AWS_PROFILE`` name, or a clear stop when nothing is running."""
from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra import local_target

POINTED = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "RESOURCE_PREFIX",
           "AUTH_URL", "BASE_URL", "GATEWAY_URL", "APP_URL")


@pytest.fixture(autouse=True)
def _no_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in [n for n in os.environ if n.startswith(("AWS_ENDPOINT_URL", "AWS_PROFILE"))]:
        monkeypatch.delenv(name)
    for name in POINTED:  # what configure() sets comes back as it was after the test
        monkeypatch.setenv(name, "x")
        monkeypatch.delenv(name)
    monkeypatch.setenv("LOCAL_STATE_DIR", str(tmp_path))
    yield
    from chalicelib.core.config import settings

    monkeypatch.undo()
    settings.cache_clear()


def _run_json(state: Path, endpoint: str) -> None:
    urls = {"aws_endpoint": endpoint, "platform": "http://localhost:1/v1", "gateway": "http://localhost:2",
            "identity": "http://localhost:3", "app": "http://localhost:4"}
    (state / "run.json").write_text(json.dumps({"urls": urls, "demo": {}}))


def test_without_run_json_it_says_to_start_make_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="start the platform with `make run` first"):
        local_target.configure()


def test_a_run_json_left_by_a_killed_make_run_is_refused_by_name(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _run_json(tmp_path, f"http://127.0.0.1:{port}")
    with pytest.raises(SystemExit, match=f"127.0.0.1:{port} .* does not answer: start the platform with `make run`"):
        local_target.configure()
    assert "AWS_ENDPOINT_URL" not in os.environ


def test_a_running_emulator_is_pointed_at(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"
        _run_json(tmp_path, endpoint)
        local_target.configure()
    assert os.environ["AWS_ENDPOINT_URL"] == endpoint


def test_an_explicit_endpoint_wins_over_run_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    local_target.configure()  # no run.json, no error: LocalStack or a deployment as they are
    assert os.environ["AWS_ENDPOINT_URL"] == "http://127.0.0.1:4566"
