"""Residency codes and the AWS regions that hold each one's data (DESIGN.md section 2)."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.process_state import cached


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

# Disaster-recovery secondaries per residency (``cross-region-dr``), the first being the default. These
# regions serve no API and hold no primary data: only each declared workspace's encrypted DR copy
# (``infra/resources.py`` DR_BUCKETS and DR_KEYS). An EU workspace's copy stays in the EU.
DR_REGIONS: dict[str, tuple[str, ...]] = {"us-east": ("us-west-2",), "eu-central": ("eu-west-1",)}
DR_ONLY_REGIONS: tuple[str, ...] = tuple(sorted({r for rs in DR_REGIONS.values() for r in rs} - set(OPEN_REGIONS)))


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


# --- regional processing: which regions this deployment serves (docs/residency.md) ----------------------

# Route scopes (``core.http.api.Api.route(..., scope=...)``): where a route is served.
WORKSPACE = "workspace"  # the token's workspace: only in that workspace's region
PATH = "path"  # the workspace named in the path (support access): only in that workspace's region
GLOBAL = "global"  # directory and account operations: only in the global deployment
SCOPES = (WORKSPACE, PATH, GLOBAL)

_global_scope: ContextVar[bool] = ContextVar("global_scope", default=False)
_dr_target: ContextVar[str] = ContextVar("dr_target", default="")


class RegionPinned(RuntimeError):
    """A client or model for another region was asked for in a deployment pinned to one region."""


def pinned_region() -> str:
    """The region this process is pinned to, or "" (not pinned: global functions and local tools)."""
    return settings().region


def serves_global() -> bool:
    """Whether this process serves global routes: unpinned, or pinned to the global region."""
    region = settings().region
    return not region or region == settings().global_region


def served_regions() -> tuple[str, ...]:
    """The regions whose work this process does (queues, scheduled jobs, listings): its own; all of them
    when unpinned or inside a global route of the global deployment."""
    region = settings().region
    return (region,) if region and not _global_scope.get() else OPEN_REGIONS


def check_client_region(region: str, *, regional: bool = True) -> None:
    """Refuse a client for another region in a pinned process. Global resources (``regional=False``) live
    in the global region and are reachable from every region; a global route of the global deployment
    may reach every region (it writes the minimal records a new member or workspace needs)."""
    pin = settings().region
    if not pin or region == pin or _global_scope.get():
        return
    if region == _dr_target.get() and region in DR_REGIONS.get(residency_of_region(pin), ()):
        return  # the DR copy of this region's workspaces (``dr_copy_to``)
    if not regional and region == settings().global_region:
        return
    raise RegionPinned(f"this deployment is pinned to {pin}; a client for {region} is refused")


def scoped(scope: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run inside the global scope when ``scope`` is global and this process serves global routes."""
    if scope != GLOBAL:
        return fn

    def run(*args: Any, **kwargs: Any) -> Any:
        if not serves_global():
            return fn(*args, **kwargs)  # the route answers 421 before it reads anything
        token = _global_scope.set(True)
        try:
            return fn(*args, **kwargs)
        finally:
            _global_scope.reset(token)

    return run


@contextmanager
def dr_copy_to(secondary: str) -> Iterator[None]:
    """Inside the block, a pinned process may also reach ``secondary``, when it is a declared DR region
    of its own residency (the replication worker writes and deletes the DR copy there)."""
    token = _dr_target.set(secondary)
    try:
        yield
    finally:
        _dr_target.reset(token)


@cached(maxsize=8, derived=True)
def _urls(raw: str) -> dict[str, dict[str, str]]:
    return json.loads(raw or "{}")


def endpoints(region: str) -> dict[str, str]:
    """The public addresses of ``region``'s deployment: ``api_base_url`` (platform API, ending in /v1)
    and ``gateway_url``. From ``REGIONAL_URLS``; the process's own addresses when a region is not listed."""
    s = settings()
    entry = _urls(s.regional_urls).get(region) or {}
    base = (entry.get("base_url") or s.base_url).rstrip("/")
    return {"region": region, "api_base_url": base + "/v1",
            "gateway_url": (entry.get("gateway_url") or s.gateway_url).rstrip("/")}


def residency_of_region(region: str) -> str:
    return next(r.code for r in RESIDENCIES.values() if r.region == region)


def wrong_region(region: str) -> ApiError:
    """421: the workspace is served by ``region``'s deployment; the body names its addresses."""
    where = endpoints(region)
    return ApiError(421, "wrong_region",
                    f"This workspace is served in {region} ({residency_of_region(region)}). Send the request to "
                    f"{where['api_base_url']} (platform) or {where['gateway_url']} (gateway).",
                    extra={"residency": residency_of_region(region), **where})


def global_only() -> ApiError:
    """421 for a global route at a regional deployment outside the global region."""
    where = endpoints(settings().global_region)
    return ApiError(421, "global_route",
                    f"This operation is served by the global deployment at {where['api_base_url']}.",
                    extra={"api_base_url": where["api_base_url"]})


def public_endpoints() -> dict[str, dict[str, str]]:
    """Every open residency's addresses, for discovery documents."""
    return {r.code: endpoints(r.region) for r in RESIDENCIES.values() if r.region}
