"""Chat auto-expiry. A workspace's ``chat_auto_expiry`` (ISO 8601 duration) sets each chat's
``expires_at`` to its last activity plus that span; reads treat an expired chat as gone at once, and
this sweep (which also deletes the day-old event logs of answers; scheduled in ``chalicelib/workers/jobs.py``, run by ``make run``'s scheduler) deletes it.
DynamoDB TTL is declared on the table too, but the emulator's TTL never deletes, and real TTL may lag
by days, so the sweep is what keeps the promise."""
from __future__ import annotations

from typing import Any

from chalicelib.chat.models import answers, chats
from chalicelib.core import clock
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import served_regions

log = get_logger("chat.expiry")


def sweep(event: dict[str, Any] | None = None) -> dict[str, int]:
    """Delete every chat whose ``expires_at`` has passed, in the regions this deployment serves; returns counts."""
    now = int(clock.now())
    out: dict[str, int] = {}
    for region in served_regions():
        cls = chats(region)
        n = 0
        for item in cls.scan(filter_condition=cls.expires_at <= now, attributes_to_get=["workspace_id", "id",
                                                                                         "expires_at"]):
            try:
                cls(item.workspace_id, item.id).delete(condition=cls.expires_at <= now)
                n += 1
            except Exception:  # noqa: BLE001 - continued meanwhile (expiry moved): keep it
                continue
        out[region] = n
        logs = answers(region)  # the event logs of answers, kept a day (chat/answer_log.py)
        for entry in logs.scan(filter_condition=logs.expires_at <= now, attributes_to_get=["workspace_id", "key"]):
            logs(entry.workspace_id, entry.key).delete()
    if any(out.values()):
        log.info("expired chats deleted", extra={"deleted": out})
    return out
