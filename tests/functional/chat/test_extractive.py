"""The built-in extractive provider through the chat API: it answers what its sources answer, declines
what they do not (``notice.code`` ``not_in_sources``), and quotes the current version of a document
whose superseded version also matches. Documents are synced through a ``documents`` connector as
``make run`` seeds its handbook (``chalicelib/chat/demo.py``)."""
from __future__ import annotations

import pytest

from chalicelib.chat import demo as chat_demo
from chalicelib.core.authz import Principal
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, bearer

DOCS = {
    **chat_demo.DOCS,
    "travel-expense-policy-2025.md": "# Travel expense policy 2025\n\nHotel costs are reimbursed up to 150 euros "
                                     "per night. Taxis are reimbursed after 22:00 only.\n",
    "travel-expense-policy-2026.md": "# Travel expense policy 2026\n\nHotel costs are reimbursed up to 180 euros "
                                     "per night. Taxis are reimbursed at any hour.\n",
}


def test_extractive_answers_decline_and_prefer_the_current_version(tenant: Tenant,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, None)
    monkeypatch.setattr(chat_demo, "DOCS", DOCS)
    admin = Principal(user_id=tenant.user_id, workspace_id=tenant.workspace_id, roles=("admin",), email=tenant.email,
                      amr=("seed",), token_id="seed")
    chat_demo.seed(tenant.workspace_id, tenant.region, admin)
    with helpers.client() as c:
        def chat(question: str) -> dict:
            r = post(c, "/v1/chats", tenant.token, ask(question))
            assert r.status_code == 201, r.body
            return r.json_body

        returns = chat(chat_demo.QUESTION)  # the README's first question is still answered
        assert "within 30 days of delivery" in returns["message"]["content"]
        assert returns["notice"]["code"] == "no_generative_model" and returns["grounding"]["ratio"] == 1.0

        hotel = chat("How much is reimbursed for a hotel night?")
        assert "180 euros" in hotel["message"]["content"] and "150" not in hotel["message"]["content"]
        assert {c["title"] for c in hotel["citations"]} == {"travel-expense-policy-2026.md"}

        for question in ("What is the vacation policy?", "Who leads the marketing team?"):
            declined = chat(question)
            assert declined["notice"]["code"] == "not_in_sources", question
            assert declined["message"]["content"] == "Extractive answer: nothing in the sources you may read " \
                                                     "answers this question."
            assert declined["citations"] == [] and "Travel" not in declined["message"]["content"]
            assert (declined["grounding"]["sentences"], declined["grounding"]["low"]) == (0, False)
        stored = c.http.get(f"/v1/chats/{declined['chat_id']}", headers=bearer(tenant.token)).json_body
        assert stored["messages"][-1]["notice"]["code"] == "not_in_sources"
