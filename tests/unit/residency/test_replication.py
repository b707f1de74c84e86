"""The declared DR secondaries: defaults, refusals, and that each stays within its residency's jurisdiction."""
from __future__ import annotations

import pytest

from chalicelib.core.http.errors import ApiError
from chalicelib.core.regions import DR_ONLY_REGIONS, DR_REGIONS, OPEN_REGIONS, RESIDENCIES
from chalicelib.platform.workspaces.disaster_recovery import check_secondary, default_secondary


def test_every_open_residency_declares_a_secondary_outside_the_open_regions() -> None:
    open_codes = {r.code for r in RESIDENCIES.values() if r.region}
    assert set(DR_REGIONS) == open_codes
    assert set(DR_ONLY_REGIONS) == {r for rs in DR_REGIONS.values() for r in rs}
    assert set(DR_ONLY_REGIONS).isdisjoint(OPEN_REGIONS)
    assert all(r.startswith("eu-") for r in DR_REGIONS["eu-central"])  # an EU copy stays in the EU
    assert all(r.startswith("us-") for r in DR_REGIONS["us-east"])


def test_default_and_explicit_secondary() -> None:
    assert check_secondary("eu-central", None) == default_secondary("eu-central") == "eu-west-1"
    assert check_secondary("us-east", "us-west-2") == "us-west-2"


@pytest.mark.parametrize(("residency", "wanted"), [("eu-central", "us-west-2"), ("us-east", "eu-west-1"),
                                                   ("eu-central", "eu-central-1"), ("us-east", ""),
                                                   ("us-east", "US-WEST-2"), ("br-south", "us-west-2")])
def test_undeclared_secondary_is_422(residency: str, wanted: str) -> None:
    with pytest.raises(ApiError) as err:
        check_secondary(residency, wanted)
    assert err.value.status == 422
    assert err.value.code == "undeclared_secondary_region"
