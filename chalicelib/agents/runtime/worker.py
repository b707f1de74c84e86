"""The agent-run worker: ``handle`` receives Lambda-shaped SQS events from the ``agent-runs`` queue (the
Lambda handler in ``app.py`` and ``make run``'s worker loop both call it).

One message = one run. A delivery:
1. reads the run; a finished run is acknowledged (after recording its finish if that was cut short);
   a cancel request or a passed deadline finishes it as ``cancelled`` / ``expired``;
2. claims it (``lifecycle.claim``: conditional, bumps the fencing ``attempt``, takes a lease that the
   same SQS message may take over at once, since SQS only redelivers a message whose holder let it go).
   A run that was already started (a resume: its worker died) reads its log once: the steps already
   in the ledger and the last event number;
3. runs the steps. The lease is renewed on a timer (``HEARTBEAT_EVERY_S``), not per step; the deadline
   is checked against the clock before each step. A step already in the ledger is never executed again
   (its stored output is reused). A new step is recorded when it finishes: ONE transaction holds the
   ledger item, its events and a check that this delivery still holds the run and no cancel was
   asked for, so a superseded delivery records nothing and a cancel stops the run at the next step
   boundary (the step in flight is discarded unrecorded);
4. writes the final answer and finishes the run (``lifecycle.finish``: one transaction).

A worker that dies (crash, out of memory, timeout) stops renewing its lease; the reaper then sends the
run again and the next delivery resumes it from its ledger (``reaper.py``, ``core/store/work_timing.py``).
A message that cannot be parsed, or whose processing keeps raising, is returned to the queue until its
``maxReceiveCount`` sends it to the dead-letter queue; on that last delivery the run is marked ``failed``
with the reason. Tools act as the user who started the run (``tools.py``), limited to the agent's datasets
when its definition names some (the principal's dataset scope).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chalicelib.agents import events, labels, models, templates, tools
from chalicelib.agents.models import CANCELLED, COMPLETED, EXPIRED, FAILED, TERMINAL_STATUSES
from chalicelib.agents.runtime import answering, lifecycle
from chalicelib.agents.runtime.errors import StepFailed
from chalicelib.core import clock, tenancy
from chalicelib.core.authz import Principal
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.logs import get_logger
from chalicelib.core.store import queues, scope_versions
from chalicelib.core.store.transact import Conflict, Refused, Tx
from chalicelib.core.store.work_timing import HEARTBEAT_EVERY_S
from chalicelib.gateway.catalog import service as catalog

log = get_logger("agents.worker")
QUEUE = "agent-runs"
BUSY_RETRY_S = 10
MAX_OUTPUT_CHARS = 64 * 1024
STEP_COMMIT_ATTEMPTS = 5
# events, the run's error and its audit event carry no label checks: once a run has read something, a
# step's error message (which may echo its input) is only on the step, shown as its labels allow
TAINTED_EVENT = "The run had read data by then: the step holds the message, shown to readers its labels allow."

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
    log: events.RunLog | None = None  # events go out in this delivery's transactions
    ledger: dict[int, models.StepAttrs] = field(default_factory=dict)  # steps recorded by earlier deliveries
    heartbeat_at: float = 0.0


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
        # the steps of one delivery read the catalog version once per the knowledge search's bound
        # one delivery is one unit of work: the workspace's scope version item is read once for it
        with catalog.one_version_within(settings().knowledge_cache_seconds), scope_versions.unit():
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
    """The user who started the run, with the role their membership has *now* (None if they left),
    limited to the agent's datasets when the definition the run was started with names some."""
    return tenancy.acting_member(run.workspace_id, run.user_id, email=run.user_email or "", amr="agent_run",
                                 token_id=run.id, datasets=tools.dataset_scope(json.loads(run.agent)))


