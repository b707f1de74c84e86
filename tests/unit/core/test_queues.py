"""The consumer side shared by every SQS worker (``core/store/queues.py``)."""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core.ids import new_id
from chalicelib.core.store import queues


def _record(body: Any, message_id: str = "m1", receives: str = "1") -> dict[str, Any]:
    return {"messageId": message_id, "body": body if isinstance(body, str) else json.dumps(body),
            "attributes": {"ApproximateReceiveCount": receives}}


def test_parse_body_requires_each_named_id_of_its_kind() -> None:
    ws, run = new_id("ws"), new_id("run")
    assert queues.parse_body(_record({"workspace_id": ws, "run_id": run}), workspace_id="ws", run_id="run") == {
        "workspace_id": ws, "run_id": run}
    assert queues.parse_body(_record({"workspace_id": run, "run_id": run}), workspace_id="ws", run_id="run") is None
    assert queues.parse_body(_record({"workspace_id": ws}), workspace_id="ws", run_id="run") is None


def test_parse_body_refuses_what_is_not_a_json_object() -> None:
    assert queues.parse_body(_record("{not json"), workspace_id="ws") is None
    assert queues.parse_body(_record([1, 2]), workspace_id="ws") is None


def test_handle_batch_reports_false_and_raising_records_only() -> None:
    def handler(record: dict[str, Any]) -> bool:
        if record["messageId"] == "boom":
            raise RuntimeError("poison")
        return record["messageId"] == "ok"

    event = {"Records": [_record({}, "ok"), _record({}, "no"), _record({}, "boom")]}
    result = queues.handle_batch(event, handler, what="test")
    assert result == {"batchItemFailures": [{"itemIdentifier": "no"}, {"itemIdentifier": "boom"}]}


def test_receive_count_defaults_to_the_first_delivery() -> None:
    assert queues.receive_count(_record({}, receives="3")) == 3
    assert queues.receive_count({"body": "{}"}) == 1
