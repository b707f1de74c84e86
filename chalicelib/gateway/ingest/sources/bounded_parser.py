"""Documents read in a child process under hard bounds, so one hostile file costs at most a few seconds of
one CPU and a bounded amount of memory, and is then skipped by name with its reason.

``BoundedParser`` (a context manager, one per sync batch) starts ``python -m`` this module once, with an
environment holding no credentials, and sends it one document at a time over its stdin; the answer (the
pages' text, or an ``Unreadable`` code and message) comes back as JSON on its stdout. The child:

- limits its own address space (``RLIMIT_AS`` = ``Bounds.memory_mb``), may write no file
  (``RLIMIT_FSIZE`` 0) and dumps no core;
- before each document sets its CPU limit (``RLIMIT_CPU``) to what it has used so far plus
  ``Bounds.cpu_seconds``: a parse that runs past it is killed by the kernel (``SIGXCPU``);
- answers ``MemoryError`` as an over-bound file and exits (its heap may be fragmented).

The parent waits at most ``wall_seconds`` for an answer (the child's CPU share may be small on a busy
machine, so this is generous) and kills the child on expiry. A dead or killed child is replaced for the next
document. Text files are decoded in the parent (nothing to bound but their size). The cheap checks
(``document_text.check``) run in the parent first, so a refused file never reaches the child.
"""
from __future__ import annotations

import json
import math
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import time
from typing import IO, Any

from chalicelib.core.config import settings
from chalicelib.gateway.ingest.sources import SourceError, document_text
from chalicelib.gateway.ingest.sources.document_text import Bounds, Page, Unreadable

_LENGTH = struct.Struct(">Q")
_MODULE = __name__
_EXIT_AFTER_MEMORY = 3


def wall_seconds(bounds: Bounds) -> float:
    """How long the parent waits for one document (CPU bound x 4 + 10 s: the child may get a small share)."""
    return bounds.cpu_seconds * 4 + 10


def _child_env() -> dict[str, str]:
    """What the child needs to import the parsers, and nothing else (no AWS credentials, no secrets)."""
    path = os.pathsep.join(dict.fromkeys(os.path.abspath(p or os.curdir) for p in sys.path
                                         if os.path.isdir(p or os.curdir)))
    return {"PATH": settings().child_path, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}


