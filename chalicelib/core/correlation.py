"""Correlation IDs: taken from ``X-Correlation-Id`` when well formed, generated otherwise."""
from __future__ import annotations

import contextvars
import re
import uuid

HEADER = "X-Correlation-Id"
_VALID = re.compile(r"^[A-Za-z0-9._:\-]{8,128}$")
_current: contextvars.ContextVar[str] = contextvars.ContextVar("correlation_id", default="")


def accept(candidate: str | None) -> str:
    """The caller's ID if it is safe to echo and log, else a fresh one; becomes the current ID."""
    cid = candidate if candidate and _VALID.match(candidate) else str(uuid.uuid4())
    _current.set(cid)
    return cid


def current() -> str:
    cid = _current.get()
    if not cid:
        cid = accept(None)
    return cid


def set_current(cid: str) -> None:
    """Adopt an ID carried by queued work."""
    _current.set(cid)
