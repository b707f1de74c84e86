"""Agent memory: per agent and per user, in the workspace's region, kept 30 days after its last write.

Each value carries ``expires_at`` (the table's TTL attribute). DynamoDB's TTL deletes lazily (and the
emulator never does), so reads ignore expired items and ``sweep`` (a scheduled job) deletes them.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.agents import models
from chalicelib.core import clock
from chalicelib.core.regions import OPEN_REGIONS

MEMORY_TTL_SECONDS = 30 * 24 * 3600
MAX_KEYS_READ = 100


def scope(workspace_id: str, agent_id: str, user_id: str) -> str:
    return f"{workspace_id}#{agent_id}#{user_id}"


def _live(item: models.MemoryAttrs, now: float) -> bool:
    return int(item.expires_at) > now


def read(region: str, workspace_id: str, agent_id: str, user_id: str, key: str | None = None) -> dict[str, Any]:
    """``{"memory": {key: value}}`` for one key (or every key) that has not expired."""
    cls = models.memory(region)
    now = clock.now()
    sc = scope(workspace_id, agent_id, user_id)
    if key is not None:
        try:
            item = cls.get(sc, key, consistent_read=True)
        except cls.DoesNotExist:
            return {"memory": {}}
        return {"memory": {key: json.loads(item.value)} if _live(item, now) else {}}
    items = [i for i in cls.query(sc, consistent_read=True, limit=MAX_KEYS_READ) if _live(i, now)]
    return {"memory": {i.key: json.loads(i.value) for i in items}}


def write(region: str, workspace_id: str, agent_id: str, user_id: str, key: str, value: Any, *,
          run_id: str | None = None) -> dict[str, Any]:
    """Store ``value`` under ``key`` (an upsert: writing the same value twice changes nothing but expiry)."""
    now = clock.now()
    models.memory(region)(scope(workspace_id, agent_id, user_id), key, value=json.dumps(value, default=str),
                          updated_at=clock.iso(now), run_id=run_id,
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
