"""Agents storage, all regional (the workspace's region): definitions, runs, the per-run log (step ledger
and event stream) and memory. JSON-valued attributes are documented where they are written."""
from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, LocalSecondaryIndex

from chalicelib.core.store.tables import BaseModel, regional

# Run lifecycle: queued -> in_progress -> completed | failed | cancelled | expired.
QUEUED, IN_PROGRESS = "queued", "in_progress"
COMPLETED, FAILED, CANCELLED, EXPIRED = "completed", "failed", "cancelled", "expired"
ACTIVE_STATUSES = (QUEUED, IN_PROGRESS)
TERMINAL_STATUSES = (COMPLETED, FAILED, CANCELLED, EXPIRED)
RUN_STATUSES = ACTIVE_STATUSES + TERMINAL_STATUSES
ACTIVE_MARK = "active"  # value of ``RunAttrs.active`` while a run is queued or in progress

# Item kinds of the run log (range key prefixes).
STEP_PREFIX = "step#"
EVENT_PREFIX = "event#"


class AgentAttrs(BaseModel):
    """An agent definition (``id`` = ``agt_...``)."""

    TABLE = "agents"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)
    name = UnicodeAttribute()
    instructions = UnicodeAttribute(default="")
    model = UnicodeAttribute(default="auto")
    tools = UnicodeAttribute(default="[]")  # JSON list of tool names
    plan = UnicodeAttribute(null=True)  # JSON list of {name, tool, input}
    datasets = UnicodeAttribute(null=True)  # JSON list of dataset ids it may read; absent or [] = all the user may
    limits = UnicodeAttribute(default="{}")  # JSON {max_steps, deadline, max_tokens}
    version = NumberAttribute(default=1)
    created_by = UnicodeAttribute()
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    updated_by = UnicodeAttribute(null=True)  # usr_... of the last edit (the creator until then)
    updated_by_email = UnicodeAttribute(null=True)


class _ByAgent(LocalSecondaryIndex):
    class Meta:
        index_name = "by_agent"
        projection = AllProjection()

    workspace_id = UnicodeAttribute(hash_key=True)
    agent_key = UnicodeAttribute(range_key=True)


class _ByActive(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_active"
        projection = AllProjection()

    active = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)


class RunAttrs(BaseModel):
    """A run (``id`` = ``run_...``). ``agent_key`` = ``<agent_id>#<run_id>`` (runs of one agent, newest
    last); ``active`` exists only while the run is queued or in progress (sparse index for the reaper)."""

    TABLE = "agent_runs"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)
    agent_id = UnicodeAttribute()
    agent_key = UnicodeAttribute()
    active = UnicodeAttribute(null=True)
    status = UnicodeAttribute()
    input = UnicodeAttribute(default="{}")  # JSON object
    agent = UnicodeAttribute()  # JSON: the definition as it was when the run was created
    user_id = UnicodeAttribute()  # who started it: tools act under this user's ACL
    user_email = UnicodeAttribute(default="")
    correlation_id = UnicodeAttribute()  # of the request that started it
    ip = UnicodeAttribute(null=True)
    user_agent = UnicodeAttribute(null=True)
    created_at = UnicodeAttribute()
    started_at = UnicodeAttribute(null=True)
    finished_at = UnicodeAttribute(null=True)
    deadline_at = NumberAttribute()  # epoch seconds
    heartbeat_at = NumberAttribute(null=True)
    lease_owner = UnicodeAttribute(null=True)  # SQS message id of the delivery working on it
    lease_expires_at = NumberAttribute(null=True)
    attempt = NumberAttribute(default=0)  # fencing token: bumped by every claim
    resumes = NumberAttribute(null=True)  # how often the reaper re-sent the run after its worker was lost
    sent_at = NumberAttribute(null=True)  # epoch seconds the reaper last re-sent its message
    cancel_requested_at = UnicodeAttribute(null=True)
    output = UnicodeAttribute(null=True)  # JSON {answer, provider, model, citations}
    error = UnicodeAttribute(null=True)  # JSON {code, message}
    usage = UnicodeAttribute(default="{}")  # JSON {steps, input_tokens, output_tokens, tool_calls}
    read = UnicodeAttribute(default="[]")  # JSON list of dataset ids the run read
    labels = UnicodeAttribute(null=True)  # JSON list of the labels of all it read (``labels.py``), at the finish
    finalized = NumberAttribute(null=True)  # 1 once the finish's event, audit and lineage are written
    expires_at = NumberAttribute(null=True)  # workspace auto-expiry (TTL plus sweep), absent = until deleted
    by_agent = _ByAgent()
    by_active = _ByActive()


