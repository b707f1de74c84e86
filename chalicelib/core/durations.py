"""ISO 8601 durations, one grammar for every surface: ``PnW`` alone, or ``PnDTnHnMnS`` with any parts
(``PT15M``, ``P30D``, ``P1DT12H``), whole numbers only. Years and months are refused: their length varies,
and every duration we accept or show must mean one exact span."""
from __future__ import annotations

import re
from collections.abc import Callable

_RE = re.compile(r"P(?:(?P<w>\d{1,4})W|(?:(?P<d>\d{1,5})D)?(?:T(?:(?P<h>\d{1,6})H)?(?:(?P<m>\d{1,7})M)?(?:(?P<s>\d{1,9})S)?)?)")
_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_HINT = "must be an ISO 8601 duration such as PT15M, PT24H or P30D"


def parse_duration(value: str) -> int:
    """Seconds in ``value``; ValueError when it is not a week/day/hour/minute/second ISO 8601 duration."""
    m = _RE.fullmatch(value) if isinstance(value, str) else None
    if not m or value.endswith("T"):
        raise ValueError(_HINT)
    parts = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if not parts:  # "P" or "PT"
        raise ValueError(_HINT)
    return sum(_UNIT_SECONDS[k] * n for k, n in parts.items())


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


def duration_check(minimum: int, maximum: int, hint: str) -> Callable[[object], str | None]:
    """A ``validation.F`` check: a duration between ``minimum`` and ``maximum`` seconds."""

    def check(value: object) -> str | None:
        try:
            seconds = parse_duration(value)  # type: ignore[arg-type]
        except ValueError as err:
            return str(err)
        if not minimum <= seconds <= maximum:
            return f"must be between {hint}"
        return None

    return check
