"""OpenLineage run events (START, then COMPLETE or FAIL) for syncs, queries, chat answers, agent runs and MCP
tool calls, built with ``openlineage-python`` and sent to the endpoint of the workspace's own region.

Endpoints are deployment settings, one per region: ``OPENLINEAGE_URL_<REGION>`` (``OPENLINEAGE_URL_EU_CENTRAL_1``)
names a region's endpoint, and ``OPENLINEAGE_URL`` the global region's (us-east-1) only: a process inherits
its environment (``make run`` starts each region's process with the same one), so a plain setting never
reaches another region. An event goes only to the endpoint of its workspace's region, so an EU workspace's
events never reach a US endpoint. Without any endpoint nothing is built.

Sending never fails or holds up the work: events are posted by one background thread (through the outbound
guard, ``core.http.outbound``, with a 3-second budget); a failure is logged and dropped. A Lambda function
waits for what is pending at the end of its invocation (``drain``), bounded by the same budget.
"""
from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.http import outbound
from chalicelib.core.logs import get_logger

log = get_logger("telemetry.openlineage")
PRODUCER = "https://github.com/aiplatform/aiplatform"
MASKED_FACET = "aiplat_maskedColumns"
MASKED_FACET_SCHEMA = "https://aiplatform.example/spec/facets/1-0-0/MaskedColumnsDatasetFacet.json"
SEND_BUDGET_S = 3.0
_ENV = "OPENLINEAGE_URL"
_lock = threading.Lock()
_pending: list[Future[None]] = []
_executor: list[ThreadPoolExecutor] = []


@dataclass(frozen=True)
class Node:
    """One input or output of a run: a dataset, a connector, or what the run produced (an answer)."""

    kind: str  # dataset | connector | query | chat_answer | agent_run | mcp_tool_call
    id: str
    name: str = ""
    columns: tuple[str, ...] = ()  # known columns (column lineage of an identity copy)
    masked: tuple[str, ...] = ()  # columns under a MASK policy


@dataclass
class RunInfo:
    """One run as its events describe it."""

    workspace_id: str
    region: str
    job: str  # sync | query | chat_answer | agent_run | mcp_tool_call
    run_key: str  # the platform's id of the run: its OpenLineage runId is derived from it
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    started_at: str = ""
    error: str | None = None


# --- configuration --------------------------------------------------------------------------------------

def configured() -> bool:
    """Whether any endpoint is configured at all (the cheap check before anything is built)."""
    return bool(settings().openlineage_urls)


def endpoint_for(region: str) -> str | None:
    """The endpoint of ``region``'s events, or None: only that region's own setting applies."""
    urls = dict(settings().openlineage_urls)
    own = urls.get(f"{_ENV}_{region.upper().replace('-', '_')}")
    if own:
        return own
    return urls.get(_ENV) if region == settings().global_region else None


# --- events ---------------------------------------------------------------------------------------------

