"""Every surface that can return dataset content, as the leak matrix reads it: ``SURFACES`` is the one
list. Each entry is a small function that performs that surface's reads as the workspace's Member over the
matrix datasets and returns everything the Member (or the stored artefact) got, as text. A new surface
joins the matrix by appending one ``Surface`` here.

``acl_applies``: the surface answers a caller, so rows of a document restricted from the Member must not
be in it (False for the index objects, which hold every row for every reader and are masked at read).
``shows_values``: the surface returns row values, so an ALLOW value of an open row must be there (the
check that the surface was really read).
"""
from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalice.test import Client

from chalicelib.core import aws
from chalicelib.groups import create_app
from chalicelib.workers import jobs
from tests.functional.agents.helpers import deliver
from tests.functional.platform.helpers import call
from tests.functional.reader.world import TOPIC, World


@dataclass(frozen=True)
class Surface:
    name: str
    read: Callable[[World], str]
    acl_applies: bool = True
    shows_values: bool = False


def _ok(status: int, body: Any, what: str) -> None:
    assert 200 <= status < 300, f"{what}: {status} {body}"


def _dump(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def rest_query(w: World) -> str:
    out = []
    with Client(create_app("gateway")) as c:
        for policy in w.policies:
            for sql in (f"SELECT * FROM {w.name(policy)}",
                        f"SELECT *, count(*) OVER () AS n FROM {w.name(policy)} ORDER BY 1"):
                status, body, _ = call(c, "POST", "/v1/query", w.member.token, {"sql": sql})
                _ok(status, body, sql)
                out.append(_dump(body))
    return "\n".join(out)


def graphql(w: World) -> str:
    lineage = " ".join(f'l_{p.lower()}: lineage(datasetId: "{w.datasets[p]}") {{ nodes {{ id type name }} }}'
                       for p in w.policies)
    query = ("{ datasets(first: 25) { edges { node { id name description schema { name policy } } } } "
             "policies { id field policy } " + lineage + " }")
    with Client(create_app("gateway")) as c:
        status, body, _ = call(c, "POST", "/graphql", w.member.token, {"query": query})
    _ok(status, body, "graphql")
    assert "errors" not in body, body
    return _dump(body)


def knowledge_search(w: World) -> str:
    out = []
    with Client(create_app("gateway")) as c:
        for q in (TOPIC, "entry books part"):
            status, body, _ = call(c, "GET", f"/v1/knowledge/search?q={q.replace(' ', '+')}&k=50", w.member.token)
            _ok(status, body, "search")
            out.append(_dump(body))
    return "\n".join(out)


def _question(policy: str) -> str:
    return f"What is the {TOPIC} entry of the {policy.lower()} books?"


def _chats(w: World) -> dict[str, list[Any]]:
    """Every chat of the matrix, asked once (plain and streamed per policy) and kept in the world."""
    if "_chats" not in w.cache:
        plain, streamed, ids = [], [], []
        with Client(create_app("platform")) as c:
            for policy in w.policies:
                for stream in (False, True):
                    body = {"model": "auto", "messages": [{"role": "user", "content": _question(policy)}],
                            "stream": stream}
                    r = c.http.post("/v1/chats", headers={"Authorization": f"Bearer {w.member.token}",
                                                          "Content-Type": "application/json"}, body=json.dumps(body))
                    _ok(r.status_code, r.body, "chat")
                    text = r.body.decode()
                    (streamed if stream else plain).append(text)
                    if not stream:
                        ids.append(json.loads(text)["chat_id"])
        w.cache["_chats"] = json.dumps({"plain": plain, "streamed": streamed, "ids": ids})
    return json.loads(w.cache["_chats"])


def chat_plain(w: World) -> str:
    return "\n".join(_chats(w)["plain"])


def chat_streamed(w: World) -> str:
    return "\n".join(_chats(w)["streamed"])


def stored_chat(w: World) -> str:
    ids = _chats(w)["ids"]
    out = []
    with Client(create_app("platform")) as c:
        status, body, _ = call(c, "GET", "/v1/chats", w.member.token)
        _ok(status, body, "list chats")
        out.append(_dump(body))
        for chat_id in ids:
            status, body, _ = call(c, "GET", f"/v1/chats/{chat_id}", w.member.token)
            _ok(status, body, "get chat")
            out.append(_dump(body))
    return "\n".join(out)


def agent_run(w: World, scoped: bool = False) -> str:
    """An agent (created by the Admin) whose plan searches and queries every matrix dataset, run by the
    Member: every step's input and output and the run's answer. ``scoped``: the agent is limited to the
    matrix datasets (its ticked datasets), which must narrow nothing of the policies."""
    plan = [{"name": "search", "tool": "knowledge_search", "input": {"query": TOPIC, "limit": 20}}]
    plan += [{"name": f"rows_{p.lower()}", "tool": "query", "input": {"sql": f"SELECT * FROM {w.name(p)}"}}
             for p in w.policies]
    agent = {"name": "Matrix reader", "instructions": "Read the books.", "model": "auto",
             "tools": ["knowledge_search", "query"], "plan": plan,
             "limits": {"max_steps": 8, "deadline": "PT10M", "max_tokens": 4000}}
    if scoped:
        agent["datasets"] = sorted(w.datasets.values())
    with Client(create_app("platform")) as c:
        status, created, _ = call(c, "POST", "/v1/agents", w.tenant.token, agent)
        _ok(status, created, "create agent")
        status, run, _ = call(c, "POST", f"/v1/agents/{created['id']}/runs", w.member.token, {"input": {}})
        _ok(status, run, "start run")
        deliver(w.tenant.region)
        status, done, _ = call(c, "GET", f"/v1/agents/{created['id']}/runs/{run['id']}", w.member.token)
        _ok(status, done, "get run")
    assert done["status"] == "completed", done
    assert [s["tool"] for s in done["steps"]] == ["knowledge_search"] + ["query"] * len(w.policies), done
    return _dump(done)


def index_objects(w: World) -> str:
    s3 = aws.client("s3", w.tenant.region)
    bucket = aws.bucket_name("knowledge", w.tenant.region)
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"indexes/{w.tenant.workspace_id}/"):
        for obj in page.get("Contents", []):
            data = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            if obj["Key"].endswith(".gz"):
                import gzip

                data = gzip.decompress(data)
            out.append(data.decode("utf-8", "replace"))
    assert out, "no index object was written"
    return "\n".join(out)


