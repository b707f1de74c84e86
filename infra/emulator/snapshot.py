"""The embedded emulator's state on disk: every moto backend in use (DynamoDB tables and their items,
S3 buckets with every object version and its Object Lock settings, KMS keys with their key material,
SQS queues with their messages, SES identities, ...) written as one snapshot file and read back at start.

Why snapshots and not a journal of requests: replaying requests runs them again, and a replayed
``CreateKey`` makes new key material (every ciphertext and signed token of the old key becomes
unreadable), a replayed ``SendMessage`` a new message id, a replayed ``PutObject`` a new version id.
A snapshot keeps what the emulator holds, key material included. docs/decisions.md ("Local state and the
emulator") gives the reasons in full.

How a snapshot is taken without stopping the emulator: the process forks (under the emulator's
DynamoDB write lock, so no write or transaction is half-applied in the copy), and the child writes the
copy-on-write image of the backends while the parent goes on serving. The child pickles the backends
into ``state-<generation>.pickle.tmp``, fsyncs it, renames it to ``state-<generation>.pickle`` (atomic)
and deletes older generations. Start reads the newest generation that loads. A crash (``kill -9``)
loses what changed after the last completed snapshot: at most the interval plus one snapshot's time.

The child holds the state directory's lock (inherited from the parent), so a new ``make run`` waits
for a snapshot still being written after its parent stopped. The files are this user's own (mode 0600
in a 0700 directory): pickle runs code when it loads, so a snapshot is never read from anywhere else.
"""
from __future__ import annotations

import contextlib
import copyreg
import fcntl
import importlib
import io
import json
import os
import pickle
import re
import stat
import threading
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

FILE = re.compile(r"^state-(\d{12})\.pickle$")
FORMAT = 1
# BackendDict attributes that describe the dict itself, not state (``moto/core/base_backend.py``)
_BACKEND_DICT_FIELDS = {"backend", "service_name", "_use_boto3_regions", "_additional_regions", "_id"}


# --- pickling what moto holds ------------------------------------------------------------------------

def _new_lock() -> Any:
    return threading.Lock()


def _new_rlock() -> Any:
    return threading.RLock()


def _private_key(der: bytes) -> Any:
    return serialization.load_der_private_key(der, password=None)


def _reduce_private_key(key: Any) -> tuple[Any, tuple[bytes]]:
    return _private_key, (key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()),)


def _reduce_fake_key(key: Any) -> tuple[Any, tuple[Any], dict[str, Any]]:
    """An S3 object as moto's own ``FakeKey.__getstate__`` gives it, without taking its lock: in the
    forked writer no other thread runs, and a lock another thread held at the fork stays held forever."""
    state = key.__dict__.copy()
    buffer = state.pop("_value_buffer")
    state.pop("lock", None)
    try:
        if getattr(buffer, "_rolled", False):  # on disk: read without moving the offset the parent shares
            fileno = buffer.fileno()
            state["value"] = os.pread(fileno, os.fstat(fileno).st_size, 0)
        else:
            state["value"] = buffer._file.getvalue()  # the child's own copy of the BytesIO
    except ValueError:  # closed: a deleted key's buffer, as moto's __getstate__ treats it
        state["value"] = b""
    return object.__new__, (type(key),), state


def _versioned_store(cls: type, versions: dict[str, list[Any]], attrs: dict[str, Any]) -> Any:
    store = cls()
    for key, listed in versions.items():
        dict.__setitem__(store, key, listed)
    store.__dict__.update(attrs)
    return store


def _reduce_versioned_store(store: Any) -> tuple[Any, tuple[Any, ...]]:
    """A bucket's keys with every version: moto's ``_VersionedKeyStore`` answers ``items()`` with the
    latest version of each key only, which is all pickle would keep."""
    return _versioned_store, (type(store), dict(dict.items(store)), dict(store.__dict__))


@lru_cache(maxsize=1)
def dispatch_table() -> dict[type, Any]:
    """The reducers of the snapshot's pickler (built once: a writer forked later finds it ready)."""
    from moto.s3.models import FakeKey
    from moto.s3.utils import _VersionedKeyStore

    table = copyreg.dispatch_table.copy()
    table[type(threading.Lock())] = lambda _: (_new_lock, ())
    table[type(threading.RLock())] = lambda _: (_new_rlock, ())
    for generate in (lambda: rsa.generate_private_key(65537, 2048), lambda: ec.generate_private_key(ec.SECP256R1()),
                     ed25519.Ed25519PrivateKey.generate):
        table[type(generate())] = _reduce_private_key
    table[FakeKey] = _reduce_fake_key
    table[_VersionedKeyStore] = _reduce_versioned_store
    for subclass in FakeKey.__subclasses__():  # FakeMultipart parts etc. carry the same buffer
        table[subclass] = _reduce_fake_key
    return table


