"""OpenLineage run events from the points that record lineage (``lineage``, the sync worker): one run per
lineage target (a chat answer, an agent run, an MCP tool call, a day's query node) with the datasets it
read as inputs, each with the facet naming its columns under a MASK policy; one run per sync with the
connector as input and the dataset as output, with column lineage. Built and sent only when an endpoint
serves the workspace's region (``core.telemetry.openlineage``)."""
from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from chalicelib.core import clock
from chalicelib.core.logs import get_logger
from chalicelib.core.telemetry import openlineage
from chalicelib.core.telemetry.openlineage import Node, RunInfo
from chalicelib.gateway.catalog import service as catalog

log = get_logger("gateway.lineage_events")
F = TypeVar("F", bound=Callable[..., Any])
FAILED_STATUSES = frozenset({"failed", "expired", "cancelled"})


def _wanted(region: str) -> bool:
    """Whether an endpoint serves the workspace's region (else there is nothing to build)."""
    return openlineage.configured() and bool(openlineage.endpoint_for(region))


def dataset_node(region: str, workspace_id: str, dataset_id: str, *, with_columns: bool = False) -> Node:
    """A dataset as an input or output: its name, its columns under MASK (and all its columns)."""
    rec = catalog.snapshot(region, workspace_id).datasets.get(dataset_id)
    if rec is None:
        return Node("dataset", dataset_id)
    masked = tuple(str(f.get("name")) for f in rec.fields if str(f.get("policy") or "").upper() == "MASK")
    columns = tuple(str(f.get("name")) for f in rec.fields) if with_columns else ()
    return Node("dataset", dataset_id, rec.name, columns, masked)


def _source(region: str, workspace_id: str, kind: str, node_id: str) -> Node:
    return dataset_node(region, workspace_id, node_id) if kind == "dataset" else Node(kind, node_id)


def from_edges(region: str, workspace_id: str, edges: Iterable[tuple[str, str, str, str, dict[str, Any]]], *,
               each_time: bool = False) -> None:
    """One run per target of ``edges`` (``lineage.Edge``) of a workspace of ``region``; a run whose status says
    it failed is a FAIL. ``each_time``: the target is shared by many runs (a day's query node), so each call
    is a run of its own."""
    if not _wanted(region):
        return
    try:
        runs: dict[tuple[str, str], RunInfo] = {}
        failed: set[tuple[str, str]] = set()
        for s_type, s_id, t_type, t_id, details in edges:
            key = (t_type.lower(), t_id)
            run_key = f"{t_id}:{uuid.uuid4()}" if each_time else t_id
            info = runs.setdefault(key, RunInfo(workspace_id, region, key[0], run_key, outputs=[Node(*key)]))
            info.inputs.append(_source(region, workspace_id, s_type.lower(), s_id))
            if str((details or {}).get("status") or "").lower() in FAILED_STATUSES:
                failed.add(key)
                info.error = f"the run ended {details['status']}"
        for key, info in runs.items():
            openlineage.emit(info, failed=key in failed)
    except Exception:  # noqa: BLE001 - lineage events never fail the work
        log.exception("lineage events not emitted")


def _region(region_in: Callable[[str], str], workspace_id: str) -> str | None:
    """The workspace's region (``region_in``) when an endpoint serves it, else None (nothing to build)."""
    if not openlineage.configured():
        return None
    try:
        region = region_in(workspace_id)
    except Exception:  # noqa: BLE001 - lineage events never fail the work
        return None
    return region if openlineage.endpoint_for(region) else None


def sync_run(region_in: Callable[[str], str]) -> Callable[[F], F]:
    """Decorator of ``sync_worker.run_sync``: a finished sync's START and COMPLETE, or FAIL with its error.
    ``region_in``: the region of a workspace, as the worker that runs the sync resolves it."""
    def decorate(fn: F) -> F:
        return _sync_run(region_in, fn)
    return decorate


def _sync_run(region_in: Callable[[str], str], fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(workspace_id: str, sync_id: str, *args: Any, **kwargs: Any) -> Any:
        region = _region(region_in, workspace_id)
        if region is None:
            return fn(workspace_id, sync_id, *args, **kwargs)
        started = clock.iso()
        outcome = fn(workspace_id, sync_id, *args, **kwargs)
        failed = outcome.status == "failed" or outcome.detail.startswith("failed")
        if outcome.status == "busy" or (outcome.status == "done" and not outcome.detail.startswith("{")
                                        and not failed):
            return outcome  # nothing ran (paused, deleted, already finished): no run to report
        try:
            connector, dataset = kwargs.get("connector_id"), kwargs.get("dataset_id")
            info = RunInfo(workspace_id, region, "sync", sync_id, started_at=started, error=outcome.detail or None,
                           inputs=[Node("connector", connector)] if connector else [],
                           outputs=[dataset_node(region, workspace_id, dataset, with_columns=True)] if dataset else [])
            openlineage.emit(info, failed=failed)
        except Exception:  # noqa: BLE001 - lineage events never fail the work
            log.exception("sync lineage events not emitted")
        return outcome

    return cast(F, wrapper)
