"""The attacks end to end, each refused with nothing leaked:

1. a primary-key column under MASK must not reach a Member (or anyone) through knowledge: search, chat
   answer and citations, the stream, the stored chat, an agent's ``knowledge_search`` step, the S3 index;
2. a document restricted to Admins must not reach a Member through ``POST /v1/query``, the agent
   ``query`` tool or retrieval, however the SQL is written, and a restriction applies at the next query;
3. lineage must not show another user's private chat answers to a dataset reader.
"""
from __future__ import annotations

import gzip
import json
from typing import Any

from chalice.test import Client

from chalicelib.core import aws
from chalicelib.gateway.catalog import lineage
from chalicelib.groups import create_app
from chalicelib.knowledge import indexer
from tests.functional.agents.helpers import deliver
from tests.functional.conftest import Tenant
from tests.functional.gateway.data import field
from tests.functional.gateway.sync_helpers import READER_ROLE, drain, new_bucket, put
from tests.functional.knowledge.helpers import put_keyed
from tests.functional.platform.helpers import add_member, call

CSV = ("email,plan,city\n"
       "ann.secret@example.com,gold,Lisbon\n"
       "bob.hidden@example.com,silver,Porto\n")
DOC_FIELDS = [field("document_id"), field("file_name"), field("passage_no", "INTEGER"), field("text"),
              field("char_start", "INTEGER"), field("char_end", "INTEGER")]
OPEN_DOC, SECRET_DOC = "doc_01HZZZZZZZZZZZZZZZZZZZZZZ1", "doc_01HZZZZZZZZZZZZZZZZZZZZZZ2"
OPEN_TEXT = "Travel is booked through the travel desk."
SECRET_TEXT = "The travel desk budget is cut by forty percent next quarter."


def _ask(c: Client, token: str, question: str, stream: bool = False) -> Any:
    return c.http.post("/v1/chats", headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                       body=json.dumps({"model": "auto", "messages": [{"role": "user", "content": question}],
                                        "stream": stream}))


def _index_text(region: str, workspace_id: str) -> str:
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name("knowledge", region)
    out = []
    for obj in s3.list_objects_v2(Bucket=bucket, Prefix=f"indexes/{workspace_id}/").get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        out.append((gzip.decompress(body) if obj["Key"].endswith(".gz") else body).decode("utf-8", "replace"))
    return "\n".join(out)


def _run_agent(tenant: Tenant, token: str, plan: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
    agent = {"name": "Reader probe", "instructions": "Read.", "model": "auto", "tools": tools, "plan": plan,
             "limits": {"max_steps": 5, "deadline": "PT10M", "max_tokens": 2000}}
    with Client(create_app("platform")) as c:
        status, created, _ = call(c, "POST", "/v1/agents", tenant.token, agent)
        assert status == 201, created
        status, run, _ = call(c, "POST", f"/v1/agents/{created['id']}/runs", token, {"input": {}})
        assert status == 202, run
        deliver(tenant.region)
        status, done, _ = call(c, "GET", f"/v1/agents/{created['id']}/runs/{run['id']}", token)
    assert done["status"] == "completed", done
    return done


def test_a_masked_primary_key_reaches_no_one_through_knowledge(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "crm/customers.csv", CSV)
    member = add_member(tenant.workspace_id, "reader-member@example.com", "member")
    with Client(create_app("gateway")) as g:
        status, conn, _ = call(g, "POST", "/v1/connectors", tenant.token, {
            "name": "customers", "kind": "s3",
            "config": {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "crm/", "primary_key": ["email"]}})
        assert status == 201, conn
        status, _run, _ = call(g, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "FULL_REFRESH"})
        assert status == 202
        drain(tenant.region)  # the sync indexes the dataset
        schema = call(g, "GET", f"/v1/catalog/datasets/{conn['dataset']['id']}/schema", tenant.token)[1]
        assert {f["name"]: f["policy"] for f in schema["fields"]}["email"] == "MASK"
        searches = [g.http.get("/v1/knowledge/search?q=gold+lisbon+silver+porto&k=10",
                               headers={"Authorization": f"Bearer {who}"}) for who in (member.token, tenant.token)]
    assert all(r.status_code == 200 for r in searches)
    assert searches[0].json_body["items"], "the rows are searchable (their ALLOW fields)"
    with Client(create_app("platform")) as p:
        plain = _ask(p, member.token, "Which customer has the gold plan in Lisbon?")
        streamed = _ask(p, member.token, "Which customer has the silver plan in Porto?", stream=True)
        assert plain.status_code == streamed.status_code == 201
        assert plain.json_body["citations"], "the answer cites the rows"
        stored = p.http.get(f"/v1/chats/{plain.json_body['chat_id']}",
                            headers={"Authorization": f"Bearer {member.token}"})
    step = _run_agent(tenant, member.token, [{"name": "s", "tool": "knowledge_search",
                                              "input": {"query": "gold plan Lisbon"}}], ["knowledge_search"])
    assert step["steps"][0]["output"]["passages"]
    seen = "\n".join([r.body.decode() for r in searches] + [plain.body.decode(), streamed.body.decode(),
                                                             stored.body.decode(), json.dumps(step),
                                                             _index_text(tenant.region, tenant.workspace_id)])
    for email in ("ann.secret@example.com", "bob.hidden@example.com", "ann.secret", "bob.hidden"):
        assert email not in seen


def _documents(tenant: Tenant) -> str:
    ds = put_keyed(tenant.workspace_id, tenant.region, "travel_docs", DOC_FIELDS, [
        (OPEN_DOC, "travel.md", 1, OPEN_TEXT, 0, len(OPEN_TEXT)),
        (SECRET_DOC, "budget.md", 1, SECRET_TEXT, 0, len(SECRET_TEXT))])
    indexer.index_dataset(tenant.region, tenant.workspace_id, ds)
    return ds


