"""Runs as the API sees them: start (202, ``queued``, one SQS message), read, list, cancel, delete.

A run is visible to the user who started it and to the workspace's Admins; anyone else (another
Member, a Viewer, another workspace) gets 404, because a run's steps and answer hold what *its* user's
ACL let it read. Starting is idempotent per ``Idempotency-Key``. Cancel is cooperative: a queued run is
cancelled at once; an in-progress run is marked and its worker stops before its next step. Both write
the ``agent_run.cancelled`` audit event once, with the starting request's correlation ID.

Every view of a run is made for one reader (``view(scope, run)``: the scope's caller): a step whose labels
(what the run had read once it ran, ``labels.py``) the reader's live rights do not satisfy shows neither its
input nor its output, and the run's answer is shown only to a reader who satisfies the labels of everything the run read
(``withheld`` says so). Starting again with the same ``Idempotency-Key``, listing, cancelling and reading
all answer through it, so a narrowed ACL applies to what was stored before.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.agents import definitions, events, labels, models, run_redaction, templates
from chalicelib.agents.models import ACTIVE_MARK, CANCELLED, IN_PROGRESS, QUEUED, RUN_STATUSES, TERMINAL_STATUSES
from chalicelib.agents.runtime import lifecycle
from chalicelib.agents.runtime.lifecycle import starting_caller
from chalicelib.core import audit, clock, correlation, durations
from chalicelib.core.authz import Principal, Role
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, conflict, not_found, validation_error
from chalicelib.core.http.validation import F, validate
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.store import idempotency, queues
from chalicelib.core.store.transact import Refused, Tx
from chalicelib.core.tenancy import RequestScope
from chalicelib.core.workspace_settings import AGENT_RUN_AUTO_EXPIRY, auto_expiry_seconds
from chalicelib.gateway.catalog import lineage
from chalicelib.llm import budget

log = get_logger("agents.runs")
QUEUE = "agent-runs"
MESSAGE_VERSION = 1
MAX_INPUT_BYTES = 32 * 1024
RUN_FIELDS = {"input": F(dict), "agent_version": F(int, minimum=1)}


def check_input(agent: dict[str, Any], body: Any) -> dict[str, Any]:
    """The run's ``input`` object, or a 4xx: a non-object, an oversized one, one missing a value the
    declared plan names, or (409) an ``agent_version`` the caller saw that is no longer the agent's."""
    body = validate(body, RUN_FIELDS)
    seen = body.get("agent_version")
    if seen is not None and seen != agent["version"]:
        editor = agent["updated_by"]["email"] or "another member"
        raise conflict("agent_changed", f"This agent was changed by {editor} at {agent['updated_at']} (version "
                       f"{agent['version']}; you saw version {seen}). Review it, then run it again.")
    run_input = body.get("input", {})
    if len(json.dumps(run_input)) > MAX_INPUT_BYTES:
        raise ApiError(413, "input_too_large", f"'input' may hold at most {MAX_INPUT_BYTES} bytes of JSON.")
    if agent.get("plan"):
        missing = templates.check_inputs(agent["plan"], run_input)
        if missing:
            raise ApiError(400, "missing_input", "The agent's plan needs values the input does not hold: "
                           + ", ".join(e["field"] for e in missing) + ".", errors=missing)
    return run_input


