"""ISO 8601 durations (``PT15M``, ``P30D``, ``P1DT12H``) to seconds. Years and months are refused:
their length varies, and every duration we accept is a bound that must mean one exact span."""
from __future__ import annotations

import re

_RE = re.compile(r"^P(?:(?P<w>\d{1,4})W|(?:(?P<d>\d{1,5})D)?(?:T(?:(?P<h>\d{1,6})H)?(?:(?P<m>\d{1,7})M)?(?:(?P<s>\d{1,9})S)?)?)$")


def parse(value: str) -> int:
    """Seconds in ``value``; ValueError when it is not a day/hour/minute/second ISO 8601 duration."""
    m = _RE.fullmatch(value) if isinstance(value, str) else None
    if not m or value in ("P", "PT") or value.endswith("T"):
        raise ValueError("not an ISO 8601 duration such as PT24H or P30D")
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if not g:
        raise ValueError("not an ISO 8601 duration such as PT24H or P30D")
    return (g.get("w", 0) * 7 * 86400 + g.get("d", 0) * 86400 + g.get("h", 0) * 3600
            + g.get("m", 0) * 60 + g.get("s", 0))


def checker(minimum: int, maximum: int, hint: str):  # type: ignore[no-untyped-def]
    """A ``validation.F`` check: a duration between ``minimum`` and ``maximum`` seconds."""

    def check(value: object) -> str | None:
        try:
            seconds = parse(value)  # type: ignore[arg-type]
        except ValueError as err:
            return str(err)
        if not minimum <= seconds <= maximum:
            return f"must be between {hint}"
        return None

    return check