class BoundedParser:
    """Reads documents in a bounded child process (see the module docstring)."""

    def __init__(self, bounds: Bounds | None = None) -> None:
        self.bounds = bounds or Bounds.from_env()
        self._proc: subprocess.Popen[bytes] | None = None
        self.children_started = 0

    def __enter__(self) -> BoundedParser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout:
                proc.stdout.close()

    def extract(self, file_name: str, data: bytes, max_bytes: int = document_text.MAX_BYTES) -> list[Page]:
        """``document_text.extract`` within the bounds: the pages, or ``Unreadable`` (over a bound included)."""
        kind = document_text.check(file_name, data, max_bytes, self.bounds)
        if kind == "text":
            return document_text.extract(file_name, data, max_bytes, self.bounds)
        answer = self._ask(file_name, data, max_bytes)
        if answer.get("code") == "too_much_memory":
            self._kill()  # it exits after such an answer: the next document gets a new child
        if "code" in answer:
            raise Unreadable(str(answer["code"]), str(answer["message"]))
        return [Page(n, text) for n, text in answer["pages"]]

    def _child(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self.close()
        b = self.bounds
        limits = json.dumps({"cpu_seconds": b.cpu_seconds, "memory_mb": b.memory_mb, "max_pages": b.max_pages,
                             "max_content_bytes": b.max_content_bytes, "max_text_chars": b.max_text_chars})
        try:
            self._proc = subprocess.Popen(  # noqa: S603 - this interpreter, this module, fixed arguments
                [sys.executable, "-s", "-m", _MODULE, limits], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=_child_env(), cwd="/", close_fds=True)
        except OSError as err:  # no process could be started: the sync is retried
            raise SourceError(f"the document reader could not start ({type(err).__name__})") from None
        self.children_started += 1
        return self._proc

    def _ask(self, file_name: str, data: bytes, max_bytes: int) -> dict[str, Any]:
        proc = self._child()
        assert proc.stdin is not None and proc.stdout is not None
        header = json.dumps({"name": file_name, "size": len(data), "max_bytes": max_bytes}).encode() + b"\n"
        deadline = time.monotonic() + wall_seconds(self.bounds)
        try:
            proc.stdin.write(header)
            proc.stdin.write(data)
            proc.stdin.flush()
            raw = _read_answer(proc.stdout, deadline)
        except (OSError, EOFError, TimeoutError) as err:
            self._kill()
            raise self._over_bound(file_name, proc.returncode, timed_out=isinstance(err, TimeoutError)) from None
        return dict(json.loads(raw))

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    def _over_bound(self, file_name: str, returncode: int | None, *, timed_out: bool) -> Exception:
        """Why the child gave no answer: the file's fault (killed at a bound, or crashed by a signal) is an
        ``Unreadable``; a child that exited by itself (it could not start) is a ``SourceError`` the sync retries."""
        if timed_out or returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            return Unreadable("too_slow", f"{file_name} needed more than {self.bounds.cpu_seconds} s of processing "
                                          "to read (a document built to be slow to read?): it was skipped. Print "
                                          "it to a new PDF (or save it again) and upload that.")
        if returncode is not None and returncode < 0:
            return Unreadable("damaged", f"{file_name} stopped the document reader (it may be damaged): open and "
                                         "save it again, then upload it.")
        return SourceError(f"the document reader stopped (exit status {returncode}) before reading {file_name}")


def _read_exactly(stream: IO[bytes], n: int, deadline: float) -> bytes:
    fd = stream.fileno()
    out = bytearray()
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise TimeoutError
        chunk = os.read(fd, min(n - len(out), 1 << 20))
        if not chunk:
            raise EOFError
        out += chunk
    return bytes(out)


def _read_answer(stream: IO[bytes], deadline: float) -> bytes:
    (size,) = _LENGTH.unpack(_read_exactly(stream, _LENGTH.size, deadline))
    return _read_exactly(stream, size, deadline)


# ----- the child -----------------------------------------------------------------------------------------


def _limit_self(bounds: Bounds) -> None:
    memory = bounds.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _cpu_budget(seconds: int) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _answer(out: IO[bytes], body: dict[str, Any]) -> None:
    data = json.dumps(body).encode("ascii")
    out.write(_LENGTH.pack(len(data)) + data)
    out.flush()


def serve(bounds: Bounds, inp: IO[bytes], out: IO[bytes]) -> None:
    """The child's loop: one document per header line + bytes, one answer each, until stdin closes."""
    import docx  # noqa: F401, PLC0415 - loaded before the memory limit applies, once per child
    import html2text  # noqa: F401, PLC0415
    import pypdf  # noqa: F401, PLC0415

    _limit_self(bounds)
    while True:
        line = inp.readline(4096)
        if not line:
            return
        header = json.loads(line)
        data = inp.read(int(header["size"]))
        name = str(header["name"])
        _cpu_budget(bounds.cpu_seconds)
        try:
            _answer(out, _read_one(name, data, int(header["max_bytes"]), bounds))
        except MemoryError:  # while parsing or while writing the answer; the heap may be fragmented
            del data
            _answer(out, {"code": "too_much_memory", "message": f"{name} needed more than {bounds.memory_mb} MiB "
                                                                "of memory to read: split it into smaller files."})
            sys.exit(_EXIT_AFTER_MEMORY)  # the next file gets a new child


def _read_one(name: str, data: bytes, max_bytes: int, bounds: Bounds) -> dict[str, Any]:
    """The answer for one document: its pages, or why it cannot be read (never an exception but MemoryError)."""
    try:
        pages = document_text.extract(name, data, max_bytes, bounds)
        return {"pages": [[p.number, p.text] for p in pages]}
    except Unreadable as err:
        return {"code": err.code, "message": err.message}
    except MemoryError:
        raise
    except RecursionError:
        return {"code": "too_complex", "message": f"{name} is nested too deeply to read: it was not read."}
    except Exception:  # noqa: BLE001 - a parser's failure on a file is that file's, every time
        return {"code": "damaged", "message": f"{name} could not be read (it may be damaged): open and save it "
                                              "again, then upload it."}

if __name__ == "__main__":
    serve(Bounds(**json.loads(sys.argv[1])), sys.stdin.buffer, sys.stdout.buffer)
