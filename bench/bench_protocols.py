"""Protocol overhead: an MCP ``tools/call`` of a federated query and of a knowledge search beside the same REST
call (same caller, same SQL or question; the MCP call adds JSON-RPC validation, the tool's audit event and its
lineage edges), and ``POST /v1/chat/completions`` beside ``POST /v1/chats`` for the same question (target:
within 5%). In-process: the Chalice test client over moto, calls interleaved pair by pair."""
from __future__ import annotations

import json

from bench.common import measure_pair, table, use_emulator

use_emulator()

SQL = "SELECT c.country, count(*) AS orders FROM customers c JOIN orders o USING (customer_id) GROUP BY 1 ORDER BY 1"
QUESTION = "How many vacation days do employees get?"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def main() -> None:
    from moto import mock_aws

    with mock_aws():
        _run()


def _run() -> None:
    from chalice.test import Client

    from chalicelib.core.tokens import mcp_resource
    from chalicelib.gateway import demo
    from chalicelib.groups import create_app
    from chalicelib.identity.oauth.signing import issue_access_token
    from infra.bootstrap import bootstrap_all
    from tests.functional.chat import helpers
    from tests.functional.conftest import bearer, make_tenant

    bootstrap_all()
    t = make_tenant("bench-protocols@example.com", name="Bench protocols")
    demo.seed(t.workspace_id, t.region, t.email)
    world = helpers.build(t)
    member = world.member
    mcp_token = issue_access_token(user_id=member.user_id, email=member.email, workspace_id=t.workspace_id,
                                   roles=["member"], amr=["pwd", "mfa"], audience=mcp_resource())[0]
    gateway, platform = Client(create_app("gateway")), Client(create_app("platform"))
    rest = {**bearer(member.token), "Content-Type": "application/json"}

    def mcp(name: str, arguments: dict[str, object]) -> None:
        r = gateway.http.post("/mcp", headers={**bearer(mcp_token), "Content-Type": "application/json",
                                               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                               "Mcp-Name": name},
                              body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                               "params": {"name": name, "arguments": arguments, "_meta": META}}))
        assert r.status_code == 200 and not json.loads(r.body)["result"]["isError"], r.body

    def rest_query() -> None:
        assert gateway.http.post("/v1/query", headers=rest, body=json.dumps({"sql": SQL})).status_code == 200

    def rest_search() -> None:
        assert gateway.http.get("/v1/knowledge/search?q=vacation+days&k=5", headers=rest).status_code == 200

    def chats() -> None:
        body = {"model": "builtin/extractive", "messages": [{"role": "user", "content": QUESTION}]}
        assert platform.http.post("/v1/chats", headers=rest, body=json.dumps(body)).status_code == 201

    def completions() -> None:
        body = {"model": "builtin/extractive", "messages": [{"role": "user", "content": QUESTION}]}
        assert platform.http.post("/v1/chat/completions", headers=rest, body=json.dumps(body)).status_code == 200

    query = measure_pair("MCP tools/call query", lambda: mcp("query", {"sql": SQL}), "REST POST /v1/query",
                         rest_query, n=40, repeat=3, warmup=5)
    search = measure_pair("MCP tools/call search_knowledge", lambda: mcp("search_knowledge", {"q": "vacation days"}),
                          "REST GET /v1/knowledge/search", rest_search, n=40, repeat=3, warmup=5)
    chat = measure_pair("POST /v1/chat/completions", completions, "POST /v1/chats", chats, n=30, repeat=3, warmup=5)
    table("MCP and OpenAI-compatible surfaces beside the REST calls they wrap (a Member, in process)", [
        (query[0], query[1], "protocol overhead: JSON-RPC, audit event, lineage"),
        (search[0], search[1], "protocol overhead: JSON-RPC, audit event, lineage"),
        (chat[0], chat[1], "within 5% of /v1/chats"),
    ])
