"""The agent-run worker: ``handle`` receives Lambda-shaped SQS events from the ``agent-runs`` queue (the
Lambda handler in ``app.py`` and ``make run``'s worker loop both call it).

One message = one run. A delivery:
1. reads the run; a finished run is acknowledged (after recording its finish if a crash cut that short);
   a cancel request or a passed deadline finishes it as ``cancelled`` / ``expired``;
2. claims it (``lifecycle.claim``: conditional, bumps the fencing ``attempt``, takes a lease that the
   same SQS message may take over at once, since SQS only redelivers a message whose holder let it go);
3. runs the steps. Before each step it heartbeats (renewing the lease and re-reading the run, so a
   cancel request or the deadline stops it before the next step). Each step is a ledger item written with
   conditional writes: a completed step is never executed again (its stored output is reused), and its
   completion is written in one transaction with a check that this delivery still holds the run;
4. writes the final answer and finishes the run (``lifecycle.finish``).

A message that cannot be parsed, or whose processing keeps raising, is returned to the queue until its
``maxReceiveCount`` sends it to the dead-letter queue; on that last delivery the run is marked ``failed``
with the reason. Tools act as the user who started the run (``tools.py``).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pynamodb.exceptions import PutError, TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.agents import events, models, templates, tools
from chalicelib.agents.models import CANCELLED, COMPLETED, EXPIRED, FAILED, TERMINAL_STATUSES
from chalicelib.agents.runtime import answering, lifecycle
from chalicelib.agents.runtime.errors import StepFailed
from chalicelib.core import clock, tenancy
from chalicelib.core.authz import Principal
from chalicelib.core.http.errors import ApiError
from chalicelib.core.logs import get_logger
from chalicelib.core.store import queues
from chalicelib.core.store import tables as core_models

log = get_logger("agents.worker")
QUEUE = "agent-runs"
BUSY_RETRY_S = 10
MAX_OUTPUT_CHARS = 64 * 1024

AfterStep = Callable[[int], None]


class Stop(Exception):
    """End this delivery: the run was finished (by us or someone else) or superseded."""


@dataclass
class RunState:
    """What one delivery knows while it works on a run."""

    region: str
    run: models.RunAttrs
    attempt: int
    agent: dict[str, Any]
    run_input: dict[str, Any]
    ctx: tools.ToolContext
    outputs: dict[str, Any] = field(default_factory=dict)  # step name -> output
    steps_done: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {"steps": 0, "tool_calls": 0, "input_tokens": 0,
                                                             "output_tokens": 0})
    last_event: int | None = None  # the last event sequence number this delivery wrote

    def event(self, type_: str, data: dict[str, Any]) -> None:
        self.last_event = events.append(self.region, self.run.workspace_id, self.run.id, type_, data,
                                        self.run.expires_at, after=self.last_event)


def handle(event: dict[str, Any], *, after_step: AfterStep | None = None) -> dict[str, Any]:
    """Lambda SQS handler with partial batch failures. ``after_step`` (tests) is called after each step."""
    return queues.handle_batch(event, lambda record: _handle_record(record, after_step), what="agent run")


def _handle_record(record: dict[str, Any], after_step: AfterStep | None) -> bool:
    body = queues.parse_body(record, workspace_id="ws", run_id="run", agent_id="agt")
    if body is None:
        log.error("poison agent-run message (unparseable)", extra={"message_id": record.get("messageId")})
        return False  # redelivered until maxReceiveCount, then the dead-letter queue
    try:
        region = tenancy.region_of(body["workspace_id"])
    except ApiError:
        log.error("agent-run message for an unknown workspace", extra={"message_id": record.get("messageId")})
        return False
    receives = queues.receive_count(record)
    delivery = str(record.get("messageId") or "local")
    try:
        outcome = execute(body["workspace_id"], body["run_id"], delivery, after_step=after_step)
    except Exception as err:  # noqa: BLE001 - a poison run: retried, then failed and dead-lettered
        log.exception("agent run attempt failed", extra={"run_id": body["run_id"], "receive": receives})
        if receives >= queues.max_receives(QUEUE, region):
            fail_run(region, body["workspace_id"], body["run_id"], "poison_message",
                     f"The run could not be processed after {receives} deliveries ({type(err).__name__}); "
                     "its message was moved to the dead-letter queue.")
        return False
    if outcome == "busy":
        queues.retry_later(QUEUE, region, record, BUSY_RETRY_S)
        return False
    return True


def fail_run(region: str, workspace_id: str, run_id: str, code: str, message: str) -> None:
    cls = models.runs(region)
    try:
        run = cls.get(workspace_id, run_id, consistent_read=True)
    except cls.DoesNotExist:
        return
    lifecycle.finish(run, FAILED, error={"code": code, "message": message})


def starting_principal(run: models.RunAttrs) -> Principal | None:
    """The user who started the run, with the role their membership has *now* (None if they left)."""
    m = tenancy.membership(run.workspace_id, run.user_id)
    if m is None:
        return None
    return Principal(user_id=run.user_id, workspace_id=run.workspace_id, roles=(m.role,), email=run.user_email,
                     amr=("agent_run",), token_id=run.id, membership=m)


def execute(workspace_id: str, run_id: str, delivery_id: str, *, after_step: AfterStep | None = None) -> str:
    """Work on one run (see the module docstring): ``done`` or ``busy``."""
    region = tenancy.region_of(workspace_id)
    cls = models.runs(region)
    try:
        run = cls.get(workspace_id, run_id, consistent_read=True)
    except cls.DoesNotExist:
        return "done"  # deleted meanwhile
    if run.status in TERMINAL_STATUSES:
        lifecycle.record_finish(region, run)
        return "done"
    if run.cancel_requested_at:
        lifecycle.finish(run, CANCELLED, error={"code": "cancelled", "message": "Cancelled on request."})
        return "done"
    if clock.now() >= int(run.deadline_at):
        lifecycle.finish(run, EXPIRED, error={"code": "deadline_exceeded", "message": "The run's deadline passed."})
        return "done"
    was_queued = run.status == models.QUEUED
    try:
        attempt = lifecycle.claim(run, delivery_id)
    except lifecycle.LeaseHeld:
        return "busy"
    except lifecycle.Superseded:
        return "done"
    principal = starting_principal(run)
    if principal is None or not principal.can("agents.run"):
        lifecycle.finish(run, FAILED, attempt=attempt, error={
            "code": "starter_not_allowed", "message": "The user who started the run may no longer run agents here."})
        return "done"
    state = RunState(region, run, attempt, json.loads(run.agent), json.loads(run.input),
                     tools.ToolContext(principal, region, run.agent_id, run.id))
    if was_queued:
        state.event("run.started", {"status": models.IN_PROGRESS})
    try:
        answer = answering.run_agent(state, StepRunner(state, after_step))
        output = {**answer.pop("output")}
        state.usage["input_tokens"] += int(answer.get("input_tokens", 0))
        state.usage["output_tokens"] += int(answer.get("output_tokens", 0))
        lifecycle.finish(run, COMPLETED, attempt=attempt, output=output, usage=state.usage, read=sorted(state.ctx.read))
    except Stop:
        pass
    except StepFailed as failed:
        lifecycle.finish(run, FAILED, attempt=attempt, error=failed.error, usage=state.usage,
                         read=sorted(state.ctx.read))
    return "done"


class StepRunner:
    """Runs the steps of one delivery through the ledger (see the module docstring)."""

    def __init__(self, state: RunState, after_step: AfterStep | None) -> None:
        self.state = state
        self.after_step = after_step
        self.index = 0

    def checkpoint(self) -> None:
        """Before a step: heartbeat, then stop for a cancel request or a passed deadline."""
        s = self.state
        try:
            lifecycle.heartbeat(s.run, s.attempt)
        except lifecycle.Superseded:
            raise Stop() from None
        if s.run.cancel_requested_at:
            lifecycle.finish(s.run, CANCELLED, attempt=s.attempt, usage=s.usage, read=sorted(s.ctx.read),
                             error={"code": "cancelled", "message": "Cancelled on request before step "
                                                                    f"{self.index + 1}."})
            raise Stop()
        if clock.now() >= int(s.run.deadline_at):
            lifecycle.finish(s.run, EXPIRED, attempt=s.attempt, usage=s.usage, read=sorted(s.ctx.read),
                             error={"code": "deadline_exceeded", "message": "The run's deadline passed."})
            raise Stop()
        limit = int(s.agent["limits"]["max_steps"])
        if self.index >= limit:
            raise StepFailed("max_steps_exceeded", f"The run needed more than {limit} steps.")

    def run(self, name: str, tool: str, raw_input: Any) -> Any:
        """Execute (or replay from the ledger) the next step; returns its output."""
        s = self.state
        self.checkpoint()
        index = self.index
        self.index += 1
        refused: dict[str, str] | None = None
        args: Any = raw_input if isinstance(raw_input, dict) else {}
        if tool not in s.agent["tools"]:
            refused = {"code": "tool_not_allowed", "message": f"The agent may not use {tool}."}
        else:
            try:
                args = templates.render(raw_input, {"input": s.run_input,
                                                    "steps": {k: {"output": v} for k, v in s.outputs.items()}})
            except templates.MissingValue as missing:
                refused = {"code": "template_value_missing",
                           "message": f"Step '{name}' names a missing value: {missing.ref}."}
        item, prior = self._claim(index, name, tool, args)
        if prior is not None:
            if prior.status == "completed":  # done by an earlier delivery: never again
                output = json.loads(prior.output) if prior.output else None
                s.ctx.read.update(json.loads(prior.datasets or "[]"))
                self._account(prior.name, output)
                return output
            if prior.status == "failed":
                err = json.loads(prior.error or "{}")
                raise StepFailed(err.get("code", "step_failed"), err.get("message", "A step failed."))
            item = self._take_over(prior, args)  # started by a delivery that died mid-step
        if refused is not None:
            self._record_finished(item, output=None, error=refused, duration_ms=0, read=[])
            s.event("step.failed", {"index": index, "name": name, "tool": tool, "error": refused})
            raise StepFailed(refused["code"], refused["message"])
        s.event("step.started", {"index": index, "name": name, "tool": tool})
        t0 = time.perf_counter()
        before = set(s.ctx.read)
        try:
            output = tools.call(tool, s.ctx, args)
            error = None
        except tools.ToolError as err:
            output, error = None, {"code": err.code, "message": err.message}
        except ApiError as err:  # a 4xx of the tool's input check
            output, error = None, {"code": err.code, "message": err.detail}
        text = json.dumps(output, default=str) if output is not None else None
        if text is not None and len(text) > MAX_OUTPUT_CHARS:
            output, text, error = None, None, {"code": "output_too_large",
                                               "message": f"The tool's output exceeds {MAX_OUTPUT_CHARS} characters."}
        duration = round((time.perf_counter() - t0) * 1000, 2)
        read = sorted(s.ctx.read - before)
        self._record_finished(item, output=text, error=error, duration_ms=duration, read=read)
        s.event("step.failed" if error else "step.completed",
                {"index": index, "name": name, "tool": tool, "duration_ms": duration, **({"error": error} if error else {})})
        s.usage["tool_calls"] += 1
        if error is not None:
            raise StepFailed(error["code"], f"Step '{name}' ({tool}) failed: {error['message']}")
        self._account(name, output)
        if self.after_step is not None:
            self.after_step(index)
        return output

    def _account(self, name: str, output: Any) -> None:
        self.state.outputs[name] = output
        self.state.steps_done.append({"name": name, "output": output})
        self.state.usage["steps"] = self.index

    def _claim(self, index: int, name: str, tool: str, args: Any) -> tuple[models.StepAttrs, models.StepAttrs | None]:
        """Write the step as ``started`` (conditional put); when it exists, return the recorded one too."""
        s = self.state
        cls = models.steps(s.region)
        item = cls(models.run_key(s.run.workspace_id, s.run.id), models.step_sk(index), index=index, name=name,
                   tool=tool, status="started", input=json.dumps(args, default=str), attempt=s.attempt,
                   executions=1, started_at=clock.iso(), expires_at=s.run.expires_at)
        try:
            item.save(condition=models.StepAttrs.sk.does_not_exist())
            return item, None
        except PutError:
            return item, cls.get(item.run_key, item.sk, consistent_read=True)

    def _take_over(self, prior: models.StepAttrs, args: Any) -> models.StepAttrs:
        """A step an earlier attempt started but never finished: this attempt runs it (once more)."""
        S = models.StepAttrs
        try:
            prior.update(actions=[S.attempt.set(self.state.attempt), S.executions.add(1), S.started_at.set(clock.iso()),
                                  S.input.set(json.dumps(args, default=str))],
                         condition=(S.status == "started") & (S.attempt < self.state.attempt))
        except Exception:  # noqa: BLE001 - a concurrent delivery took it
            raise Stop() from None
        return prior

    def _record_finished(self, item: models.StepAttrs, *, output: str | None, error: dict[str, str] | None,
                         duration_ms: float, read: list[str]) -> None:
        """Completion in one transaction with the check that this delivery still holds the run."""
        s = self.state
        S, R = models.StepAttrs, models.RunAttrs
        actions = [S.status.set("failed" if error else "completed"), S.finished_at.set(clock.iso()),
                   S.duration_ms.set(duration_ms), S.datasets.set(json.dumps(read))]
        if output is not None:
            actions.append(S.output.set(output))
        if error is not None:
            actions.append(S.error.set(json.dumps(error)))
        try:
            with TransactWrite(connection=core_models.connection(s.region)) as tx:
                tx.condition_check(models.runs(s.region), s.run.workspace_id, s.run.id,
                                   condition=(R.attempt == s.attempt) & (R.status == models.IN_PROGRESS))
                tx.update(item, actions=actions, condition=(S.status == "started") & (S.attempt == s.attempt))
        except TransactWriteError:
            raise Stop() from None  # superseded or finished elsewhere: this delivery's result is dropped
