"""Residency codes and the AWS regions that hold each one's data (DESIGN.md section 2)."""
from __future__ import annotations

from dataclasses import dataclass

from chalicelib.core.errors import ApiError


@dataclass(frozen=True)
class Residency:
    code: str
    region: str | None
    status: str  # "open" | "planned"
    name: str


RESIDENCIES: dict[str, Residency] = {
    "us-east": Residency("us-east", "us-east-1", "open", "United States"),
    "eu-central": Residency("eu-central", "eu-central-1", "open", "European Union"),
    "br-south": Residency("br-south", None, "planned", "Brazil"),
}

OPEN_REGIONS: tuple[str, ...] = tuple(r.region for r in RESIDENCIES.values() if r.region)
DEFAULT_RESIDENCY = "us-east"


def region_for(residency: str) -> str:
    """The AWS region for an open residency; a clear 4xx for a planned or unknown one."""
    entry = RESIDENCIES.get(residency)
    if entry is None:
        raise ApiError(
            400,
            "unknown_residency",
            f"Unknown residency '{residency}'. Choose one of: us-east, eu-central.",
            errors=[{"field": "residency", "message": "must be one of us-east, eu-central"}],
        )
    if entry.region is None:
        raise ApiError(
            422,
            "residency_not_available",
            f"Residency '{residency}' ({entry.name}) is planned but not yet open. Until it opens, choose "
            "'us-east' (served under standard contractual clauses) or 'eu-central'.",
            extra={"alternatives": ["us-east", "eu-central"]},
        )
    return entry.region