def execute(workspace_id: str, run_id: str, delivery_id: str, *, after_step: AfterStep | None = None) -> str:
    """Work on one run (see the module docstring): ``done`` or ``busy``."""
    region = tenancy.region_of(workspace_id)
    cls = models.runs(region)
    try:
        run = cls.get(workspace_id, run_id, consistent_read=True)
    except cls.DoesNotExist:
        return "done"  # deleted meanwhile
    tenancy.begin_work(workspace_id, run.user_id)  # the delivery's scope and the starter's membership: one read
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
    ctx = tools.ToolContext(principal, region, run.agent_id, run.id, workspace=tenancy.get_workspace(workspace_id))
    state = RunState(region, run, attempt, json.loads(run.agent), json.loads(run.input), ctx, heartbeat_at=clock.now())
    if was_queued:  # a first delivery: the log holds only run.queued
        state.log = events.RunLog(region, workspace_id, run_id, run.expires_at, 1)
        state.log.add("run.started", {"status": models.IN_PROGRESS})
    else:  # a resume: what the ledger holds and the last event number
        state.log, state.ledger = _read_log(region, run)
        if state.log.last == 1:  # the lost delivery died before its first commit
            state.log.add("run.started", {"status": models.IN_PROGRESS})
    try:
        answer = answering.run_agent(state, StepRunner(state, after_step))
        output = {**answer.pop("output")}
        state.usage["input_tokens"] += int(answer.get("input_tokens", 0))
        state.usage["output_tokens"] += int(answer.get("output_tokens", 0))
        lifecycle.finish(run, COMPLETED, attempt=attempt, output=output, usage=state.usage, read=sorted(state.ctx.read),
                         labels=state.ctx.labels, log_=state.log)
    except Stop:
        pass
    except StepFailed as failed:
        lifecycle.finish(run, FAILED, attempt=attempt, error=failed.error, usage=state.usage,
                         read=sorted(state.ctx.read), labels=state.ctx.labels, log_=state.log)
    return "done"


def _read_log(region: str, run: models.RunAttrs) -> tuple[events.RunLog, dict[int, models.StepAttrs]]:
    cls = models.steps(region)
    key = models.run_key(run.workspace_id, run.id)
    ledger = {int(step.index): step
              for step in cls.query(key, cls.sk.startswith(models.STEP_PREFIX), consistent_read=True)}
    return events.RunLog(region, run.workspace_id, run.id, run.expires_at, None), ledger



