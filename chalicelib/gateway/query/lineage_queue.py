"""A federated query's lineage, recorded through the region's ``sync-jobs`` queue instead of by the query.

``send`` puts one message (the datasets read, the answer served, the query's day) on the queue: one
small call beside the query's run instead of the aggregated lineage transaction (``lineage.record_query``),
which the sync worker then makes (``handle``). When the message cannot be sent, ``send`` writes the
lineage itself; when that fails too, it raises and the query fails as it did when its write failed. So a
query that answered has its lineage either written or on the queue, where a failing write is retried
until the queue's ``maxReceiveCount`` and then kept on its dead-letter queue (``make dead-letters``).
Lineage is visible once the worker has run (seconds); a message delivered twice counts its query twice
in the day's ``uses`` (never zero times).
"""
from __future__ import annotations

from typing import Any

from chalicelib.core import clock
from chalicelib.core.ids import is_id
from chalicelib.core.logs import get_logger
from chalicelib.core.store import queues
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway.catalog import lineage

log = get_logger("gateway.query.lineage")
QUEUE = "sync-jobs"  # the gateway's worker queue; its worker tells the message by ``KIND``
KIND = "query_lineage"
MESSAGE_VERSION = 1


def send(scope: RequestScope, used: list[tuple[str, str]], answer: dict[str, str] | None) -> None:
    """Queue the lineage of one query of the scope's caller over ``used`` (dataset id, name); written
    directly when the queue cannot take it (raises only when neither worked)."""
    workspace_id, user_id, region = scope.workspace_id, scope.principal.user_id, scope.home
    day = clock.utcnow().strftime("%Y-%m-%d")
    body = {"v": MESSAGE_VERSION, "kind": KIND, "workspace_id": workspace_id, "datasets": [list(u) for u in used],
            "answer": answer, "user_id": user_id, "day": day}
    try:
        queues.enqueue(QUEUE, region, body)
    except Exception as err:  # noqa: BLE001 - written here instead
        log.warning("query lineage not queued; written directly", extra={"error": type(err).__name__})
        lineage.record_query(region, workspace_id, used, answer, user_id=user_id, day=day)


def is_lineage(body: dict[str, Any]) -> bool:
    return body.get("kind") == KIND


def handle(region: str, body: dict[str, Any]) -> bool:
    """Write the lineage a message of ``region`` (its workspace's) carries; False (kept on the queue, then
    dead-lettered) when it is malformed."""
    ws, datasets, day = body.get("workspace_id"), body.get("datasets"), body.get("day")
    answer = body.get("answer")
    if (not is_id(ws, "ws") or not isinstance(datasets, list) or not isinstance(day, str) or len(day) != 10
            or not all(isinstance(d, list) and len(d) == 2 and isinstance(d[0], str) and isinstance(d[1], str)
                       for d in datasets)
            or not (answer is None or (isinstance(answer, dict) and set(answer) == {"type", "id"}))):
        log.error("malformed query lineage message")
        return False
    lineage.record_query(region, ws, [(d[0], d[1]) for d in datasets], answer, user_id=body.get("user_id"), day=day)
    return True