def own_export(tenant: Any, user: Any) -> str:
    """Every file of every part of ``user``'s export of their own account (run by the residency worker's code
    with the composition root's views)."""
    from chalicelib.residency import access_requests

    region, ws = tenant.region, tenant.workspace_id
    with Client(create_app("platform")) as c:
        status, req, _ = call(c, "POST", "/v1/access-requests", user.token, {"kind": "export", "user_id": user.user_id})
        _ok(status, req, "access request")
    assert access_requests.run(region, ws, req["id"], jobs.private_views())["status"] == "completed"
    out = []
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name("access-exports", region)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"exports/{ws}/{req['id']}/"):
        for obj in page.get("Contents", []):
            with zipfile.ZipFile(io.BytesIO(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())) as z:
                out.extend(json.dumps(_unnested(json.loads(line))) for n in z.namelist()
                           for line in z.read(n).decode().splitlines())
    assert out, "the export holds no file"
    return "\n".join(out)


def _unnested(value: Any) -> Any:
    """``value`` with the JSON text its items hold (stored attributes such as ``messages`` or ``value``) decoded,
    so a copy shows as it would in an API answer."""
    if isinstance(value, dict):
        return {k: _unnested(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unnested(v) for v in value]
    if isinstance(value, str) and value[:1] in "[{\"":
        try:
            return _unnested(json.loads(value))
        except ValueError:
            return value
    return value


def access_request_export(w: World) -> str:
    """The Member's own export (after the chats and the agent run): every file of every part."""
    _chats(w)
    return own_export(w.tenant, w.member)


def lineage(w: World) -> str:
    _chats(w)  # chat answers are lineage nodes
    out = []
    with Client(create_app("gateway")) as c:
        for policy in w.policies:
            status, body, _ = call(c, "GET", f"/v1/lineage/{w.datasets[policy]}?depth=2", w.member.token)
            _ok(status, body, "lineage")
            out.append(_dump(body))
    return "\n".join(out)


def mcp_tools(w: World) -> str:
    """The gateway's MCP server, called as the Member with an MCP token in both protocol revisions: every
    tool that reads datasets (query, knowledge search, dataset search and schema, lineage)."""
    from chalicelib.core.tokens import mcp_resource
    from chalicelib.identity.oauth.signing import issue_access_token
    from tests.functional.gateway.test_mcp import rpc

    token, _ = issue_access_token(user_id=w.member.user_id, email=w.member.email,
                                  workspace_id=w.tenant.workspace_id, roles=["member"], amr=["pwd", "mfa"],
                                  audience=mcp_resource())
    _chats(w)  # chat answers are lineage nodes
    calls = [("search_knowledge", {"q": TOPIC, "k": 50}), ("search_datasets", {})]
    for policy in w.policies:
        calls += [("query", {"sql": f"SELECT * FROM {w.name(policy)}"}),
                  ("get_dataset_schema", {"dataset_id": w.datasets[policy]}),
                  ("get_lineage", {"dataset_id": w.datasets[policy], "depth": 2})]
    out = []
    with Client(create_app("gateway")) as c:
        for modern in (True, False):
            for rid, (name, arguments) in enumerate(calls, start=1):
                r = rpc(c, token, "tools/call", {"name": name, "arguments": arguments}, modern=modern, rid=rid)
                _ok(r.status_code, r.body, f"mcp {name}")
                body = json.loads(r.body)
                assert "error" not in body and body["result"]["isError"] is False, (name, body)
                out.append(r.body.decode())
    return "\n".join(out)


def openai_chat_completions(w: World) -> str:
    """``POST /v1/chat/completions`` as the Member, plain and streamed (every chunk), per matrix policy."""
    out = []
    with Client(create_app("platform")) as c:
        for policy in w.policies:
            for stream in (False, True):
                body = {"model": "auto", "messages": [{"role": "user", "content": _question(policy)}],
                        "stream": stream, **({"stream_options": {"include_usage": True}} if stream else {})}
                r = c.http.post("/v1/chat/completions", body=json.dumps(body),
                                headers={"Authorization": f"Bearer {w.member.token}", "Content-Type": "application/json"})
                _ok(r.status_code, r.body, "chat completions")
                out.append(r.body.decode())
    return "\n".join(out)


SURFACES: list[Surface] = [
    Surface("rest_query", rest_query, shows_values=True),
    Surface("graphql", graphql),
    Surface("knowledge_search", knowledge_search, shows_values=True),
    Surface("chat_plain", chat_plain),
    Surface("chat_streamed", chat_streamed),
    Surface("stored_chat", stored_chat),
    Surface("agent_run", agent_run, shows_values=True),
    Surface("agent_run_scoped", lambda w: agent_run(w, scoped=True), shows_values=True),
    Surface("index_objects", index_objects, acl_applies=False, shows_values=True),
    Surface("access_request_export", access_request_export),
    Surface("lineage", lineage),
    Surface("mcp_tools", mcp_tools, shows_values=True),
    Surface("openai_chat_completions", openai_chat_completions),
]


def read(w: World, surface: Surface) -> str:
    """What ``surface`` returned in this module (read once)."""
    if surface.name not in w.cache:
        w.cache[surface.name] = surface.read(w)
    return w.cache[surface.name]
