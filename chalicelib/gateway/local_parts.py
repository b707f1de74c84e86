"""A container's local copies of the snapshot files it wrote or a sync of it downloaded, so that the next
sync of the dataset here does not download them again: an incremental sync reads the base parts its change
touches, and a base stays the same under up to ``snapshots.layers.MAX_LAYERS`` layers.

A snapshot file never changes once written: its key holds its sync run and attempt
(``storage.snapshot_prefix``), and no key is written twice with other content (``remember_committed``
rests on the same rule). So a local copy is the object for as long as the object exists, and only a
manifest can name it. Copies are kept LRU under ``BUDGET_BYTES`` of local disk (Lambda's /tmp is 512 MB,
which a sync's spill shares); a copy unused for ``IDLE_SECONDS`` is dropped at the next use of the cache. A
prune or a dataset's deletion in this container drops the copies of what it deletes at once; another
container's copies go within ``IDLE_SECONDS`` of their last use, or with the container.
"""
from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass

from chalicelib.core import clock, process_state

BUDGET_BYTES = 128 * 1024 * 1024
IDLE_SECONDS = 900.0


@dataclass
class _Copy:
    path: str
    size: int
    used_at: float


_lock = threading.Lock()  # a local process runs several sync workers on threads
_copies: OrderedDict[tuple[str, str], _Copy] = OrderedDict()  # (region, key) -> copy, least recently used first
_bytes = [0]
_home: list[str] = []  # the directory of this process's copies, made at the first one
_names = itertools.count()


def keep(region: str, key: str, path: str, *, move: bool = False) -> None:
    """Keep the file at ``path`` as the local copy of object ``key``: linked (the caller still reads it) or,
    with ``move``, moved (the caller is done with it: ``path`` is gone afterwards, kept or not)."""
    size = os.path.getsize(path)
    with _lock:
        _expire(clock.now())
        target = os.path.join(_directory(), f"{next(_names):08d}.parquet")
        try:
            if size > BUDGET_BYTES:
                raise OSError("larger than the budget")
            os.replace(path, target) if move else _link(path, target)
        except OSError:
            if move:
                _remove(path)
            return
        _drop((region, key))
        _copies[(region, key)] = _Copy(target, size, clock.now())
        _bytes[0] += size
        while _bytes[0] > BUDGET_BYTES:
            _drop(next(iter(_copies)))


def copy_to(region: str, key: str, dest: str) -> bool:
    """Put the local copy of ``key`` at ``dest`` (a link: read it only); False when there is none."""
    with _lock:
        now = clock.now()
        _expire(now)
        copy = _copies.get((region, key))
        if copy is None:
            return False
        try:
            _link(copy.path, dest)
        except OSError:
            _drop((region, key))
            return False
        copy.used_at = now
        _copies.move_to_end((region, key))
    return True


def forget(region: str, keys: list[str]) -> None:
    """Drop the copies of these objects (they are being deleted)."""
    with _lock:
        for key in keys:
            _drop((region, key))


def held() -> dict[tuple[str, str], str]:
    """(region, key) -> local path of every copy (tests)."""
    with _lock:
        return {k: c.path for k, c in _copies.items()}


def clear() -> None:
    with _lock:
        for k in list(_copies):
            _drop(k)


process_state.enrol(f"{__name__}._copies", clear)


def _expire(now: float) -> None:
    while _copies:
        k, copy = next(iter(_copies.items()))
        if now - copy.used_at < IDLE_SECONDS:
            return
        _drop(k)


def _drop(k: tuple[str, str]) -> None:
    copy = _copies.pop(k, None)
    if copy is not None:
        _bytes[0] -= copy.size
        _remove(copy.path)


def _directory() -> str:
    if not _home:
        _home.append(tempfile.mkdtemp(prefix="gwparts-"))
        atexit.register(shutil.rmtree, _home[0], True)
    return _home[0]


def _link(src: str, dest: str) -> None:
    """``dest`` as a hard link to ``src`` (a copy across file systems)."""
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