def start(scope: RequestScope, agent_id: str, body: Any, *, idempotency_key: str | None,
          caller: Any) -> tuple[int, dict[str, Any], bool]:
    """Queue a run; ``(status, run, replayed)``."""
    principal = scope.principal
    item = definitions.get_item(scope, agent_id)
    agent = definitions.to_public(item)
    run_input = check_input(agent, body)
    budget.check_workspace(scope)  # 429 once the month's token budget is spent
    region = scope.home

    def work() -> tuple[int, Any]:
        now = clock.now()
        deadline = now + durations.parse_duration(agent["limits"]["deadline"])
        expiry = auto_expiry_seconds(scope, AGENT_RUN_AUTO_EXPIRY)
        run_id = new_id("run")
        run = models.runs(region)(
            principal.workspace_id, run_id, agent_id=agent_id, agent_key=f"{agent_id}#{run_id}", active=ACTIVE_MARK,
            status=QUEUED, input=json.dumps(run_input), agent=json.dumps(agent), user_id=principal.user_id,
            user_email=principal.email, correlation_id=caller.correlation_id if caller else correlation.current(),
            ip=(caller.ip or None) if caller else None, user_agent=(caller.user_agent or None) if caller else None,
            created_at=clock.iso(now), deadline_at=int(deadline), attempt=0,
            expires_at=int(now + expiry) if expiry else None)

        def effects(tx: Tx) -> None:
            tx.save(run, condition=models.RunAttrs.id.does_not_exist())
            tx.save(events.item(region, principal.workspace_id, run_id, 1, "run.queued", {"status": QUEUED},
                                run.expires_at), condition=events.new_only(region))
            idempotency.complete_in(tx, {"type": "agent_run", "id": run_id})

        audit.append(region, principal.workspace_id, "agent_run.created", actor=audit.Actor.of(principal),
                     target={"type": "agent_run", "id": run_id},
                     details={"agent_id": agent_id, "agent_version": agent["version"]}, caller=caller,
                     effects=effects)
        enqueue(region, run)  # a failed send leaves the run queued: the reaper sends it again
        return 202, view(scope, run)

    def replay(ref: dict[str, Any]) -> tuple[int, Any]:
        return 202, view(scope, load(scope, agent_id, ref["id"]))

    return idempotency.run(region, principal.user_id, f"{principal.workspace_id}#agents.run#{agent_id}",
                           idempotency_key, {"agent_id": agent_id, "input": run_input}, work,
                           ref_of=lambda body: {"type": "agent_run", "id": body["id"]}, replay=replay)


def enqueue(region: str, run: models.RunAttrs) -> None:
    """Send the run's message (also the reaper's way to resume a run whose worker died)."""
    try:
        queues.enqueue(QUEUE, region, {"v": MESSAGE_VERSION, "workspace_id": run.workspace_id,
                                       "agent_id": run.agent_id, "run_id": run.id}, group_key=run.agent_id)
    except Exception:  # noqa: BLE001 - the run is saved with its event; the reaper re-sends it
        log.exception("agent run message not sent", extra={"run_id": run.id})


def load(scope: RequestScope, agent_id: str, run_id: str) -> models.RunAttrs:
    """A run the caller may see (its starter or an Admin); 404 otherwise."""
    if not is_id(run_id, "run") or not is_id(agent_id, "agt"):
        raise not_found("run")
    principal = scope.principal
    cls = models.runs(scope.home)
    try:
        run = cls.get(principal.workspace_id, run_id, consistent_read=True)
    except cls.DoesNotExist:
        raise not_found("run") from None
    if run.agent_id != agent_id or not can_see(principal, run):
        raise not_found("run")
    return run


def can_see(principal: Principal, run: models.RunAttrs) -> bool:
    return run.workspace_id == principal.workspace_id and (
        run.user_id == principal.user_id or Role.ADMIN.value in principal.roles)


WITHHELD = {"code": "labels_not_satisfied",
            "message": "Withheld: the run had read data you may no longer read (a dataset, a document with its own "
                       "access list or a field policy), so what it wrote after that is not shown to you."}


def step_views(region: str, workspace_id: str, run_id: str, reader: RequestScope, *,
               keep_read: bool = False) -> list[dict[str, Any]]:
    """The run's steps as ``reader``'s caller may see them; ``keep_read`` adds the datasets each read (``_read``,
    for ``run_redaction`` only)."""
    cls = models.steps(region)
    out = []
    for s in cls.query(models.run_key(workspace_id, run_id), cls.sk.startswith(models.STEP_PREFIX),
                       consistent_read=True):
        shown = labels.satisfied(reader, labels.loads(s.labels)) if s.labels else True
        out.append({**({"_read": json.loads(s.datasets or "[]")} if keep_read else {}),
                    "index": int(s.index), "name": s.name, "tool": s.tool, "status": s.status,
                    "input": json.loads(s.input) if shown else {},
                    "output": json.loads(s.output) if s.output and shown else None,
                    "error": _error(s.error, shown), "started_at": s.started_at,
                    "finished_at": s.finished_at, "duration_ms": s.duration_ms, "executions": int(s.executions),
                    **({} if shown else {"withheld": WITHHELD})})
    return out


def _error(stored: str | None, shown: bool) -> dict[str, Any] | None:
    """A stored ``{code, message}``; its message withheld when the reader may not see what it was about."""
    if not stored:
        return None
    error = json.loads(stored)
    return error if shown else {"code": error.get("code"), "message": WITHHELD["message"]}


