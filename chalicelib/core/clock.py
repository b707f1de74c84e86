"""The one source of "now", so tests can move time (lockouts, link expiry, key rotation)."""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

_offset = 0.0
_frozen_at: float | None = None


def now() -> float:
    """Seconds since the epoch, shifted by any offset a test set (and stopped while frozen)."""
    return (_frozen_at if _frozen_at is not None else time.time()) + _offset


def utcnow() -> datetime:
    return datetime.fromtimestamp(now(), tz=UTC)


def advance(seconds: float) -> None:
    """Move the clock forward (tests only)."""
    global _offset
    _offset += seconds


def reset() -> None:
    global _offset, _frozen_at
    _offset = 0.0
    _frozen_at = None


@contextmanager
def frozen() -> Iterator[float]:
    """Stop the clock at the current time inside the block, e.g. so that a TOTP code computed for "now"
    is checked in the same 30-second step (tests only; ``advance`` still moves it)."""
    global _frozen_at
    _frozen_at = time.time()
    try:
        yield now()
    finally:
        _frozen_at = None


def iso(ts: float | datetime | None = None) -> str:
    """RFC 3339 UTC with millisecond precision and ``Z``."""
    dt = ts if isinstance(ts, datetime) else datetime.fromtimestamp(now() if ts is None else ts, tz=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def parse_iso(value: str) -> datetime:
    """Parse an ISO 8601 UTC timestamp; raises ValueError unless it names UTC (``Z`` or ``+00:00``)."""
    if not isinstance(value, str) or "T" not in value:
        raise ValueError("not an ISO 8601 date-time")
    dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None or dt.utcoffset() != UTC.utcoffset(None):
        raise ValueError("timestamp must be in UTC (end with Z)")
    return dt
