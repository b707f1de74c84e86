"""The one source of "now", so tests can move time (lockouts, link expiry, key rotation)."""
from __future__ import annotations

import time
from datetime import UTC, datetime

_offset = 0.0


def now() -> float:
    """Seconds since the epoch, shifted by any offset a test set."""
    return time.time() + _offset


def utcnow() -> datetime:
    return datetime.fromtimestamp(now(), tz=UTC)


def advance(seconds: float) -> None:
    """Move the clock forward (tests only)."""
    global _offset
    _offset += seconds


def reset() -> None:
    global _offset
    _offset = 0.0


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