def run_id(run_key: str) -> str:
    """The OpenLineage runId (a UUID) of a platform run id: the same for its START and its COMPLETE."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"aiplat:run:{run_key}"))


def namespace(info: RunInfo) -> str:
    return f"aiplat://{info.region}/{info.workspace_id}"


def _masked_facet_class() -> Any:
    import attr
    from openlineage.client.generated.base import DatasetFacet

    @attr.define
    class MaskedColumnsDatasetFacet(DatasetFacet):
        """The columns of the dataset whose values are masked (a MASK field policy)."""

        columns: list[str] = attr.field(factory=list)

        @staticmethod
        def _get_schema() -> str:
            return MASKED_FACET_SCHEMA

    return MaskedColumnsDatasetFacet


def _facets(info: RunInfo, node: Node, sources: list[Node]) -> dict[str, Any]:
    from openlineage.client.generated import column_lineage_dataset as col

    facets: dict[str, Any] = {}
    if node.masked:
        facets[MASKED_FACET] = _masked_facet_class()(columns=list(node.masked), producer=PRODUCER)
    if node.columns and sources:  # an identity copy of each source column (a sync's connector -> dataset)
        ns = namespace(info)
        facets["columnLineage"] = col.ColumnLineageDatasetFacet(producer=PRODUCER, fields={
            c: col.Fields(inputFields=[col.InputField(ns, f"{s.kind}/{s.id}", c) for s in sources],
                          transformationType="IDENTITY", transformationDescription="copied by a sync")
            for c in node.columns})
    return facets


def build(info: RunInfo, event_type: str, event_time: str | None = None) -> Any:
    """The ``RunEvent`` of ``info`` (openlineage-python's classes, which check the spec's formats)."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import error_message_run, job_type_job

    ns = namespace(info)
    run_facets: dict[str, Any] = {}
    if info.error and event_type == "FAIL":
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=info.error[:500], programmingLanguage="python", producer=PRODUCER)
    job_facets: dict[str, Any] = {"jobType": job_type_job.JobTypeJobFacet(processingType="BATCH" if info.job == "sync" else "STREAMING",
                                                          integration="AIPLAT", jobType=info.job.upper(),
                                                          producer=PRODUCER)}
    return RunEvent(
        eventType=getattr(RunState, event_type), eventTime=event_time or clock.iso(), producer=PRODUCER,
        run=Run(runId=run_id(info.run_key), facets=run_facets),
        job=Job(namespace=ns, name=info.job, facets=job_facets),
        inputs=[InputDataset(ns, f"{n.kind}/{n.id}", facets=_facets(info, n, [])) for n in info.inputs],
        outputs=[OutputDataset(ns, f"{n.kind}/{n.id}", facets=_facets(info, n, info.inputs)) for n in info.outputs])


def as_json(event: Any) -> str:
    from openlineage.client.serde import Serde

    return str(Serde.to_json(event))


# --- emission -------------------------------------------------------------------------------------------

def emit(info: RunInfo, *, failed: bool = False) -> None:
    """Send the run's START and its COMPLETE (or FAIL) to its region's endpoint; never raises."""
    url = endpoint_for(info.region) if configured() else None
    if not url:
        return
    try:
        now = clock.iso()
        bodies = [as_json(build(info, "START", info.started_at or now)),
                  as_json(build(info, "FAIL" if failed else "COMPLETE", now))]
    except Exception:  # noqa: BLE001 - lineage events never fail the work
        log.exception("openlineage event not built", extra={"job": info.job})
        return
    _submit(url, bodies)


def _submit(url: str, bodies: list[str]) -> None:
    with _lock:
        if not _executor:
            _executor.append(ThreadPoolExecutor(1, thread_name_prefix="openlineage"))
        _pending[:] = [f for f in _pending if not f.done()]
        _pending.append(_executor[0].submit(_post_all, url, bodies))


def _post_all(url: str, bodies: list[str]) -> None:
    for body in bodies:
        try:
            answer = outbound.request("POST", url, body=body.encode(), policy=outbound.TRUSTED,
                                      headers={"Content-Type": "application/json"},
                                      timeouts=outbound.Timeouts.within(SEND_BUDGET_S), max_bytes=64 * 1024)
            if answer.status >= 300:
                log.warning("openlineage endpoint refused an event", extra={"status": answer.status})
        except Exception as err:  # noqa: BLE001 - logged, never raised
            log.warning("openlineage event not sent", extra={"error": type(err).__name__})
            return


def drain(timeout: float = SEND_BUDGET_S) -> None:
    """Wait (at most ``timeout`` seconds) for the events still being sent: the end of a Lambda invocation."""
    with _lock:
        pending = [f for f in _pending if not f.done()]
    if pending:
        wait_for(pending, timeout=timeout)


def nodes(kind: str, ids: Iterable[str]) -> list[Node]:
    return [Node(kind, i) for i in ids]