def _query(c: Client, token: str, sql: str) -> dict[str, Any]:
    status, body, _ = call(c, "POST", "/v1/query", token, {"sql": sql})
    assert status == 200, body
    return body


def test_a_restricted_document_reaches_no_member_through_sql_agents_or_retrieval(tenant: Tenant) -> None:
    ds = _documents(tenant)
    member = add_member(tenant.workspace_id, "docs-member@example.com", "member")
    with Client(create_app("gateway")) as g:
        before = _query(g, member.token, "SELECT text FROM travel_docs ORDER BY 1")  # builds a cached sandbox
        assert [r[0] for r in before["rows"]] == sorted([OPEN_TEXT, SECRET_TEXT])
        r = g.http.put(f"/v1/knowledge/datasets/{ds}/documents/{SECRET_DOC}/acl",
                       headers={"Authorization": f"Bearer {tenant.token}", "Content-Type": "application/json"},
                       body=json.dumps({"acl": [{"type": "role", "id": "admin"}]}))
        assert r.status_code == 200, r.body
        probes = ["SELECT text FROM travel_docs", "SELECT * FROM travel_docs",
                  f"SELECT text FROM travel_docs WHERE document_id = '{SECRET_DOC}'",
                  "SELECT string_agg(text, ' ') AS t, count(*) AS n FROM travel_docs",
                  "SELECT t.text FROM travel_docs t JOIN travel_docs u USING (document_id)"]
        answers = [_query(g, member.token, sql) for sql in probes]
        assert [r[0] for r in answers[0]["rows"]] == [OPEN_TEXT]
        assert answers[2]["rows"] == [] and answers[3]["rows"][0][1] == 1  # absent, not blanked
        admin = _query(g, tenant.token, "SELECT count(*) FROM travel_docs")
        assert admin["rows"] == [[2]]  # Admins read every document
        search = g.http.get("/v1/knowledge/search?q=travel+desk+budget+cut&kind=document",
                            headers={"Authorization": f"Bearer {member.token}"})
    run = _run_agent(tenant, member.token, [{"name": "q", "tool": "query",
                                             "input": {"sql": "SELECT document_id, text FROM travel_docs"}}],
                     ["query"])
    assert run["steps"][0]["output"]["rows"] == [[OPEN_DOC, OPEN_TEXT]]
    seen = json.dumps(answers) + search.body.decode() + json.dumps(run)
    assert SECRET_TEXT not in seen and "forty percent" not in seen
    assert SECRET_DOC not in seen


def test_document_acl_bad_input_changes_nothing(tenant: Tenant) -> None:
    ds = _documents(tenant)
    member = add_member(tenant.workspace_id, "docs-member2@example.com", "member")
    base = f"/v1/knowledge/datasets/{ds}/documents"
    with Client(create_app("gateway")) as g:
        for who, path, body, status in (
                (member.token, f"{base}/{SECRET_DOC}/acl", {"acl": []}, 403),
                (tenant.token, f"{base}/not-a-doc/acl", {"acl": []}, 404),
                (tenant.token, f"{base}/{SECRET_DOC}/acl", {"acl": [{"type": "group", "id": "x"}]}, 400),
                (tenant.token, f"{base}/{SECRET_DOC}/acl", {"acl": [{"type": "role", "id": "x" * 65}]}, 400),
                (tenant.token, f"/v1/knowledge/datasets/ds_01HZZZZZZZZZZZZZZZZZZZZZZ9/documents/{SECRET_DOC}/acl",
                 {"acl": []}, 404)):
            got, problem, _ = call(g, "PUT", path, who, body)
            assert got == status, problem
        assert _query(g, member.token, "SELECT count(*) FROM travel_docs")["rows"] == [[2]]


def test_lineage_never_shows_another_users_chat_answers(tenant: Tenant) -> None:
    ds = _documents(tenant)
    member = add_member(tenant.workspace_id, "lineage-member@example.com", "member")
    with Client(create_app("platform")) as p:
        admins = _ask(p, tenant.token, "How is travel booked?")
        own = _ask(p, member.token, "How is travel booked through the desk?")
    assert admins.status_code == own.status_code == 201
    admin_answer, own_answer = admins.json_body["id"], own.json_body["id"]
    # an edge recorded without its user (before answers recorded one) is shown to nobody
    lineage.record_edges(tenant.region, tenant.workspace_id, [("DATASET", ds, "CHAT_ANSWER", "msg_01HZZZZZZZZZZZZZZZZZZZZZZ7",
                                                {"target_name": "chat answer msg_01HZZZZZZZZZZZZZZZZZZZZZZ7"})])
    with Client(create_app("gateway")) as g:
        as_member = call(g, "GET", f"/v1/lineage/{ds}", member.token)[1]
        as_admin = call(g, "GET", f"/v1/lineage/{ds}", tenant.token)[1]
        gql = call(g, "POST", "/graphql", member.token,
                   {"query": f'{{ lineage(datasetId: "{ds}") {{ nodes {{ id type }} }} }}'})[1]
    member_nodes = {n["id"] for n in as_member["nodes"]}
    assert own_answer in member_nodes
    assert admin_answer not in member_nodes and admin_answer not in json.dumps(as_member)
    assert admin_answer not in json.dumps(gql) and own_answer in json.dumps(gql)
    admin_nodes = {n["id"] for n in as_admin["nodes"]}
    assert admin_answer in admin_nodes and own_answer not in admin_nodes  # chats are private from Admins too
    assert "msg_01HZZZZZZZZZZZZZZZZZZZZZZ7" not in json.dumps(as_member) + json.dumps(as_admin)