def run_labels(run: models.RunAttrs) -> set[labels.Label]:
    """The labels of everything the run read: those stored at its finish, and a dataset label for each
    dataset it read (what a run finished before labels existed has)."""
    return _labels_of(run.labels, run.read)


def _labels_of(stored: str | None, read: str | None) -> set[labels.Label]:
    found = labels.loads(stored) if stored else set()
    return found | {("dataset", ds, "") for ds in json.loads(read or "[]")}


def _definition_run(run: models.RunAttrs) -> dict[str, Any]:
    """Which definition the run used: its version and who had last edited it."""
    try:
        agent = json.loads(run.agent or "{}")
    except ValueError:
        agent = {}
    return {"version": agent.get("version"), "updated_at": agent.get("updated_at"),
            "updated_by": agent.get("updated_by") or {"user_id": agent.get("created_by"), "email": None}}


def view(scope: RequestScope, run: models.RunAttrs, *, with_steps: bool = False) -> dict[str, Any]:
    """The run as its reader (``scope``'s caller, in the run's workspace) may see it (see the module
    docstring): what it wrote after reading data the reader may no longer read is withheld, and what rests
    only on sources the reader can no longer read is redacted (``run_redaction.py``)."""
    shown = (run.output is None and run.error is None) or labels.satisfied(scope, run_labels(run))
    out: dict[str, Any] = {
        "id": run.id, "agent_id": run.agent_id, "workspace_id": run.workspace_id, "status": run.status,
        "input": json.loads(run.input), "started_by": {"id": run.user_id, "email": run.user_email},
        "created_at": run.created_at, "started_at": run.started_at, "finished_at": run.finished_at,
        "deadline_at": clock.iso(int(run.deadline_at)), "cancel_requested_at": run.cancel_requested_at,
        "output": json.loads(run.output) if run.output and shown else None, "error": _error(run.error, shown),
        "usage": json.loads(run.usage or "{}"), "attempts": int(run.attempt or 0),
        "expires_at": clock.iso(int(run.expires_at)) if run.expires_at else None,
        "correlation_id": run.correlation_id, "agent": _definition_run(run),
    }
    if not shown:
        out["withheld"] = WITHHELD
    if with_steps or out["output"]:
        steps = step_views(scope.home, run.workspace_id, run.id, scope, keep_read=True)
        out = run_redaction.redact(scope, {**out, "steps": steps})
        if not with_steps:
            out.pop("steps")
    return out


def exported(scope: RequestScope, item: dict[str, Any]) -> dict[str, Any]:
    """A stored run (its plain table item) for its starter's data export (``scope``: the starter's), as
    ``view`` shows it to them now: what it wrote is withheld when they no longer satisfy its labels, and
    redacted where it rests only on sources they can no longer read."""
    out = dict(item)
    if (item.get("output") or item.get("error")) and not labels.satisfied(
            scope, _labels_of(item.get("labels"), item.get("read"))):
        out.pop("output", None)
        out.pop("error", None)
        return {**out, "withheld": WITHHELD}
    if item.get("output"):
        steps = step_views(scope.home, scope.workspace_id, str(item.get("id")), scope,
                           keep_read=True)
        shown = run_redaction.redact(scope, {"output": json.loads(item["output"]), "steps": steps})
        out["output"] = json.dumps(shown["output"])
        if shown.get("redacted"):
            out["redacted"] = shown["redacted"]
    return out


def list_runs(scope: RequestScope, agent_id: str, query: dict[str, str]) -> dict[str, Any]:
    """An agent's runs, newest first, paged; ``status`` filters; non-Admins see only their own runs."""
    principal = scope.principal
    paging.check_params(query, ("limit", "after", "status"))
    try:
        definitions.get_item(scope, agent_id)
    except ApiError:  # a deleted agent's runs stay listable until they are deleted themselves
        if not any(True for _ in models.runs(scope.home).by_agent.query(
                principal.workspace_id, models.RunAttrs.agent_key.startswith(f"{agent_id}#"), limit=1)):
            raise
    status = query.get("status")
    if status is not None and status not in RUN_STATUSES:
        raise validation_error([{"field": "status", "message": "must be one of " + ", ".join(RUN_STATUSES)}])
    limit = paging.limit(query, 25, 100)
    after = paging.decode("agent_runs", query.get("after"))
    if after is not None and not is_id(after, "run"):
        raise validation_error([{"field": "after", "message": "is not a cursor of this list"}])
    cls = models.runs(scope.home)
    R = models.RunAttrs
    upper = f"{agent_id}#{after}" if after else f"{agent_id}#~"
    cond = R.agent_key.between(f"{agent_id}#", upper)
    flt = None
    if status is not None:
        flt = R.status == status
    if Role.ADMIN.value not in principal.roles:
        mine = R.user_id == principal.user_id
        flt = mine if flt is None else (flt & mine)
    found: list[models.RunAttrs] = []
    for item in cls.by_agent.query(principal.workspace_id, cond, filter_condition=flt, scan_index_forward=False,
                                   page_size=max(limit + 1, 25)):
        if item.id == after:
            continue
        found.append(item)
        if len(found) > limit:
            break
    out = paging.page(found, limit, "agent_runs", lambda r: r.id)
    return {"runs": [view(scope, r) for r in out.pop("_items")], **out}