class StepRunner:
    """Runs the steps of one delivery through the ledger (see the module docstring)."""

    def __init__(self, state: RunState, after_step: AfterStep | None) -> None:
        self.state = state
        self.after_step = after_step
        self.index = 0

    def checkpoint(self) -> None:
        """Before a step: renew the lease when it is due, then stop for a cancel request or a passed
        deadline."""
        s = self.state
        if clock.now() - s.heartbeat_at >= HEARTBEAT_EVERY_S:
            try:
                lifecycle.heartbeat(s.run, s.attempt)
            except lifecycle.Superseded:
                raise Stop() from None
            s.heartbeat_at = clock.now()
        if s.run.cancel_requested_at:
            self._cancelled()
        if clock.now() >= int(s.run.deadline_at):
            lifecycle.finish(s.run, EXPIRED, attempt=s.attempt, usage=s.usage, read=sorted(s.ctx.read),
                             labels=s.ctx.labels,
                             error={"code": "deadline_exceeded", "message": "The run's deadline passed."}, log_=s.log)
            raise Stop()
        limit = int(s.agent["limits"]["max_steps"])
        if self.index >= limit:
            raise StepFailed("max_steps_exceeded", f"The run needed more than {limit} steps.")

    def _cancelled(self, index: int | None = None) -> None:
        """Finish the run ``cancelled`` before the step at ``index`` (0-based; the next one by default):
        a step discarded at its commit was never recorded, so the run stopped before it."""
        s = self.state
        number = (self.index if index is None else index) + 1
        lifecycle.finish(s.run, CANCELLED, attempt=s.attempt, usage=s.usage, read=sorted(s.ctx.read),
                         labels=s.ctx.labels, log_=s.log,
                         error={"code": "cancelled", "message": f"Cancelled on request before step {number}."})
        raise Stop()

    def run(self, name: str, tool: str, raw_input: Any, *, render: bool = True,
            refuse: dict[str, str] | None = None) -> Any:
        """Execute (or replay from the ledger) the next step; returns its output. ``render``: fill in
        templates (declared plans; a model's own calls are taken literally); ``refuse``: record the step as
        refused with this error instead of running it (the model loop's guard)."""
        s = self.state
        self.checkpoint()
        index = self.index
        self.index += 1
        prior = s.ledger.get(index)
        if prior is not None and prior.status == "completed":  # done by an earlier delivery: never again
            output = json.loads(prior.output) if prior.output else None
            s.ctx.read.update(json.loads(prior.datasets or "[]"))
            s.ctx.labels |= labels.loads(prior.labels)
            self._account(prior.name, output)
            return output
        if prior is not None and prior.status == "failed":
            err = json.loads(prior.error or "{}")
            code, told = err.get("code", "step_failed"), err.get("message", "A step failed.")
            s.ctx.labels |= labels.loads(prior.labels)
            raise StepFailed(code, told if not s.ctx.labels else f"Step '{prior.name}' ({prior.tool}) failed "
                             f"({code}); the step holds the details.", for_model=told)
        refused: dict[str, str] | None = None
        args: Any = raw_input if isinstance(raw_input, dict) else {}
        if tool not in s.agent["tools"]:
            refused = {"code": "tool_not_allowed", "message": f"The agent may not use {tool[:128]}."}
        elif refuse is not None:
            refused = refuse
        elif render:
            try:
                args = templates.render(raw_input, {"input": s.run_input,
                                                    "steps": {k: {"output": v} for k, v in s.outputs.items()}})
            except templates.MissingValue as missing:
                refused = {"code": "template_value_missing",
                           "message": f"Step '{name}' names a missing value: {missing.ref}."}
        started_at = clock.iso()
        if refused is not None:
            self._record(index, name, tool, args, started_at, output=None, error=refused, duration_ms=0, read=[])
            raise StepFailed(refused["code"], refused["message"])
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
        self._record(index, name, tool, args, started_at, output=text, error=error, duration_ms=duration, read=read)
        s.usage["tool_calls"] += 1  # counted once recorded: a step discarded by a cancel is not in the run
        if error is not None:  # a tool's message may echo its input: it stays on the (labelled) step once tainted
            told = f"Step '{name}' ({tool}) failed: {error['message']}"
            raise StepFailed(error["code"], told if not s.ctx.labels else
                             f"Step '{name}' ({tool}) failed ({error['code']}); the step holds the details.",
                             for_model=told)
        self._account(name, output)
        if self.after_step is not None:
            self.after_step(index)
        return output

    def _account(self, name: str, output: Any) -> None:
        self.state.outputs[name] = output
        self.state.steps_done.append({"name": name, "output": output})
        self.state.usage["steps"] = self.index

    def _record(self, index: int, name: str, tool: str, args: Any, started_at: str, *, output: str | None,
                error: dict[str, str] | None, duration_ms: float, read: list[str]) -> None:
        """The step's ledger item and events, in one transaction with the check that this delivery still
        holds the run and that no cancel was asked for (see the module docstring)."""
        s = self.state
        assert s.log is not None
        R, S = models.RunAttrs, models.StepAttrs
        step = models.steps(s.region)(
            models.run_key(s.run.workspace_id, s.run.id), models.step_sk(index), index=index, name=name, tool=tool,
            status="failed" if error else "completed", input=json.dumps(args, default=str), output=output,
            error=json.dumps(error) if error else None, attempt=s.attempt, executions=1, started_at=started_at,
            finished_at=clock.iso(), duration_ms=duration_ms, datasets=json.dumps(read),
            labels=labels.dumps(s.ctx.labels) if s.ctx.labels else None, expires_at=s.run.expires_at)
        shown = error if error is None or not s.ctx.labels else {"code": error["code"], "message": TAINTED_EVENT}
        s.log.add("step.failed" if error else "step.completed",
                  {"index": index, "name": name, "tool": tool, "duration_ms": duration_ms,
                   **({"error": shown} if shown else {})})
        for _ in range(STEP_COMMIT_ATTEMPTS):
            tx = Tx(s.region)
            tx.condition_check(models.runs(s.region), s.run.workspace_id, s.run.id, tag="fence",
                               condition=(R.attempt == s.attempt) & (R.status == models.IN_PROGRESS)
                               & R.cancel_requested_at.does_not_exist())
            tx.save(step, condition=S.sk.does_not_exist() | (S.status == "started"), tag="step")
            s.log.put_in(tx)
            try:
                tx.commit()
            except Refused as refused:
                if "fence" in refused.tags:
                    s.run.refresh(consistent_read=True)
                    if s.run.status == models.IN_PROGRESS and int(s.run.attempt) == s.attempt \
                            and s.run.cancel_requested_at:
                        s.log.pending = [e for e in s.log.pending if not e[0].startswith("step.")]
                        self._cancelled(index)
                    raise Stop() from None  # superseded or finished elsewhere: this result is dropped
                if "step" in refused.tags:
                    raise Stop() from None  # recorded by another delivery
                s.log.resync()  # the API added an event meanwhile
                continue
            except Conflict:
                continue
            s.log.committed()
            return
        raise Stop()
