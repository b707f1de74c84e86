"""AWS round trips per request, counted (every botocore call), against the targets: a chat answer at
most 3 (its scope one batch read, its model settings kept while their version stands), an agent run of 4
tool steps at most 10 (its tools' own calls included; the delivery's scope and the starter's membership in
one read, the catalog version at most once per delivery within its bound). A regression fails."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import botocore.exceptions
import botocore.session
import pytest
from chalice.test import Client

from chalicelib.agents.runtime import worker
from chalicelib.core import aws, clock, process_state, tokens
from chalicelib.core.config import settings
from chalicelib.core.store.tables import connection, global_model, regional
from chalicelib.core.tenancy import MembershipAttrs, WorkspaceAttrs
from chalicelib.core.tokens import SigningKeyAttrs
from chalicelib.gateway import demo
from chalicelib.groups import create_app, prime, warm_up
from chalicelib.workers import jobs
from infra.local.workers import sqs_event
from tests.functional.agents.helpers import DEMO_PLAN_AGENT, create_agent, get_run, member, receive, start_run
from tests.functional.aws_calls import counting, route_calls
from tests.functional.chat import helpers as chat_helpers
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import call

ROOT = Path(__file__).resolve().parents[2]
CHAT_MAX = 3
AGENT_RUN_MAX = 10
SQL = "SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY n DESC, city LIMIT 2"


def test_a_chat_answer_makes_at_most_3_round_trips(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    chat_helpers.use_providers(monkeypatch, None)
    world = chat_helpers.build(tenant)
    with clock.frozen(), Client(create_app("platform")) as c:  # within the catalog check's bound, however loaded
        # warm: the first request of a container loads keys and the knowledge index (not per request)
        assert call(c, "POST", "/v1/chats", world.member.token, chat_helpers.ask("How is travel booked?"))[0] == 201
        with counting() as calls:
            status, reply, _ = call(c, "POST", "/v1/chats", world.member.token,
                                    chat_helpers.ask("How many vacation days do employees get?"))
        assert status == 201, reply
    calls = route_calls(calls)
    print("chat round trips:", sum(calls.values()), dict(calls))
    assert sum(calls.values()) <= CHAT_MAX, dict(calls)
    # the question with the answer's state: one transaction; the answer (the chat, its lineage, the usage
    # counter, the audit event with its head, the answer's events and its status): one transaction. (Under
    # the queue, the worker adds its message, a read and a claim of the state, the chat's read and routing
    # again: chat/answers.py.)
    assert calls["dynamodb TransactWriteItems "] == 2, dict(calls)
    assert not [k for k in calls if k.startswith(("dynamodb PutItem", "dynamodb BatchWriteItem",
                                                  "dynamodb UpdateItem"))], dict(calls)


def test_an_agent_run_of_4_tool_steps_makes_at_most_10_aws_calls(tenant: Tenant) -> None:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email, on_changed=jobs.index_changed_dataset)  # as make run
    user = member(tenant.workspace_id)
    with Client(create_app("platform")) as c:
        agent = create_agent(c, user.token, DEMO_PLAN_AGENT)
        run = start_run(c, user.token, agent["id"], {"topic": "customers", "sql": SQL})[1]
        msgs = receive(tenant.region)
        with counting() as calls, clock.frozen():  # the run within the catalog version's bound, however loaded
            result = worker.handle(sqs_event(msgs, tenant.region, "arn:aws:sqs:us-east-1:000000000000:agent-runs"))
        assert result["batchItemFailures"] == []
        done = get_run(c, user.token, agent["id"], run["id"])
    assert done["status"] == "completed"
    assert len(done["steps"]) == 4
    print("agent run AWS calls:", sum(calls.values()), dict(calls))
    assert sum(calls.values()) <= AGENT_RUN_MAX, dict(calls)
    assert calls["dynamodb TransactWriteItems "] == 5  # one per step and the finish
    assert calls["sqs SendMessage "] == 1  # the query step's lineage, written by the gateway's worker
    # the delivery's scope and the starter's membership: one read (tenancy.begin_work); the catalog version at
    # most once per delivery, not per tool (none here: the run's start checked it within the bound)
    assert calls["dynamodb GetItem catalog_versions"] <= 1, dict(calls)
    assert not [k for k in calls if k.startswith("dynamodb GetItem")
                and not k.endswith(("agent_runs", "catalog_versions"))], dict(calls)
    assert sum(n for k, n in calls.items() if k.startswith("dynamodb BatchGetItem")) == 1, dict(calls)


def test_a_process_start_builds_what_requests_need_without_an_aws_call(stack: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``groups.warm_up`` (Lambda's init phase, and `make run` before a group serves) makes the AWS clients and
    the table classes that authorizing a request uses, with no AWS call (it cannot fail for the network); the
    first request then makes none of them."""
    monkeypatch.setenv("REGION", "eu-central-1")
    settings.cache_clear()
    try:
        process_state.reset_all(derived=True)  # a fresh process: no client, no bound table class
        with counting() as calls:
            warm_up()
        assert not calls, dict(calls)
        made: list[str] = []
        real = botocore.session.Session.create_client

        def create_client(self: Any, service: str, *args: Any, **kwargs: Any) -> Any:
            made.append(service)
            return real(self, service, *args, **kwargs)

        monkeypatch.setattr(botocore.session.Session, "create_client", create_client)
        for region in ("eu-central-1", settings().global_region):
            aws.client("dynamodb", region)
        aws.client("sqs", "eu-central-1")
        global_model(SigningKeyAttrs), global_model(WorkspaceAttrs), regional(MembershipAttrs, "eu-central-1")
        connection("eu-central-1")
        assert made == []
    finally:
        monkeypatch.delenv("REGION")
        settings.cache_clear()
        process_state.reset_all(derived=True)