def cancel(scope: RequestScope, agent_id: str, run_id: str, caller: Any) -> tuple[int, dict[str, Any]]:
    """Cancel (idempotent): 200 with a cancelled run, 202 while an in-progress run has been asked to stop,
    409 for a run that already finished otherwise."""
    principal = scope.principal
    run = load(scope, agent_id, run_id)
    region = scope.home
    R = models.RunAttrs
    for _ in range(3):
        if run.status == CANCELLED:
            return 200, view(scope, run, with_steps=True)
        if run.status in TERMINAL_STATUSES:
            raise ApiError(409, "run_finished", f"The run already finished ({run.status}); there is nothing to cancel.")
        if run.cancel_requested_at:
            return 202, view(scope, run, with_steps=True)
        now = clock.iso()
        queued = run.status == QUEUED
        if queued:
            actions = [R.status.set(CANCELLED), R.cancel_requested_at.set(now), R.finished_at.set(now),
                       R.active.remove(), R.error.set(json.dumps({"code": "cancelled",
                                                                  "message": "Cancelled before it started."}))]
            cond = R.status == QUEUED
        else:
            actions = [R.cancel_requested_at.set(now)]
            cond = (R.status == IN_PROGRESS) & R.cancel_requested_at.does_not_exist()
        run_log = None if queued else events.RunLog(region, principal.workspace_id, run_id, run.expires_at, None)
        if run_log is not None:
            run_log.add("run.cancel_requested", {})

        def effects(tx: Tx, actions: list[Any] = actions, cond: Any = cond,
                    run_log: events.RunLog | None = run_log) -> None:
            # the change, its run event and its audit event: one transaction
            tx.update(run, actions=actions, condition=cond, tag="fence")
            if run_log is not None:
                run_log.put_in(tx)

        try:
            audit.append(region, principal.workspace_id, "agent_run.cancelled", actor=audit.Actor.of(principal),
                         target={"type": "agent_run", "id": run_id},
                         details={"agent_id": agent_id, "while": QUEUED if queued else IN_PROGRESS,
                                  "cancel_correlation_id": correlation.current()},
                         caller=starting_caller(run), effects=effects)
        except Refused:  # the run moved (or the worker added an event) meanwhile: look again
            run.refresh(consistent_read=True)
            continue
        run.refresh(consistent_read=True)
        if queued:
            lifecycle.record_finish(region, run)
            return 200, view(scope, run, with_steps=True)
        return 202, view(scope, run, with_steps=True)
    raise ApiError(409, "concurrent_update", "The run changed while it was being cancelled; retry.")


def delete(scope: RequestScope, agent_id: str, run_id: str, caller: Any) -> None:
    """Delete a finished run with its steps and events (audited)."""
    principal = scope.principal
    run = load(scope, agent_id, run_id)
    if run.status not in TERMINAL_STATUSES:
        raise ApiError(409, "run_active", "Cancel the run, or wait until it finishes, before deleting it.")
    region = scope.home
    purge(region, run)
    audit.append(region, principal.workspace_id, "agent_run.deleted", actor=audit.Actor.of(principal),
                 target={"type": "agent_run", "id": run_id}, details={"agent_id": agent_id}, caller=caller)


def purge(region: str, run: models.RunAttrs) -> None:
    """Remove a run, its log (steps and events) and its lineage (kept as long as the run)."""
    run_log = models.events(region)
    with run_log.batch_write() as batch:
        for item in run_log.query(models.run_key(run.workspace_id, run.id)):
            batch.delete(item)
    lineage.remove_target(region, run.workspace_id, run.id)
    run.delete()
