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


def write(region: str, workspace_id: str, message_id: str, events: list[tuple[int, str, dict[str, Any]]]) -> None:
    """Store ``(seq, event, data)`` items (one batch)."""
    cls = answers(region)
    expires = int(clock.now()) + KEEP_S
    with cls.batch_write() as batch:
        for seq, name, data in events:
            batch.save(cls(workspace_id, event_key(message_id, seq), seq=seq, type=name,
                           data=json.dumps(data, separators=(",", ":")), expires_at=expires))


def after(region: str, workspace_id: str, message_id: str, last: int) -> list[dict[str, Any]]:
    """Events with a sequence number above ``last``, oldest first: ``{"event", "data"}`` (data holds
    ``sequence``)."""
    cls = answers(region)
    items = cls.query(workspace_id, cls.key.between(event_key(message_id, last + 1), event_key(message_id, 10**8 - 1)),
                      consistent_read=True, limit=MAX_READ)
    return [{"event": i.type, "data": json.loads(i.data or "{}")} for i in items]
