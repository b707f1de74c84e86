"""Wall-clock limits for queries: one daemon thread per process fires the callbacks whose deadline passed.

A ``threading.Timer`` per query starts a thread per query, which costs milliseconds on a busy machine;
this keeps one thread and a heap of deadlines instead.
"""
from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

_cond = threading.Condition()
_heap: list[tuple[float, int]] = []
_live: dict[int, Callable[[], object]] = {}  # handle -> callback, until fired or disarmed
_seq = itertools.count()
_thread: threading.Thread | None = None


def arm(seconds: float, fire: Callable[[], object]) -> int:
    """Call ``fire`` once ``seconds`` from now unless ``disarm`` is called first; returns the handle."""
    global _thread  # noqa: PLW0603 - started on first use
    handle = next(_seq)
    with _cond:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_loop, name="query-timer", daemon=True)
            _thread.start()
        _live[handle] = fire
        heapq.heappush(_heap, (time.monotonic() + seconds, handle))
        _cond.notify()
    return handle


def disarm(handle: int) -> None:
    with _cond:
        _live.pop(handle, None)


def _loop() -> None:
    while True:
        with _cond:
            while _heap and _heap[0][1] not in _live:
                heapq.heappop(_heap)
            if not _heap:
                _cond.wait()
                continue
            deadline, handle = _heap[0]
            wait = deadline - time.monotonic()
            if wait > 0:
                _cond.wait(wait)
                continue
            heapq.heappop(_heap)
            fire = _live.pop(handle)
        try:
            fire()
        except Exception:  # noqa: BLE001 - the query it limited may already be gone
            pass
        finally:
            del fire  # hold no reference to the query's connection while waiting
