"""The AWS CLI kept running for a test: an ``awslocal`` shim that does not start a new CLI per command.

The LocalStack init script makes about 170 ``awslocal`` calls; started afresh, each pays the CLI's
imports and service-model loading (0.6 to 1 s of CPU). Here the shim sends its arguments over a Unix
socket to this process, which runs them through the same ``awscli`` driver (``create_clidriver().main``,
a new driver per command, one botocore model loader for all) and sends back the exit code and output.
The commands, their parsing and their requests are the CLI's own; only the process is reused.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import socketserver
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any
from unittest import mock

CLIENT = """import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect({path!r})
s.sendall(json.dumps(sys.argv[1:]).encode() + b"\\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
answer = json.loads(data)
sys.stdout.write(answer["stdout"])
sys.stderr.write(answer["stderr"])
sys.exit(answer["rc"])
"""


class AwsCliServer:
    """Serves ``aws`` commands in this process (one at a time) for the shim ``shim_dir / "awslocal"``."""

    def __init__(self, endpoint: str, shim_dir: Path, env: dict[str, str]) -> None:
        self.endpoint, self.env = endpoint, env
        self.socket_path = os.path.join(tempfile.mkdtemp(prefix="awscli"), "s")  # short: sun_path is ~100 bytes
        self._lock = threading.Lock()
        self._loader: Any = None
        shim_dir.mkdir(parents=True, exist_ok=True)
        client = shim_dir / "aws_cli_client.py"
        client.write_text(CLIENT.format(path=self.socket_path))
        shim = shim_dir / "awslocal"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S -E "{client}" --endpoint-url "{endpoint}" "$@"\n')
        shim.chmod(0o755)
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                argv = json.loads(self.rfile.readline())
                self.wfile.write(json.dumps(outer.run(argv)).encode())

        self.server = socketserver.ThreadingUnixStreamServer(self.socket_path, Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def run(self, argv: list[str]) -> dict[str, Any]:
        """One CLI command: its exit code, standard output and standard error."""
        from awscli.clidriver import create_clidriver

        out, err = io.StringIO(), io.StringIO()
        with self._lock, mock.patch.dict(os.environ, self.env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            driver = create_clidriver()
            if self._loader is None:
                self._loader = driver.session.get_component("data_loader")
            driver.session.register_component("data_loader", self._loader)
            try:
                rc = driver.main(argv)
            except SystemExit as exit_:
                rc = exit_.code if isinstance(exit_.code, int) else 1
        return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)
            os.rmdir(os.path.dirname(self.socket_path))
