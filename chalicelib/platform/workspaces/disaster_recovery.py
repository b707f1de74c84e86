"""A workspace's cross-region DR setting: its declared secondary region, turning it on, and the read model's
DR fields (secondary, checkpoint, lag). The copy itself is made by ``residency/replication.py``, which
records its checkpoint in the same ``replication_state`` item."""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import clock
from chalicelib.core.http.errors import ApiError
from chalicelib.core.regions import DR_REGIONS
from chalicelib.core.tenancy import WorkspaceAttrs
from chalicelib.platform.models import ReplicationStateAttrs, replication_states

DR = "cross-region-dr"
RPO_SECONDS = 15 * 60  # the spec's recovery point objective for cross-region-dr


def default_secondary(residency: str) -> str:
    return DR_REGIONS[residency][0]


def check_secondary(residency: str, wanted: str | None) -> str:
    """The secondary region for a workspace of ``residency``: ``wanted`` if it is declared for it, the
    default when not given; 422 ``undeclared_secondary_region`` otherwise (nothing is changed)."""
    declared = DR_REGIONS.get(residency, ())
    if wanted is None and declared:
        return declared[0]
    if wanted not in declared:
        raise ApiError(422, "undeclared_secondary_region",
                       f"'{wanted}' is not a declared disaster-recovery region for residency {residency}. "
                       f"Choose one of: {', '.join(declared) or 'none declared'}.",
                       errors=[{"field": "replication_secondary_region",
                                "message": f"must be one of {', '.join(declared)}"}])
    return wanted


def read_state(region: str, workspace_id: str) -> ReplicationStateAttrs | None:
    try:
        return replication_states(region).get(workspace_id, consistent_read=True)
    except DoesNotExist:
        return None


def enable(region: str, workspace_id: str, secondary: str) -> None:
    """Record that DR is on (called in the workspace's region when an Admin turns it on). A copy still
    held in another secondary must be deleted by a pass first: 409 until then."""
    state = read_state(region, workspace_id)
    if state is not None and state.secondary_region != secondary:
        raise ApiError(409, "dr_copy_being_deleted",
                       f"The previous disaster-recovery copy in {state.secondary_region} is still being deleted; "
                       "try again after the next replication pass (at most 5 minutes).")
    if state is None:
        replication_states(region)(workspace_id, secondary_region=secondary, enabled_at=clock.now()).save()


def status(ws: WorkspaceAttrs) -> dict[str, Any]:
    """The workspace read model's DR fields: the secondary region, the checkpoint time and the lag (seconds
    of writes not yet known to be in the copy: since the checkpoint, or since DR was turned on)."""
    out: dict[str, Any] = {"replication_secondary_region": None, "last_replicated_at": None,
                           "replication_lag_seconds": None}
    if ws.replication != DR:
        return out
    state = read_state(ws.region, ws.id)
    out["replication_secondary_region"] = state.secondary_region if state else default_secondary(ws.residency)
    if state is None:
        return out
    since = state.checkpoint_at if state.checkpoint_at is not None else state.enabled_at
    out["last_replicated_at"] = clock.iso(state.checkpoint_at) if state.checkpoint_at is not None else None
    out["replication_lag_seconds"] = max(0, int(clock.now() - since))
    return out


def lag_over_rpo(ws: WorkspaceAttrs) -> bool:
    lag = status(ws)["replication_lag_seconds"]
    return lag is not None and lag > RPO_SECONDS
