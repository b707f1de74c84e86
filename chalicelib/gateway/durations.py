"""ISO 8601 durations (the GraphQL ``Duration`` scalar and the ``fresher_than`` filter)."""
from __future__ import annotations

import re

_RE = re.compile(r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")


def format_duration(seconds: float) -> str:
    """Whole seconds as ``PnDTnHnMnS`` (zero parts left out; ``PT0S`` for zero or negative)."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    out = "P" + (f"{days}D" if days else "")
    clock_part = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "") + (f"{secs}S" if secs else "")
    if clock_part:
        out += "T" + clock_part
    return out if out != "P" else "PT0S"


def parse_duration(text: str) -> float:
    """Seconds of an ISO 8601 duration made of weeks, days, hours, minutes, seconds; ValueError otherwise."""
    m = _RE.match(text or "")
    if not m or text in ("P", "PT") or text.endswith("T"):
        raise ValueError("must be an ISO 8601 duration such as PT15M, PT1H or P1D")
    parts = {k: float(v) for k, v in m.groupdict().items() if v}
    return (parts.get("w", 0) * 7 * 86400 + parts.get("d", 0) * 86400 + parts.get("h", 0) * 3600
            + parts.get("m", 0) * 60 + parts.get("s", 0))
