"""Answers that outlive the request: the question is recorded at once and answered by the ``chat-answers``
queue's worker (its real handler, fed the SQS messages of moto's queue), readers follow the stored events
from any ``Last-Event-ID``, and Stop is a stored flag the worker obeys. The slow model is a scripted peer
held at a gate: "the answer has begun and is not complete" is a state of the test, not a race."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.chat import answer_log, answers
from chalicelib.core import aws
from chalicelib.core.authz import Principal
from chalicelib.core.config import settings
from chalicelib.core.tenancy import scope_of
from chalicelib.residency import erasure
from chalicelib.workers.jobs import QUEUE_HANDLERS
from infra.local.workers import sqs_event
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.chat.test_grounding import configure
from tests.functional.conftest import Tenant, bearer
from tests.functional.models import scripted_peer

ANSWER = "Employees get thirty vacation days per year. " * 20


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAT_ANSWERS", "queue")
    settings.cache_clear()  # settings are read once from the environment


def drain(region: str = "us-east-1") -> int:
    """Run the worker over every message of the region's ``chat-answers`` queue, as Lambda would."""
    sqs = aws.client("sqs", region)
    url = aws.queue_url("chat-answers", region)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    n = 0
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                                  AttributeNames=["All"]).get("Messages", [])
        if not got:
            return n
        assert QUEUE_HANDLERS["chat-answers"](sqs_event(got, region, arn)) == {"batchItemFailures": []}
        for m in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        n += len(got)


def parse(body: bytes) -> list[tuple[int, str, dict[str, Any]]]:
    out = []
    for block in body.decode().strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return out


def read(c: Any, token: str, path: str, last: int | None = None, wait: int = 0) -> Any:
    headers = {**bearer(token), **({"Last-Event-ID": str(last)} if last is not None else {})}
    return c.http.get(f"{path}?wait={wait}", headers=headers)


def test_the_question_is_recorded_at_once_and_the_worker_answers_it(
        tenant: Tenant, queued: None) -> None:
    world = helpers.build(tenant)
    token = world.member.token
    with helpers.client() as c:
        r = post(c, "/v1/chats", token, ask("How many vacation days do employees get?"),
                 {"Prefer": "respond-async"})
        assert r.status_code == 202, r.body
        made = r.json_body
        assert made["status"] == "generating" and r.headers["Location"] == made["events"]
        chat = c.http.get(f"/v1/chats/{made['chat_id']}", headers=bearer(token)).json_body
        assert [m["role"] for m in chat["messages"]] == ["user"]  # recorded before any answer
        assert chat["answering"]["id"] == made["id"]
        again = post(c, f"/v1/chats/{made['chat_id']}/messages", token, ask("And travel?"))
        assert again.status_code == 409 and again.json_body["code"] == "answer_in_progress"

        assert drain() == 1  # the worker: nothing is left for a reader to hold open
        events = parse(read(c, token, made["events"]).body)
        assert [e[0] for e in events] == list(range(1, len(events) + 1))
        assert events[0][1] == "message_start" and events[-1][1] == "message_stop"
        assert events[-2][1] == "citations"
        resumed = parse(read(c, token, made["events"], last=2).body)  # a reconnect after event 2
        assert resumed == events[2:]
        chat = c.http.get(f"/v1/chats/{made['chat_id']}", headers=bearer(token)).json_body
        assert "answering" not in chat and chat["messages"][-1]["id"] == made["id"]
        assert chat["messages"][-1]["content"] == events[-2][2]["content"]
        assert drain() == 0
    # the answer came whole: its events and its end were stored with it, in its own transaction
    assert answer_log.state(tenant.region, tenant.workspace_id, made["id"]).status == answer_log.DONE
    # erasing the asker takes the answer's event log (it holds the answer's text) with their chats
    assert answer_log.after(tenant.region, tenant.workspace_id, made["id"], 0)
    erasure.erase_in_workspace(tenant.region, tenant.workspace_id, world.member.user_id, "", world.member.email)
    assert answer_log.after(tenant.region, tenant.workspace_id, made["id"], 0) == []
    assert answer_log.state(tenant.region, tenant.workspace_id, made["id"]) is None


def test_a_reader_of_another_users_answer_gets_404_and_bad_ids_400(tenant: Tenant, queued: None) -> None:
    world = helpers.build(tenant)
    with helpers.client() as c:
        made = post(c, "/v1/chats", world.member.token, ask("Travel?"), {"Prefer": "respond-async"}).json_body
        other = read(c, tenant.token, made["events"])  # the workspace's Admin, not the asker
        assert other.status_code == 404
        stop = post(c, made["stop"], tenant.token, {})
        assert stop.status_code == 404
        bad = c.http.get(made["events"], headers={**bearer(world.member.token), "Last-Event-ID": "x"})
        assert bad.status_code == 400 and bad.json_body["code"] == "validation_failed"
        wrong = read(c, world.member.token, made["events"].replace(made["id"], "msg_nothere"))
        assert wrong.status_code == 404
    state = answer_log.state(tenant.region, tenant.workspace_id, made["id"])
    assert state is not None and not state.stop  # the refused Stop changed nothing


PIECES = len(range(0, len(ANSWER), 11))  # what the model writes in all (11 characters a piece)