def capture() -> dict[str, Any]:
    """Every moto backend in use, by the module and name of its ``BackendDict``."""
    from moto.core.base_backend import BackendDict

    services: dict[str, Any] = {}
    for backends in list(BackendDict._instances):
        if not len(backends):
            continue
        module = backends.backend.__module__
        name = _global_name(module, backends)
        if name is None:
            continue
        accounts = {account: dict(dict.items(per_account)) for account, per_account in dict.items(backends)}
        extra = {k: v for k, v in vars(backends).items() if k not in _BACKEND_DICT_FIELDS}
        services[f"{module}:{name}"] = {"accounts": accounts, "extra": extra}
    return {"format": FORMAT, "services": services}


def _global_name(module: str, backends: Any) -> str | None:
    for name, value in vars(importlib.import_module(module)).items():
        if value is backends:
            return name
    return None


def dumps(state: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = dispatch_table()  # type: ignore[misc] - private to this pickler
    pickler.dump(state)
    return out.getvalue()


def install(state: dict[str, Any]) -> int:
    """Put a loaded snapshot's backends in place of the (empty) ones moto holds; returns how many
    region backends were installed."""
    from moto.core.base_backend import BackendDict

    if state.get("format") != FORMAT:
        raise ValueError(f"unknown snapshot format {state.get('format')!r}")
    installed = 0
    for where, saved in state["services"].items():
        module, _, name = where.partition(":")
        backends = getattr(importlib.import_module(module), name)
        dict.clear(backends)
        for account, regions in saved["accounts"].items():
            per_account = backends[account]  # creates the account's (empty) AccountSpecificBackend
            for region, backend in regions.items():
                dict.__setitem__(per_account, region, backend)
                installed += 1
        for attr, value in saved["extra"].items():
            setattr(backends, attr, value)
        if backends not in BackendDict._instances:
            BackendDict._instances.append(backends)
    return installed


# --- files ---------------------------------------------------------------------------------------------

def generations(directory: Path) -> list[tuple[int, Path]]:
    """The complete snapshot files in ``directory``, newest first."""
    found = []
    for path in directory.glob("state-*.pickle"):
        match = FILE.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found, reverse=True)


def write(directory: Path, generation: int, data: bytes) -> Path:
    """Write one snapshot atomically (tmp file, fsync, rename, fsync of the directory), then delete
    every older generation and any leftover temporary file."""
    final = directory / f"state-{generation:012d}.pickle"
    tmp = directory / f"{final.name}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, final)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    for older, path in generations(directory):
        if older < generation:
            path.unlink(missing_ok=True)
    for leftover in directory.glob("state-*.pickle.tmp*"):
        pid = leftover.name.rpartition(".tmp")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            leftover.unlink(missing_ok=True)
    return final


def record(directory: Path, facts: dict[str, Any]) -> None:
    """Write what the last snapshot cost (``last-snapshot.json``: generation, bytes, seconds to write)."""
    tmp = directory / f"last-snapshot.json.tmp{os.getpid()}"
    tmp.write_text(json.dumps(facts))
    os.replace(tmp, directory / "last-snapshot.json")


def recorded(directory: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((directory / "last-snapshot.json").read_text()))
    except (OSError, ValueError):
        return {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load_newest(directory: Path) -> tuple[int, int]:
    """Install the newest snapshot that loads; returns (its generation, region backends installed),
    (0, 0) when there is none. A damaged newest file (it cannot be: writes are renamed whole) falls back
    to the one before."""
    for generation, path in generations(directory):
        try:
            state = pickle.loads(path.read_bytes())  # noqa: S301 - this user's own file, mode 0600
        except Exception:  # noqa: BLE001 - try the previous generation
            continue
        return generation, install(state)
    return 0, 0


# --- the state directory's lock ----------------------------------------------------------------------

@contextlib.contextmanager
def locked(directory: Path, wait_seconds: float) -> Iterator[int]:
    """Hold the state directory's exclusive lock (one ``make run`` per directory); waits up to
    ``wait_seconds`` for a previous run, or its last snapshot writer, to let go. Yields the lock's fd:
    forked snapshot writers inherit it and hold the lock until their file is in place."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise OSError(f"{directory} is in use (another `make run`, or its last snapshot is still "
                              "being written)") from None
            time.sleep(0.1)
    try:
        yield fd
    finally:
        os.close(fd)


def close_sockets() -> None:
    """In a forked writer: close every inherited socket, so a listening port is free once the parent
    has gone (the writer keeps only files)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
