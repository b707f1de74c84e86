"""After a full EU chat scenario (index, ask, stream, continue), no message text, passage or chunk of
the EU workspace is in any us-east-1 table, bucket or queue."""
from __future__ import annotations

import pytest

from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import make_tenant

QUESTION = "Which quokka-shaped lantern guards the Zurvanic archive at night?"
FOLLOW_UP = "And who polishes the quokka lantern?"


def test_eu_chat_leaves_no_text_in_us_east_1(stack: None, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, None)
    eu = make_tenant("eu-owner@example.com", residency="eu-central", name="Euro")
    from chalicelib.knowledge import indexer
    from tests.functional.gateway.data import field
    from tests.functional.knowledge.helpers import put_keyed

    ds = put_keyed(eu.workspace_id, eu.region, "archive_notes", [field("note")],
                   [("The quokka-shaped lantern guards the Zurvanic archive at night.",),
                    ("Brother Ortwin polishes the quokka lantern every Sunday.",)])
    indexer.index_dataset(eu.region, eu.workspace_id, ds)
    with helpers.client() as c:
        first = post(c, "/v1/chats", eu.token, ask(QUESTION))
        assert first.status_code == 201
        assert first.json_body["region"] == "eu-central-1"
        assert first.json_body["citations"]
        chat_id = first.json_body["chat_id"]
        more = post(c, f"/v1/chats/{chat_id}/messages", eu.token, ask(FOLLOW_UP, stream=True),
                    headers={"Idempotency-Key": "eu-1"})
        assert more.status_code == 200
        assert b"Ortwin" in more.body
    eu_side = helpers.region_text("eu-central-1")
    us_side = helpers.region_text("us-east-1")
    for needle in (b"quokka", b"Zurvanic", b"Ortwin", chat_id.encode()):
        assert needle in eu_side  # stored, in the workspace's region
        assert needle not in us_side, needle