@pytest.fixture
def peer() -> Iterator[scripted_peer.ScriptedPeer]:
    """Three pieces, the gate, then ``FLUSH_DELTAS`` + 4 pieces, then held until the test lets it go on:
    the worker must see a Stop stored at the gate within those pieces, however slowly it is scheduled."""
    p = scripted_peer.start(answer=ANSWER, gate=threading.Event(), gate_after=3, pace=0.01,
                            hold=threading.Event(), hold_after=3 + answers.FLUSH_DELTAS + 4)
    yield p
    p.gate.set()  # type: ignore[union-attr]
    p.hold.set()  # type: ignore[union-attr]
    p.stop()


def test_stop_is_obeyed_across_requests_and_keeps_the_partial_answer(
        tenant: Tenant, queued: None, peer: scripted_peer.ScriptedPeer, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, peer.url)
    world = helpers.build(tenant)
    token = world.member.token
    with helpers.client() as c:
        made = post(c, "/v1/chats", token, ask("How many vacation days?", stream=True),
                    {"Prefer": "respond-async"}).json_body
        worker = threading.Thread(target=drain)
        worker.start()  # the model writes three pieces, then waits at the gate
        # a reader that has no text yet gets the first words as soon as they are stored (lingering or waiting
        # longer than the model is held at the gate would end this read with the whole answer instead)
        state = answer_log.state(tenant.region, tenant.workspace_id, made["id"])
        reader = Principal(user_id=state.user_id or "", workspace_id=tenant.workspace_id, roles=("member",),
                           email="", amr=("pwd",), token_id="t")
        first = parse("".join(answers.follow(scope_of(reader), made["chat_id"], made["id"], 0, wait_s=600,
                                             linger_s=600)).encode())
        assert first[0][1] == "message_start" and {e[1] for e in first[1:]} == {"content_delta"}
        assert post(c, made["stop"], token, {}).json_body["status"] == "stopping"
        assert not peer.ended.is_set()
        peer.gate.set()  # type: ignore[union-attr]
        worker.join(60)  # the model is held before its end: only the worker's own stop ends this
        assert not worker.is_alive()
        peer.hold.set()  # type: ignore[union-attr]
        assert peer.ended.wait(30) and peer.broken  # the worker had closed the model's stream
        assert peer.pieces_sent < PIECES
        rest = parse(read(c, token, made["events"], last=first[-1][0]).body)
        assert rest[-1][1] == "message_stop" and rest[-1][2]["stop_reason"] == "stopped"
        chat = c.http.get(f"/v1/chats/{made['chat_id']}", headers=bearer(token)).json_body
        stored = chat["messages"][-1]
        assert stored["stopped"] is True and 0 < len(stored["content"]) < len(ANSWER.strip())
        assert "answering" not in chat
        assert post(c, made["stop"], token, {}).json_body["status"] == "ended"
    # a stopped answer is never checked by the grounding model: the model was asked once, for the answer
    assert [call["body"].get("stream") for call in peer.calls if call["body"] is not None] == [True]


def test_the_first_text_is_stored_at_once_and_later_pieces_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[list[tuple[int, str]]] = []
    monkeypatch.setattr(answer_log, "write", lambda region, ws, msg, batch: written.append([(n, e) for n, e, _ in batch]))
    writer = answers._Writer("us-east-1", "ws_x", "msg_x", None)
    writer.add("message_start", {})
    writer.add("content_delta", {"text": "Employees"})
    assert written == [[(1, "message_start"), (2, "content_delta")]]  # the first words, without a batch's wait
    for _ in range(answers.FLUSH_DELTAS - 1):
        writer.add("content_delta", {"text": " get"})
    assert len(written) == 1  # later pieces wait for their batch (or the ticker)
    writer.add("content_delta", {"text": " thirty"})
    assert written[1:] == [[(3, "content_delta")]]


def test_a_model_failure_is_the_streams_last_event_and_the_question_stays(
        tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    peer = scripted_peer.start(answer="Thirty days.", html=True)
    try:
        configure(monkeypatch, peer.url)
        world = helpers.build(tenant)
        with helpers.client() as c:
            r = post(c, "/v1/chats", world.member.token, ask("Vacation?"))
            assert r.status_code == 502 and r.json_body["failure"] == "not_openai"
            chats = c.http.get("/v1/chats", headers=bearer(world.member.token)).json_body["items"]
            chat = c.http.get(f"/v1/chats/{chats[0]['id']}", headers=bearer(world.member.token)).json_body
            assert [m["role"] for m in chat["messages"]] == ["user"] and "answering" not in chat
            peer.html, peer.malformed = False, True  # breaks off after its text: the stream has begun
            s = post(c, f"/v1/chats/{chat['id']}/messages", world.member.token, ask("Again?", stream=True))
            events = parse(s.body)
            assert s.status_code == 200 and events[-1][1] == "error"
            assert events[0][1] == "message_start" and events[-1][2]["failure"] == "malformed_stream"
            chat = c.http.get(f"/v1/chats/{chat['id']}", headers=bearer(world.member.token)).json_body
            assert [m["role"] for m in chat["messages"]] == ["user", "user"] and "answering" not in chat
    finally:
        peer.stop()


def test_an_error_the_ticker_already_stored_still_fails_the_answer(tenant: Tenant) -> None:
    """The ticker thread may store the pending events, the error among them, before the answer's end reads
    whether it failed: it must still count as failed (it was marked done with no message, a 404)."""
    writer = answers._Writer(tenant.region, tenant.workspace_id, "msg_01TICKERSTOREDTHEERROR0000", state=None)
    writer.add("error", {"status": 504, "code": "model_timeout"})
    writer.flush()  # what the ticker does every FLUSH_S
    assert writer.pending == [] and writer.failed()
