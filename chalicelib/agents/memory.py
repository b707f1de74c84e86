"""Agent memory: per agent and per user, in the workspace's region, kept 30 days after its last write.

Each value carries ``expires_at`` (the table's TTL attribute). DynamoDB's TTL deletes lazily (and the
emulator never does), so reads ignore expired items and ``sweep`` (a scheduled job) deletes them.

Each value also carries the **labels** of the run that wrote it (``labels.py``: the union of what the run
had read by then). A read shows a value only to a reader whose live rights satisfy its labels; the others
are left out whole (key included: a key is written by the run as much as its value) and only counted
(``withheld``). Values written before labels existed have none.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.agents import labels as labelling
from chalicelib.agents import models
from chalicelib.agents.labels import Label
from chalicelib.core import clock
from chalicelib.core.regions import OPEN_REGIONS
from chalicelib.core.tenancy import RequestScope

MEMORY_TTL_SECONDS = 30 * 24 * 3600
MAX_KEYS_READ = 100


def scope(workspace_id: str, agent_id: str, user_id: str) -> str:
    return f"{workspace_id}#{agent_id}#{user_id}"


def _live(item: models.MemoryAttrs, now: float) -> bool:
    return int(item.expires_at) > now


def read_labelled(region: str, workspace_id: str, agent_id: str, user_id: str, key: str | None, *,
                  reader: RequestScope) -> tuple[dict[str, Any], set[Label], int]:
    """The live values (one key, or every key) whose labels ``reader``'s caller satisfies, the union of their
    labels, and how many live values were withheld."""
    cls = models.memory(region)
    now = clock.now()
    sc = scope(workspace_id, agent_id, user_id)
    if key is not None:
        try:
            items = [cls.get(sc, key, consistent_read=True)]
        except cls.DoesNotExist:
            items = []
    else:
        items = list(cls.query(sc, consistent_read=True, limit=MAX_KEYS_READ))
    values: dict[str, Any] = {}
    seen: set[Label] = set()
    withheld = 0
    for item in items:
        if not _live(item, now):
            continue
        found = labelling.loads(item.labels)
        if not labelling.satisfied(reader, found):
            withheld += 1
            continue
        values[item.key] = json.loads(item.value)
        seen |= found
    return values, seen, withheld


def exported(reader: RequestScope, item: dict[str, Any]) -> dict[str, Any] | None:
    """A stored value (its plain table item) for its user's data export: None when the live rights of
    ``reader``'s caller do not satisfy its labels (the export counts it as withheld, as a read does)."""
    return item if labelling.satisfied(reader, labelling.loads(item.get("labels"))) else None


def read(region: str, workspace_id: str, agent_id: str, user_id: str, key: str | None = None, *,
         reader: RequestScope) -> dict[str, Any]:
    """``{"memory": {key: value}, "withheld": n}`` for one key (or every key) that has not expired, as
    ``reader``'s caller may see it."""
    values, _, withheld = read_labelled(region, workspace_id, agent_id, user_id, key, reader=reader)
    return {"memory": values, "withheld": withheld}


def write(region: str, workspace_id: str, agent_id: str, user_id: str, key: str, value: Any, *,
          run_id: str | None = None, labels: set[Label] | frozenset[Label] = frozenset()) -> dict[str, Any]:
    """Store ``value`` under ``key`` with the writing run's ``labels`` (an upsert: writing the same value
    twice changes nothing but expiry; the labels are those of the last write)."""
    now = clock.now()
    models.memory(region)(scope(workspace_id, agent_id, user_id), key, value=json.dumps(value, default=str),
                          updated_at=clock.iso(now), run_id=run_id, labels=labelling.dumps(labels) if labels else None,
                          expires_at=int(now) + MEMORY_TTL_SECONDS).save()
    return {"key": key, "stored": True, "expires_at": clock.iso(int(now) + MEMORY_TTL_SECONDS)}


def forget(region: str, workspace_id: str, agent_id: str, user_id: str) -> int:
    """Delete every value of one agent for one user; returns how many."""
    cls = models.memory(region)
    n = 0
    with cls.batch_write() as batch:
        for item in cls.query(scope(workspace_id, agent_id, user_id)):
            batch.delete(item)
            n += 1
    return n


def sweep(regions: tuple[str, ...] = OPEN_REGIONS) -> dict[str, int]:
    """Delete expired memory in every region (what TTL would do); returns counts per region."""
    now = int(clock.now())
    out: dict[str, int] = {}
    for region in regions:
        cls = models.memory(region)
        n = 0
        with cls.batch_write() as batch:
            for item in cls.scan(cls.expires_at <= now):
                batch.delete(item)
                n += 1
        out[region] = n
    return out
