"""Per-container cache of policy-projected tables, each set held in its own locked-down DuckDB.

A *sandbox* is an in-memory DuckDB database holding one table per dataset of a query, each already
projected through the caller's field policies, and then locked down (no files, no network, no
extensions, no configuration changes). Its key is the workspace plus, for each dataset, its id, name,
``data_prefix`` (the snapshot: it changes with every sync), the caller's visible fields with their
policies and types, and the documents whose rows the caller may not read (``gateway/reader.View``). So:

- everything in a sandbox is data every caller with that key may read, exactly as they may see it; a
  caller whose readable datasets, visible fields, policies or hidden documents differ computes another
  key and never reaches it (a role, ACL, document-ACL or field-policy change, or a new snapshot, is a
  key change);
- the caller's SQL runs on a fresh cursor of the sandbox and can only name what the sandbox holds.

A sandbox holds the columns queries have read so far; a query that reads more builds a new one with
the union and the old one is dropped. Sandboxes are kept LRU under ``QUERY_CACHE_BYTES`` (default
256 MB, measured with ``duckdb_memory()`` after a build) and at most ``MAX_SANDBOXES`` of them; one that
alone exceeds the budget is used once and closed. Building one for a dataset drops cached sandboxes that hold an older snapshot of it.
"""
from __future__ import annotations

import atexit
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Key = tuple[Any, ...]
MAX_SANDBOXES = 32  # each is a DuckDB instance with its own fixed overhead, whatever its tables weigh


@dataclass
class Sandbox:
    key: Key
    con: Any  # the locked-down DuckDB connection
    workdir: str  # spill and home directory, removed on close
    loaded: dict[str, frozenset[str]]  # dataset name -> columns loaded with rows
    snapshots: dict[str, str | None]  # dataset id -> data_prefix
    nbytes: int = 0
    users: int = 0
    dropped: bool = False
    _closed: bool = field(default=False, repr=False)

    def covers(self, needs: dict[str, frozenset[str]]) -> bool:
        return all(name in self.loaded and cols <= self.loaded[name] for name, cols in needs.items())

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.con.close()
            shutil.rmtree(self.workdir, ignore_errors=True)


_lock = threading.Lock()
_sandboxes: OrderedDict[Key, Sandbox] = OrderedDict()


def acquire(key: Key, needs: dict[str, frozenset[str]], budget: int,
            build: Callable[[dict[str, frozenset[str]]], Sandbox]) -> Sandbox:
    """A sandbox for ``key`` that holds at least ``needs``: the cached one, or one built by ``build`` (called
    with the columns to load: ``needs`` joined with what the cached one held). Pair with ``release``."""
    with _lock:
        found = _sandboxes.get(key)
        if found is not None and found.covers(needs):
            _sandboxes.move_to_end(key)
            found.users += 1
            return found
        wanted = dict(found.loaded) if found is not None else {}
    for name, cols in needs.items():
        wanted[name] = wanted.get(name, frozenset()) | cols
    box = build(wanted)
    with _lock:
        box.users += 1
        old = _sandboxes.pop(key, None)
        if old is not None:
            _drop(old)
        for other_key in [k for k, s in _sandboxes.items()
                          if any(ds in box.snapshots and box.snapshots[ds] != p for ds, p in s.snapshots.items())]:
            _drop(_sandboxes.pop(other_key))  # an older snapshot of a dataset this one holds
        if box.nbytes <= budget:
            if not _sandboxes:
                _at_exit()
            _sandboxes[key] = box
            _evict(budget)
        else:
            box.dropped = True  # too big to keep: used once
    return box


def holds(key: Key) -> bool:
    """Whether a sandbox for ``key`` is cached (it may still lack columns a query needs)."""
    with _lock:
        return key in _sandboxes


def release(box: Sandbox) -> None:
    with _lock:
        box.users -= 1
        if box.dropped and box.users <= 0:
            box.close()


def discard(box: Sandbox) -> None:
    """Forget ``box`` (closed once its last user releases it)."""
    with _lock:
        if _sandboxes.get(box.key) is box:
            del _sandboxes[box.key]
        _drop(box)


def _drop(box: Sandbox) -> None:
    box.dropped = True
    if box.users <= 0:
        box.close()


def _evict(budget: int) -> None:
    total = sum(s.nbytes for s in _sandboxes.values())
    while (total > budget or len(_sandboxes) > MAX_SANDBOXES) and _sandboxes:
        _, box = _sandboxes.popitem(last=False)
        total -= box.nbytes
        _drop(box)


_exit_hooked = False


def _at_exit() -> None:
    global _exit_hooked  # noqa: PLW0603
    if not _exit_hooked:
        _exit_hooked = True
        atexit.register(clear)  # closed before the interpreter tears DuckDB down


def held_bytes() -> int:
    """Bytes of the cached sandboxes (as measured after each build)."""
    with _lock:
        return sum(s.nbytes for s in _sandboxes.values())


def clear() -> None:
    """Drop every cached sandbox (tests; a container never needs it)."""
    with _lock:
        while _sandboxes:
            _drop(_sandboxes.popitem(last=False)[1])
