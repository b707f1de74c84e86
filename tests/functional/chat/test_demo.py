"""The demo workspace (what ``make run`` seeds) answers a question about its demo data with citations,
and its masked customer names and e-mails never reach the knowledge index."""
from __future__ import annotations

import pytest

from chalicelib.chat import demo as chat_demo
from chalicelib.core.authz import Principal
from chalicelib.gateway import demo as gateway_demo
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant


def test_demo_answers_with_citations(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, None)
    gateway_demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    admin = Principal(user_id=tenant.user_id, workspace_id=tenant.workspace_id, roles=("admin",), email=tenant.email,
                      amr=("seed",), token_id="seed")
    out = chat_demo.seed(tenant.workspace_id, tenant.region, admin)
    assert out["indexed_chunks"]["handbook"] >= 2
    assert out["indexed_chunks"]["customers"] == gateway_demo.N_CUSTOMERS
    again = chat_demo.seed(tenant.workspace_id, tenant.region, admin)
    assert again["connector_id"] == out["connector_id"]
    with helpers.client() as c:
        r = post(c, "/v1/chats", tenant.token, ask(chat_demo.QUESTION))
    assert r.status_code == 201, r.body
    body = r.json_body
    assert "within 30 days of delivery" in body["message"]["content"]
    doc = [cit for cit in body["citations"] if cit["source"]["kind"] == "document"]
    assert doc
    assert doc[0]["title"] == "returns-policy.md"
    assert doc[0]["source"]["id"].startswith("doc_")
    text = chat_demo.DOCS["returns-policy.md"]
    assert text[doc[0]["span"]["start"]:doc[0]["span"]["end"]] == doc[0]["quote"]  # span within the document
    index = helpers.region_text(tenant.region, skip_buckets=("data", "documents"))
    rows = [line.split(",") for line in gateway_demo.customers_csv().splitlines()[1:]]
    assert rows
    assert b"Berlin" in index  # the index holds the ALLOW fields (city) ...
    for row in rows:  # ... and never a MASK'd name or e-mail, nor a HASH'd phone
        for masked in (row[1], row[2], row[3]):
            assert masked.encode() not in index, masked
