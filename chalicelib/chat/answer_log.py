"""The stored life of an answer being generated (table ``chat_answers``, the workspace's region): one state
item per answer (``key`` = its ``msg_...`` id: the request, status, stop flag) and its server-sent events
in order (``<msg id>#<8-digit seq>``). The worker (``chat/answers.py``) is the only writer of events, so
a sequence number needs no condition; the API writes the state and its stop flag. Items live a day: the
chat keeps every finished answer, and a reader of an older answer is served from the chat."""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.chat.models import AnswerAttrs, answers
from chalicelib.core import clock
from chalicelib.core.store.transact import Tx

KEEP_S = 24 * 3600
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
FINAL_EVENTS = ("message_stop", "error")
MAX_READ = 500


def event_key(message_id: str, seq: int) -> str:
    return f"{message_id}#{seq:08d}"


def new_state(region: str, workspace_id: str, message_id: str, chat_id: str, user_id: str,
              request: dict[str, Any], status: str = QUEUED) -> AnswerAttrs:
    return answers(region)(workspace_id, message_id, chat_id=chat_id, user_id=user_id, status=status,
                           request=json.dumps(request, separators=(",", ":")), stop=0,
                           expires_at=int(clock.now()) + KEEP_S)


def state(region: str, workspace_id: str, message_id: str) -> AnswerAttrs | None:
    cls = answers(region)
    try:
        return cls.get(workspace_id, message_id, consistent_read=True)
    except DoesNotExist:
        return None


def claim(item: AnswerAttrs) -> bool:
    """Take a queued answer for this worker (False when another took it, or it was stopped or ended)."""
    cls = type(item)
    try:
        item.update(actions=[cls.status.set(RUNNING), cls.started.set(int(clock.now()))],
                    condition=cls.status == QUEUED)
    except Exception:  # noqa: BLE001 - the condition failed: someone else has it
        return False
    return True


def set_status(item: AnswerAttrs, status: str) -> None:
    item.update(actions=[type(item).status.set(status)])


def ask_stop(item: AnswerAttrs) -> None:
    item.update(actions=[type(item).stop.set(1)])


def stop_asked(item: AnswerAttrs) -> bool:
    item.refresh(consistent_read=True)
    return bool(item.stop)


def _event(region: str, workspace_id: str, message_id: str, seq: int, name: str, data: dict[str, Any]) -> AnswerAttrs:
    return answers(region)(workspace_id, event_key(message_id, seq), seq=seq, type=name,
                           data=json.dumps(data, separators=(",", ":")), expires_at=int(clock.now()) + KEEP_S)


def write(region: str, workspace_id: str, message_id: str, events: list[tuple[int, str, dict[str, Any]]]) -> None:
    """Store ``(seq, event, data)`` items (one batch)."""
    with answers(region).batch_write() as batch:
        for seq, name, data in events:
            batch.save(_event(region, workspace_id, message_id, seq, name, data))


def end_in(tx: Tx, item: AnswerAttrs, events: list[tuple[int, str, dict[str, Any]]], status: str) -> None:
    """Store ``events`` and the answer's final ``status`` in ``tx`` (an answer that came whole: its events
    and its end are written with the answer itself, in one transaction)."""
    for seq, name, data in events:
        tx.save(_event(tx.region, str(item.workspace_id), str(item.key), seq, name, data))
    tx.update(item, [type(item).status.set(status)])


def after(region: str, workspace_id: str, message_id: str, last: int) -> list[dict[str, Any]]:
    """Events with a sequence number above ``last``, oldest first: ``{"event", "data"}`` (data holds
    ``sequence``)."""
    cls = answers(region)
    items = cls.query(workspace_id, cls.key.between(event_key(message_id, last + 1), event_key(message_id, 10**8 - 1)),
                      consistent_read=True, limit=MAX_READ)
    return [{"event": i.type, "data": json.loads(i.data or "{}")} for i in items]
