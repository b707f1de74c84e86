"""Run events: an ordered log per run (``seq`` 1, 2, ...) that the server-sent event stream replays.

An event is written with a conditional put on its ``seq`` (as the audit chain is), so the API (created,
cancel requested) and the worker (started, steps, finished) can both append without losing or
reordering one. ``sse`` renders events after a ``Last-Event-ID`` as a ``text/event-stream`` body.
"""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import PutError

from chalicelib.agents import models
from chalicelib.core import clock

MAX_APPEND_ATTEMPTS = 30
MAX_EVENTS_READ = 1000
RETRY_MS = 1000


def _last_seq(region: str, key: str) -> int:
    cls = models.events(region)
    for item in cls.query(key, cls.sk.startswith(models.EVENT_PREFIX), scan_index_forward=False, limit=1,
                          consistent_read=True):
        return int(item.seq)
    return 0


def item(region: str, workspace_id: str, run_id: str, seq: int, type_: str, data: dict[str, Any] | None = None,
         expires_at: int | None = None) -> models.EventAttrs:
    """Event ``seq`` as an item, for a transaction that writes it with other changes (put it with
    ``condition=new_only(region)``)."""
    return models.events(region)(models.run_key(workspace_id, run_id), models.event_sk(seq), seq=seq, type=type_,
                                 at=clock.iso(), data=json.dumps(data or {}, separators=(",", ":"), default=str),
                                 expires_at=expires_at)


def new_only(region: str) -> Any:
    return models.events(region).sk.does_not_exist()


def last_seq(region: str, workspace_id: str, run_id: str) -> int:
    return _last_seq(region, models.run_key(workspace_id, run_id))


class RunLog:
    """The events one writer adds to a run's log inside its transactions: it numbers them from the last
    sequence number it knows, and ``resync`` re-reads that number when another writer (the API's
    cancel) took it first (the transaction's event put is then refused: tag ``event``)."""

    def __init__(self, region: str, workspace_id: str, run_id: str, expires_at: int | None, last: int | None) -> None:
        self.region, self.workspace_id, self.run_id, self.expires_at = region, workspace_id, run_id, expires_at
        self.last = last if last is not None else last_seq(region, workspace_id, run_id)
        self.pending: list[tuple[str, dict[str, Any]]] = []

    def add(self, type_: str, data: dict[str, Any] | None = None) -> None:
        """Queue an event for the next transaction (``put_in``)."""
        self.pending.append((type_, data or {}))

    def put_in(self, tx: Any) -> None:
        for i, (type_, data) in enumerate(self.pending, start=1):
            tx.save(item(self.region, self.workspace_id, self.run_id, self.last + i, type_, data, self.expires_at),
                    condition=new_only(self.region), tag="event")

    def committed(self) -> None:
        self.last += len(self.pending)
        self.pending = []

    def resync(self) -> None:
        self.last = last_seq(self.region, self.workspace_id, self.run_id)


def append(region: str, workspace_id: str, run_id: str, type_: str, data: dict[str, Any] | None = None,
           expires_at: int | None = None, *, after: int | None = None) -> int:
    """Append one event; returns its sequence number. ``after`` is the writer's guess of the last
    sequence number (it saves a read when right; a wrong guess costs one retry)."""
    cls = models.events(region)
    key = models.run_key(workspace_id, run_id)
    seq = (after + 1) if after is not None else _last_seq(region, key) + 1
    for _ in range(MAX_APPEND_ATTEMPTS):
        try:
            item(region, workspace_id, run_id, seq, type_, data, expires_at).save(condition=cls.sk.does_not_exist())
            return seq
        except PutError as err:
            if err.cause_response_code != "ConditionalCheckFailedException":
                raise
            seq = _last_seq(region, key) + 1
    raise RuntimeError("run event log is too contended")


def after(region: str, workspace_id: str, run_id: str, last_id: int = 0) -> list[dict[str, Any]]:
    """Events with ``seq`` > ``last_id``, oldest first."""
    cls = models.events(region)
    key = models.run_key(workspace_id, run_id)
    out = []
    for item in cls.query(key, cls.sk.between(models.event_sk(last_id + 1), models.event_sk(10**8 - 1)),
                          consistent_read=True, limit=MAX_EVENTS_READ):
        out.append({"id": int(item.seq), "type": item.type, "at": item.at, "data": json.loads(item.data)})
    return out


def sse(events: list[dict[str, Any]], *, final: bool) -> str:
    """A ``text/event-stream`` body: one ``id``/``event``/``data`` block per event. While the run is
    not finished, a ``retry`` line asks the client to reconnect (with ``Last-Event-ID``)."""
    lines = [] if final else [f"retry: {RETRY_MS}", ""]
    for e in events:
        lines += [f"id: {e['id']}", f"event: {e['type']}",
                  "data: " + json.dumps({"type": e["type"], "at": e["at"], **e["data"]}, separators=(",", ":")), ""]
    return "\n".join(lines) + ("\n" if lines else "")


