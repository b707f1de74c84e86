"""The embedded emulator of `make run`: moto's threaded server, with its state kept in a directory.

``PersistentEmulator`` takes the state directory's lock, installs the newest snapshot (``snapshot.py``),
serves moto on ``host:port`` and counts the requests that may change state (``_ChangeCounter``: not
``GET``/``HEAD``, not a read action such as ``GetItem``, ``Query``, ``Decrypt`` or ``Sign``, and a
``ReceiveMessage`` only when it returned a message). Every ``interval`` seconds with changes since the
last snapshot it forks a writer; ``stop()`` stops serving, forks a last writer when anything changed,
and waits for it at most ``stop_budget`` seconds: a larger state finishes writing in the background,
holding the directory's lock, and the next start waits for it. So stopping takes the same time whatever
the state's size, and a ``kill -9`` loses at most ``interval`` plus one snapshot's time of changes.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from infra.emulator import snapshot, write_lock

INTERVAL = 1.0  # seconds between snapshots while the state changes
STOP_BUDGET = 3.0  # seconds stop() takes at most; a last snapshot not written by then finishes alone
LOCK_WAIT = 60.0  # seconds start() waits for a previous run's last snapshot
# read-only actions of the JSON protocols (X-Amz-Target): DynamoDB, Streams, KMS, SQS
READ_PREFIXES = ("Get", "Describe", "List", "Query", "Scan", "BatchGet")
READ_ACTIONS = {"Decrypt", "Encrypt", "Sign", "Verify", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext",
                "GenerateMac", "VerifyMac", "ReEncrypt", "GenerateRandom"}
# objects stay in memory (no temporary file shared with a forked writer) up to this size
S3_BUFFER = str(2**31)


class _ChangeCounter:
    """WSGI middleware: counts the requests that may have changed the emulator's state (after they ran)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.changes = 0
        self._lock = threading.Lock()

    def mark(self) -> None:
        with self._lock:
            self.changes += 1

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return self.app(environ, start_response)
        action = str(environ.get("HTTP_X_AMZ_TARGET", "")).rpartition(".")[2]
        if action in READ_ACTIONS or action.startswith(READ_PREFIXES):
            return self.app(environ, start_response)
        if action == "ReceiveMessage":  # a poll that found nothing changed nothing
            body = b"".join(self.app(environ, start_response))
            if b"ReceiptHandle" in body:
                self.mark()
            return [body]
        try:
            return self.app(environ, start_response)
        finally:
            self.mark()


def _remembering(dispatcher: type) -> type:
    """moto's request dispatcher, remembering which backend serves each host: moto lists its package's
    directories and tries its few hundred URL patterns on every request, under a lock all requests share:
    with the lock's waits, a quarter of the emulator's busy time in a fuzzing run. The answer depends on
    the host only."""

    class Remembering(dispatcher):  # type: ignore[misc, valid-type]
        @functools.lru_cache(maxsize=1024)  # noqa: B019 - one dispatcher per emulator, kept for its life
        def get_backend_for_host(self, host: str | None) -> Any:
            return super().get_backend_for_host(host)

    return Remembering


