"""Process-wide state in one registry: every cache, memoised client and key a container holds enrols here,
so tests (and a local process whose emulator restarted) reset all of it with one call, never by reaching
into a module's private names.

``cached`` is ``functools.lru_cache`` enrolled under the function's qualified name; ``enrol`` names the
reset of any other state (a module-level dict, a loaded signer). Caches hold only what can be read again.
State is *data* (read from AWS, keys or the environment: reset between tests) unless marked *derived*
(built from the code or the deployment's fixed configuration: word lists, schemas, AWS clients, table
classes), which only ``reset_all(derived=True)`` rebuilds.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_RESETS: dict[str, tuple[Callable[[], None], bool]] = {}  # name -> (reset, derived)


def enrol(name: str, reset: Callable[[], None], *, derived: bool = False) -> None:
    """Register ``reset`` (idempotent by ``name``: a module imported twice enrols once)."""
    _RESETS[name] = (reset, derived)


def cached(maxsize: int | None = 128, *, derived: bool = False) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)``, enrolled here."""
    def decorate(fn: F) -> F:
        wrapped = lru_cache(maxsize=maxsize)(fn)
        enrol(f"{fn.__module__}.{fn.__qualname__}", wrapped.cache_clear, derived=derived)
        return wrapped  # type: ignore[return-value]
    return decorate


def reset_all(*, derived: bool = False) -> None:
    """Forget every enrolled data cache and loaded object of this process (and derived state too)."""
    for reset, is_derived in list(_RESETS.values()):
        if derived or not is_derived:
            reset()


def enrolled() -> list[str]:
    return sorted(_RESETS)
