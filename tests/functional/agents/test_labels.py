"""Labels follow data, not content: what a run writes after reading something restricted carries the
labels of what it read, and a reader whose live rights no longer satisfy them sees nothing of it.

A Member is admitted by name to a document otherwise restricted to Admins. Her run reads it, then writes
copies to memory: base64, reversed and split into 3-character pieces (a scripted model choosing
``memory_write``), or the passages as they are (a declared plan). She reads them back. The Admin then
narrows the document's access list to Admins: her memory (REST and the ``memory_read`` tool of a later
run), the run's steps and answer (read, list, start replayed with its ``Idempotency-Key``) show none of it,
while a value written before the read stays. A stricter field policy hides values read under the older
one; a tool that sends data outside the workspace is refused while the run is tainted.
"""
from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.agents import labels, tools
from chalicelib.core.authz import Principal
from chalicelib.core.http.validation import F
from chalicelib.groups import create_app
from chalicelib.knowledge import indexer
from tests.functional.agents.helpers import (
    create_agent,
    deliver,
    get_run,
    member,
    platform_client,
    start_run,
)
from tests.functional.agents.scripted_model import ScriptedModel
from tests.functional.conftest import Tenant
from tests.functional.gateway.data import field
from tests.functional.knowledge.helpers import put_keyed
from tests.functional.platform.helpers import User, call

DOC_FIELDS = [field("document_id"), field("file_name"), field("passage_no", "INTEGER"), field("text"),
              field("char_start", "INTEGER"), field("char_end", "INTEGER")]
OPEN_DOC, SECRET_DOC = "doc_01HZZZZZZZZZZZZZZZZZZZZZZ1", "doc_01HZZZZZZZZZZZZZZZZZZZZZZ2"
OPEN_TEXT = "Travel is booked through the travel desk."
SECRET = "ZEPHYR2cd981"
SECRET_TEXT = f"The travel desk budget code is {SECRET} and it is cut by forty percent."


def copies(text: str) -> dict[str, Any]:
    """The copies the model writes: none of them holds ``text`` as it is."""
    return {"b64": base64.b64encode(text.encode()).decode(), "rev": text[::-1],
            "split": [text[i:i + 3] for i in range(0, len(text), 3)]}


def traces(text: str) -> list[str]:
    """What would give the copies away in an answer (each form as JSON writes it)."""
    c = copies(text)
    return [text, c["b64"], c["rev"], json.dumps(c["split"])[1:-1]]


def _documents(t: Tenant, holder: User) -> str:
    """The documents dataset: the secret document admits Admins and ``holder`` by name."""
    ds = put_keyed(t.workspace_id, t.region, "travel_docs", DOC_FIELDS, [
        (OPEN_DOC, "travel.md", 1, OPEN_TEXT, 0, len(OPEN_TEXT)),
        (SECRET_DOC, "budget.md", 1, SECRET_TEXT, 0, len(SECRET_TEXT))])
    indexer.index_dataset(t.region, t.workspace_id, ds)
    _set_acl(t, ds, [{"type": "role", "id": "admin"}, {"type": "user", "id": holder.user_id}])
    return ds


def _set_acl(t: Tenant, ds: str, acl: list[dict[str, str]]) -> None:
    with Client(create_app("gateway")) as g:
        status, out, _ = call(g, "PUT", f"/v1/knowledge/datasets/{ds}/documents/{SECRET_DOC}/acl", t.token, {"acl": acl})
    assert status == 200, out


def _agent(tools_: list[str], **extra: Any) -> dict[str, Any]:
    return {"name": "labelled", "instructions": "Answer questions about travel.", "model": "auto", "tools": tools_,
            "limits": {"max_steps": 8, "deadline": "PT5M", "max_tokens": 20000}, **extra}


def _memory(c: Client, token: str, agent_id: str) -> dict[str, Any]:
    status, body, _ = call(c, "GET", f"/v1/agents/{agent_id}/memory", token)
    assert status == 200, body
    return body


def _text(value: Any) -> str:
    return json.dumps(value)