class PersistentEmulator:
    """moto's server with its state in ``state_dir`` (None: in memory only, as before)."""

    def __init__(self, host: str, port: int, state_dir: Path | None, *, interval: float = INTERVAL,
                 stop_budget: float = STOP_BUDGET) -> None:
        self.host, self.port, self.state_dir = host, port, state_dir
        self.interval, self.stop_budget = interval, stop_budget
        self.restored = {"generation": 0, "backends": 0, "seconds": 0.0}
        self.last: dict[str, Any] = {}  # the last completed snapshot: generation, seconds, bytes, at
        self.failed = 0
        self.last_pause = 0.0  # seconds the last fork held the emulator's writes
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._counter: _ChangeCounter | None = None
        self._lock_cm: Any = None
        self._lock_fd: int | None = None
        self._stop = threading.Event()
        self._mutex = threading.Lock()  # one writer at a time; guards the fields below
        self._generation = 0
        self._saved_changes = 0
        self._writer: tuple[int, int, int, float] | None = None  # pid, changes, generation, started
        self.log = logging.getLogger("local.emulator")

    @property
    def directory(self) -> Path | None:
        return self.state_dir / "emulator" if self.state_dir else None

    def start(self) -> None:
        from moto.moto_server.threaded_moto_server import MotoRequestHandler
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        if self.directory is not None:
            os.environ["MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"] = S3_BUFFER
            self._lock_cm = snapshot.locked(self.directory, LOCK_WAIT)
            self._lock_fd = self._lock_cm.__enter__()
            started = time.monotonic()
            generation, backends = snapshot.load_newest(self.directory)
            self._generation = generation
            self.restored = {"generation": generation, "backends": backends,
                             "seconds": round(time.monotonic() - started, 3)}
            snapshot.dispatch_table()  # built before any fork
        self._counter = _ChangeCounter(_remembering(DomainDispatcherApplication)(create_backend_app))
        self._server = make_server(self.host, self.port, self._counter, True, request_handler=MotoRequestHandler)
        threading.Thread(target=self._server.serve_forever, name="emulator", daemon=True).start()
        if self.directory is not None:
            self._thread = threading.Thread(target=self._snapshot_loop, name="emulator-snapshots", daemon=True)
            self._thread.start()

    # --- snapshots -------------------------------------------------------------------------------------

    def _snapshot_loop(self) -> None:
        while not self._stop.wait(self.interval):
            with self._mutex:
                self._reap()
                if self._writer is None and self._dirty():
                    self._fork()

    def _dirty(self) -> bool:
        return self._counter is not None and self._counter.changes != self._saved_changes

    def _fork(self) -> None:
        assert self._counter is not None and self.directory is not None
        self._generation += 1
        changes, generation, directory = self._counter.changes, self._generation, self.directory
        began = time.perf_counter()
        with write_lock():  # no DynamoDB write or transaction half-applied in the child's copy
            pid = os.fork()
        if pid:
            self.last_pause = time.perf_counter() - began
        if pid == 0:  # the writer: no other thread runs here; leave only through os._exit
            code = 1
            try:
                snapshot.close_sockets()
                began = time.monotonic()
                data = snapshot.dumps(snapshot.capture())
                snapshot.write(directory, generation, data)
                snapshot.record(directory, {"generation": generation, "bytes": len(data), "at": time.time(),
                                            "seconds": round(time.monotonic() - began, 3)})
                code = 0
            except BaseException as err:  # noqa: BLE001 - report and leave
                with contextlib.suppress(Exception):
                    sys.stderr.write(f"emulator snapshot {generation} failed: {type(err).__name__}: {err}\n")
            finally:
                os._exit(code)
        self._writer = (pid, changes, generation, time.monotonic())

    def _reap(self, wait: float = 0.0) -> bool:
        """Collect the writer once it has finished, waiting up to ``wait`` seconds; True when none is
        left running."""
        if self._writer is None:
            return True
        pid, changes, generation, _started = self._writer
        deadline = time.monotonic() + wait
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        if not done:
            return False
        self._writer = None
        if os.waitstatus_to_exitcode(status) == 0:
            self._saved_changes = max(self._saved_changes, changes)
            if self.directory is not None:
                self.last = snapshot.recorded(self.directory) or self.last
        else:
            self.failed += 1
            self.log.error("emulator snapshot failed", extra={"generation": generation})
        return True

    def save(self, timeout: float = 120.0) -> bool:
        """Write a snapshot now (when anything changed) and wait for it; True when it is on disk."""
        if self.directory is None:
            return False
        with self._mutex:
            if not self._reap(timeout):
                return False
            if self._dirty():
                self._fork()
            return self._reap(timeout)

    def status(self) -> dict[str, Any]:
        with self._mutex:
            return {"persistent": self.directory is not None, "directory": str(self.directory or ""),
                    "restored": self.restored, "last_snapshot": self.last, "writing": self._writer is not None, "failed_snapshots": self.failed,
                    "unsaved_changes": (self._counter.changes - self._saved_changes) if self._counter else 0}

    def stop(self) -> dict[str, Any]:
        """Stop serving; write the last snapshot, waiting for it at most ``stop_budget`` seconds."""
        deadline = time.monotonic() + self.stop_budget  # the whole stop, shutting the server down included
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        out: dict[str, Any] = {"saved": False, "background_pid": None}
        if self.directory is not None:
            if self._thread is not None:
                self._thread.join(timeout=max(0.1, deadline - time.monotonic()))
            with self._mutex:
                if self._reap(deadline - time.monotonic()) and self._dirty():
                    self._fork()
                out["saved"] = self._reap(deadline - time.monotonic())
                out["background_pid"] = None if out["saved"] else self._writer[0] if self._writer else None
            if self._lock_cm is not None:  # a writer still running keeps the lock (it inherited the fd)
                self._lock_cm.__exit__(None, None, None)
                self._lock_cm = None
        return out