def test_priming_reads_what_the_first_verification_would(tenant: Tenant, caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``groups.prime`` (`make run` before a group serves, a Lambda's init phase) reads the signing keys and the
    revocation watermark, so a container's first request reads neither; when that read fails it is logged and
    left to the first request, which still verifies."""
    tokens.verifier().clear()  # a fresh container: nothing read yet
    with clock.frozen(), counting() as calls:
        prime()
        primed = dict(calls)
        calls.clear()
        assert tokens.verifier().claims(tenant.token)["sub"] == tenant.user_id
    assert primed == {"dynamodb Scan signing_keys": 1, "dynamodb GetItem revoked_tokens": 1}, primed
    assert not [k for k in calls if k.endswith(("signing_keys", "revoked_tokens"))], dict(calls)

    tokens.verifier().clear()

    def unreachable(self: tokens.KeyRing) -> None:
        raise botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:1")

    with monkeypatch.context() as patched:
        patched.setattr(tokens.KeyRing, "_load", unreachable)
        prime()  # no exception: the process starts serving anyway
    assert "priming the token verifier failed" in caplog.text
    with counting() as calls:
        assert tokens.verifier().claims(tenant.token)["sub"] == tenant.user_id
    assert calls["dynamodb Scan signing_keys"] == 1, dict(calls)


@pytest.mark.parametrize("in_lambda", [True, False])
def test_app_py_primes_only_inside_lambda(stack: None, monkeypatch: pytest.MonkeyPatch, in_lambda: bool) -> None:
    """Importing ``app.py`` (a Lambda's init phase) primes the verifier inside Lambda only: tools that import it
    elsewhere (packaging, benchmarks) make no AWS call."""
    monkeypatch.setenv("ROUTE_GROUP", "platform")
    if in_lambda:
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "aiplat-platform")
    else:
        monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    settings.cache_clear()
    tokens.verifier().clear()
    try:
        spec = importlib.util.spec_from_file_location("app", ROOT / "app.py")
        assert spec is not None and spec.loader is not None
        with counting() as calls:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
    finally:
        settings.cache_clear()
    primed = {k: n for k, n in calls.items() if k.endswith(("signing_keys", "revoked_tokens"))}
    assert primed == ({"dynamodb Scan signing_keys": 1, "dynamodb GetItem revoked_tokens": 1} if in_lambda else {})
    assert sum(calls.values()) == sum(primed.values()), dict(calls)