def test_encoded_copies_chosen_by_the_model_follow_the_document_acl(tenant: Tenant, model: ScriptedModel) -> None:
    holder = member(tenant.workspace_id)
    ds = _documents(tenant, holder)

    def write_copies(body: dict[str, Any]) -> dict[str, Any]:
        result = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "tool")
        assert SECRET in result  # she may read the document now
        return {"tool": "memory_write", "input": {"key": "memo7", "value": copies(SECRET_TEXT)}}

    model.turns = [{"tool": "memory_write", "input": {"key": "shipping", "value": "two days"}},
                   {"tool": "knowledge_search", "input": {"query": "travel desk budget code"}},
                   write_copies, {"tool": "query", "input": {"sql": f"SELECT {SECRET} FROM travel_docs"}},
                   {"answer": f"Noted: the code is {SECRET[::-1]}."}]
    question = {"question": "Remember shipping as two days, then note the travel budget code."}
    with platform_client() as c:
        agent = create_agent(c, tenant.token, _agent(["knowledge_search", "query", "memory_read", "memory_write"]))
        status, started = start_run(c, holder.token, agent["id"], question, headers={"Idempotency-Key": "lbl-1"})
        assert status == 202, started
        deliver(tenant.region)
        done = get_run(c, holder.token, agent["id"], started["id"])
        assert done["status"] == "completed", done
        assert [(s["tool"], s["status"]) for s in done["steps"]] == [
            ("memory_write", "completed"), ("knowledge_search", "completed"), ("memory_write", "completed"),
            ("query", "failed")]
        assert SECRET.lower() in done["steps"][3]["error"]["message"].lower()  # the engine echoed the SQL
        # the told model still gets the message; the event stream (no label check) never does
        told = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"][-1]
        assert SECRET.lower() in told.lower()
        stream = c.http.get(f"/v1/agents/{agent['id']}/runs/{started['id']}/events",
                            headers={"Authorization": f"Bearer {holder.token}"}).body.decode()
        assert "step.failed" in stream and SECRET.lower() not in stream.lower()
        # stored labelled, and she still satisfies the labels: she reads everything back
        assert _memory(c, holder.token, agent["id"]) == {
            "memory": {"shipping": "two days", "memo7": copies(SECRET_TEXT)}, "withheld": 0}
        assert "withheld" not in done and SECRET[::-1] in done["output"]["answer"]

        _set_acl(tenant, ds, [{"type": "role", "id": "admin"}])  # the Admin narrows the document's list

        seen = [_memory(c, holder.token, agent["id"])]
        assert seen[0] == {"memory": {"shipping": "two days"}, "withheld": 1}  # written before the read: kept
        after = get_run(c, holder.token, agent["id"], started["id"])
        seen.append(after)
        assert after["output"] is None and after["withheld"]["code"] == "labels_not_satisfied"
        assert [("withheld" in s, s["input"] == {}, s["output"] is None) for s in after["steps"]] == [
            (False, False, False), (True, True, True), (True, True, True), (True, True, True)]
        assert after["steps"][3]["error"]["code"] == done["steps"][3]["error"]["code"]
        listed = call(c, "GET", f"/v1/agents/{agent['id']}/runs", holder.token)[1]
        seen.append(listed)
        assert listed["runs"][0]["output"] is None and listed["runs"][0]["withheld"]
        status, replayed, headers = call(c, "POST", f"/v1/agents/{agent['id']}/runs", holder.token,
                                         {"input": question}, headers={"Idempotency-Key": "lbl-1"})
        assert (status, headers.get("Idempotent-Replayed")) == (202, "true")
        seen.append(replayed)
        assert replayed["output"] is None and replayed["withheld"]
        # the memory_read tool of a later run gets none of it, and so neither does the model
        model.requests.clear()
        model.turns = [{"tool": "memory_read", "input": {}}, {"answer": "I remember shipping only."}]
        status, later = start_run(c, holder.token, agent["id"], {"question": "What do you remember?"})
        deliver(tenant.region)
        later = get_run(c, holder.token, agent["id"], later["id"])
        seen += [later, model.requests]
        assert later["steps"][0]["output"] == {"memory": {"shipping": "two days"}, "withheld": 1}
        # the Admin satisfies the labels: she still sees the run whole
        admin_view = get_run(c, tenant.token, agent["id"], started["id"])
    assert admin_view["steps"][2]["input"]["value"] == copies(SECRET_TEXT) and "withheld" not in admin_view
    everything = _text(seen).lower()
    for trace in traces(SECRET_TEXT) + [SECRET, SECRET[::-1]]:
        assert trace.lower() not in everything


