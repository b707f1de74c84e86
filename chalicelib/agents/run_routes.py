"""Run routes at {base_url}/v1/agents/{agent_id}/runs: start (202), list, read, cancel, delete, and the
run's event stream (server-sent events, resumable with ``Last-Event-ID``).

The event stream is answered as one buffered ``text/event-stream`` body (Lambda behind API Gateway
cannot hold a response open): it holds every event after ``Last-Event-ID`` (or ``?after=``), waits up to
``wait`` seconds (0..20) for the first new one, and, while the run is active, starts with a ``retry``
line so an EventSource reconnects and resumes where it stopped.
"""
from __future__ import annotations

import time
from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.agents import events, runs
from chalicelib.agents.models import TERMINAL_STATUSES
from chalicelib.core.http import paging
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.errors import validation_error
from chalicelib.core.http.streaming import parse_last_event_id
from chalicelib.core.http.validation import query_int
from chalicelib.core.store import idempotency

api = Api("platform")
MAX_WAIT_S = 20
POLL_S = 0.25


@api.route("/v1/agents/{agent_id}/runs", ["POST"], permission="agents.run")
def start_run(ctx: Ctx, agent_id: str) -> Any:
    status, run, replayed = runs.start(ctx.scope, agent_id, ctx.json(required=False),
                                       idempotency_key=ctx.header(idempotency.HEADER), caller=ctx.caller)
    return json_response(run, status, {"Location": f"/v1/agents/{agent_id}/runs/{run['id']}",
                                       **({"Idempotent-Replayed": "true"} if replayed else {})})


@api.route("/v1/agents/{agent_id}/runs", permission="agents.read")
def list_runs(ctx: Ctx, agent_id: str) -> Any:
    return runs.list_runs(ctx.scope, agent_id, ctx.query)


@api.route("/v1/agents/{agent_id}/runs/{run_id}", permission="agents.read")
def get_run(ctx: Ctx, agent_id: str, run_id: str) -> Any:
    paging.check_params(ctx.query, ())
    return runs.view(ctx.scope, runs.load(ctx.scope, agent_id, run_id), with_steps=True)


@api.route("/v1/agents/{agent_id}/runs/{run_id}", ["DELETE"], permission="agents.run")
def delete_run(ctx: Ctx, agent_id: str, run_id: str) -> Any:
    runs.delete(ctx.scope, agent_id, run_id, caller=ctx.caller)
    return Response(body="", status_code=204, headers={"Cache-Control": "no-store"})


@api.route("/v1/agents/{agent_id}/runs/{run_id}/cancel", ["POST"], permission="agents.run")
def cancel_run(ctx: Ctx, agent_id: str, run_id: str) -> Any:
    status, run = runs.cancel(ctx.scope, agent_id, run_id, caller=ctx.caller)
    return json_response(run, status)


@api.route("/v1/agents/{agent_id}/runs/{run_id}/events", permission="agents.read")
def run_events(ctx: Ctx, agent_id: str, run_id: str) -> Any:
    paging.check_params(ctx.query, ("after", "wait"))
    run = runs.load(ctx.scope, agent_id, run_id)
    last = parse_last_event_id(ctx.header("last-event-id") or ctx.query.get("after") or None)  # empty: from the start
    if last is None:
        raise validation_error([{"field": "Last-Event-ID", "message": "must be an event id (a sequence number)"}])
    wait = query_int(ctx.query, "wait", 0, minimum=0, maximum=MAX_WAIT_S)
    region = ctx.scope.home
    deadline = time.monotonic() + wait
    while True:
        found = events.after(region, run.workspace_id, run.id, last)
        final = run.status in TERMINAL_STATUSES
        if found or final or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
        run.refresh(consistent_read=True)
    if found and not final:
        run.refresh(consistent_read=True)
        final = run.status in TERMINAL_STATUSES and found[-1]["type"] == f"run.{run.status}"
    return Response(body=events.sse(found, final=final), status_code=200,
                    headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store"})
