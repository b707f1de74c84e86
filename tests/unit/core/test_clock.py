"""The platform clock: tests move it with ``advance`` and stop it with ``frozen``."""
from __future__ import annotations

import time

from chalicelib.core import clock


def test_frozen_stops_time_and_advance_still_moves_it() -> None:
    try:
        with clock.frozen() as start:
            time.sleep(0.01)
            assert clock.now() == start
            clock.advance(30)
            assert clock.now() == start + 30
        assert clock.now() > start + 30  # running again, offset kept until reset
    finally:
        clock.reset()
    assert abs(clock.now() - time.time()) < 1