def test_a_declared_plan_piping_passages_into_memory_is_labelled(tenant: Tenant) -> None:
    holder = member(tenant.workspace_id)
    ds = _documents(tenant, holder)
    plan = [{"name": "search", "tool": "knowledge_search", "input": {"query": "{{input.question}}"}},
            {"name": "keep", "tool": "memory_write",
             "input": {"key": "passages", "value": "{{steps.search.output.passages}}"}}]
    with platform_client() as c:
        agent = create_agent(c, tenant.token, _agent(["knowledge_search", "memory_write"], plan=plan))
        run = start_run(c, holder.token, agent["id"], {"question": "travel desk budget code"})[1]
        deliver(tenant.region)
        done = get_run(c, holder.token, agent["id"], run["id"])
        assert done["status"] == "completed", done
        assert SECRET in _text(_memory(c, holder.token, agent["id"])) and SECRET in _text(done)
        _set_acl(tenant, ds, [{"type": "role", "id": "admin"}])
        after = [_memory(c, holder.token, agent["id"]), get_run(c, holder.token, agent["id"], run["id"])]
    assert after[0] == {"memory": {}, "withheld": 1}
    assert after[1]["output"] is None and all("withheld" in s for s in after[1]["steps"])
    assert SECRET not in _text(after)


def test_a_stricter_field_policy_hides_what_was_remembered_under_the_older_one(seeded: Tenant) -> None:
    holder = member(seeded.workspace_id)
    plan = [{"name": "rows", "tool": "query",
             "input": {"sql": "SELECT email FROM customers ORDER BY customer_id LIMIT 1"}},
            {"name": "keep", "tool": "memory_write", "input": {"key": "contact", "value": "{{steps.rows.output.rows}}"}}]
    with platform_client() as c:
        agent = create_agent(c, seeded.token, _agent(["query", "memory_write"], plan=plan))
        run = start_run(c, holder.token, agent["id"], {})[1]
        deliver(seeded.region)
        assert get_run(c, holder.token, agent["id"], run["id"])["status"] == "completed"
        kept = _memory(c, holder.token, agent["id"])
        assert kept["withheld"] == 0 and kept["memory"]["contact"]  # the masked e-mail, as she saw it
        with Client(create_app("gateway")) as g:
            found = call(g, "GET", "/v1/catalog/datasets?q=customers", seeded.token)[1]["items"][0]["id"]
            status, out, _ = call(g, "PUT", f"/v1/catalog/datasets/{found}/fields/email/policy", seeded.token,
                                  {"policy": "DENY"})
            assert status == 200, out
        assert _memory(c, holder.token, agent["id"]) == {"memory": {}, "withheld": 1}


def test_a_tool_that_sends_data_out_is_refused_while_the_run_is_tainted(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Any] = []
    outbound = tools.Tool("send_out", "Send a value outside the workspace.", {"value": F(str, required=True)},
                          lambda ctx, args: sent.append(args["value"]) or {"sent": True}, writes=True, sends_out=True)
    monkeypatch.setitem(tools.TOOLS, "send_out", outbound)
    who = Principal(user_id="usr_1", workspace_id="ws_1", roles=("member",), email="", amr=("pwd",), token_id="t")
    ctx = tools.ToolContext(who, "us-east-1", "agt_1", "run_1")
    assert tools.call("send_out", ctx, {"value": "hello"}) == {"sent": True}  # nothing read yet
    for label in [("document", "ds_1", "doc_1"), ("field", "ds_1", "email", "MASK"), ("dataset", "ds_1", "PII")]:
        ctx.labels = {label}
        assert labels.restricted(ctx.scope, ctx.labels)
        with pytest.raises(tools.ToolError) as refused:
            tools.call("send_out", ctx, {"value": base64.b64encode(b"anything").decode()})
        assert refused.value.code == "tainted_run"
    assert sent == ["hello"]