class StepAttrs(BaseModel):
    """One step of the ledger (``sk`` = ``step#NNNN``), written with conditional puts so a step is
    recorded (and its tool executed) once per run even when the message is delivered again."""

    TABLE = "agent_run_log"
    run_key = UnicodeAttribute(hash_key=True)  # <workspace_id>#<run_id>
    sk = UnicodeAttribute(range_key=True)
    index = NumberAttribute()
    name = UnicodeAttribute()
    tool = UnicodeAttribute()
    status = UnicodeAttribute()  # started | completed | failed
    input = UnicodeAttribute(default="{}")  # JSON, after templating
    output = UnicodeAttribute(null=True)  # JSON, as the starting user may see it (field policies applied)
    error = UnicodeAttribute(null=True)  # JSON {code, message}
    attempt = NumberAttribute()  # the run attempt that executed it
    executions = NumberAttribute(default=1)  # how many times the tool was started for this step
    started_at = UnicodeAttribute()
    finished_at = UnicodeAttribute(null=True)
    duration_ms = NumberAttribute(null=True)
    datasets = UnicodeAttribute(default="[]")  # JSON list of dataset ids the step read (lineage)
    labels = UnicodeAttribute(null=True)  # JSON list: the run's labels once this step ran (its input and output carry them)
    expires_at = NumberAttribute(null=True)


class EventAttrs(BaseModel):
    """One run event (``sk`` = ``event#NNNNNNNN``), the body of the run's server-sent event stream."""

    TABLE = "agent_run_log"
    run_key = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    seq = NumberAttribute()
    type = UnicodeAttribute()
    data = UnicodeAttribute(default="{}")  # JSON
    at = UnicodeAttribute()
    expires_at = NumberAttribute(null=True)


class MemoryAttrs(BaseModel):
    """One remembered value of an agent for one user; kept ``MEMORY_TTL_SECONDS`` after its last write."""

    TABLE = "agent_memory"
    scope = UnicodeAttribute(hash_key=True)  # <workspace_id>#<agent_id>#<user_id>
    key = UnicodeAttribute(range_key=True)
    value = UnicodeAttribute()  # JSON
    updated_at = UnicodeAttribute()
    run_id = UnicodeAttribute(null=True)
    labels = UnicodeAttribute(null=True)  # JSON list of the writing run's labels (``labels.py``); absent = none
    expires_at = NumberAttribute()  # epoch seconds (TTL attribute; the sweep deletes what TTL has not)


def agents(region: str) -> type[AgentAttrs]:
    return regional(AgentAttrs, region)


def runs(region: str) -> type[RunAttrs]:
    return regional(RunAttrs, region)


def steps(region: str) -> type[StepAttrs]:
    return regional(StepAttrs, region)


def events(region: str) -> type[EventAttrs]:
    return regional(EventAttrs, region)


def memory(region: str) -> type[MemoryAttrs]:
    return regional(MemoryAttrs, region)


def run_key(workspace_id: str, run_id: str) -> str:
    return f"{workspace_id}#{run_id}"


def step_sk(index: int) -> str:
    return f"{STEP_PREFIX}{index:04d}"


def event_sk(seq: int) -> str:
    return f"{EVENT_PREFIX}{seq:08d}"
