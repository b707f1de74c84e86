"""One ISO 8601 duration grammar (``core/durations.py``) for support grants, chat auto-expiry, the
catalog's ``fresher_than`` filter and the GraphQL ``Duration`` scalar."""
from __future__ import annotations

import pytest

from chalicelib.core.durations import duration_check, format_duration, parse_duration


@pytest.mark.parametrize(("value", "seconds"), [("PT15M", 900), ("PT72H", 259200), ("P1D", 86400),
                                                ("P1DT12H", 129600), ("P2W", 1209600), ("PT90S", 90),
                                                ("P30D", 2592000), ("PT0S", 0)])
def test_parse(value: str, seconds: int) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["", "P", "PT", "P1Y", "P1M", "1H", "PT1.5H", "PT1.5S", "P1DT", "PT1HT",
                                   "PT1H30", "-PT1H", "PT1H ", "PT1H\n", "P1W2D", 3600, None])
def test_refused(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("seconds", "text"), [(0, "PT0S"), (-5, "PT0S"), (59, "PT59S"), (900, "PT15M"),
                                               (3600, "PT1H"), (90061, "P1DT1H1M1S"), (172800, "P2D")])
def test_format_round_trips(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == max(0, seconds)


def test_check_bounds() -> None:
    check = duration_check(900, 72 * 3600, "PT15M and PT72H")
    assert check("PT15M") is None
    assert check("PT14M") == "must be between PT15M and PT72H"
    assert check("P1Y") is not None
