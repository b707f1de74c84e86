"""Every platform route, table-driven, on one shared two-workspace scenario (these calls must not change
it): tenancy -- workspace B's tokens (B's Admin, and a user who is Admin of both A and B holding a token
for B) on workspace A's resources get 404/403 and leak nothing -- and bad input -- unknown fields, wrong
types, bad e-mail, unknown role or residency, oversized body, malformed JSON, bad query parameters and
unknown ids get a 4xx problem+json and write nothing (every table of both regions, the archive buckets
and the mail counters compared before and after)."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from chalice.test import Client

from chalicelib.groups import create_app
from chalicelib.identity.oauth import signing
from tests.functional.conftest import _wipe, reset_process_state
from tests.functional.platform import scenario
from tests.functional.platform.helpers import call
from tests.functional.platform.scenario import ROUTES, Route

APP = create_app("platform")
IDS = [f"{r.method} {r.template}" for r in ROUTES]


@pytest.fixture(scope="module")
def s(_moto: None) -> Iterator[scenario.Scenario]:
    reset_process_state()  # first: settings cached inside a Chalice test request carry .chalice/config.json's env
    _wipe()
    signing.ensure_key()
    yield scenario.build()
    reset_process_state()


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_tenancy_other_workspace_gets_404_and_nothing(s: scenario.Scenario, route: Route) -> None:
    client = Client(APP)
    tokens = [s.b.token] + ([s.dual.token] if route.foreign is not None else [])
    for token in tokens:
        before = scenario.snapshot()
        status, body, _ = call(client, route.method, s.path(route.template), token, route.body)
        text = json.dumps(body)
        if route.foreign is not None:
            assert status in route.foreign, (status, body)
            assert scenario.snapshot() == before  # nothing of A changed, nothing written
        else:
            assert status < 400, (status, body)
        if route.template != "/v1/openapi.json":
            leaked = [x for x in s.secrets if x in text]
            assert not leaked, (route, leaked)


_BASELINE: dict[str, dict] = {}  # bad-input cases write nothing, so one snapshot carries to the next case

def _bad_cases(route: Route) -> list[tuple[str, dict]]:
    cases = []
    if route.method in ("POST", "PATCH"):
        base = route.body if isinstance(route.body, dict) else {}
        cases.append(("unknown field", {"body": {**base, "zzz_unknown": 1}, "status": (400,)}))
        cases.append(("not an object", {"body": [1, 2, 3], "status": (400,)}))
        cases.append(("malformed JSON", {"raw": '{"name": "x", ', "status": (400,)}))
        cases.append(("oversized", {"raw": '{"name": "' + "x" * (300 * 1024) + '"}', "status": (413,)}))
        for label, body, status in route.bad:
            cases.append((label, {"body": body, "status": (status,)}))
    if route.method == "GET" and route.template not in ("/v1/me", "/v1/openapi.json"):
        cases.append(("unknown query parameter", {"query": "zzz_unknown=1", "status": (400,)}))
    if route.method == "GET" and any(x in route.template for x in ("members", "invitations", "support-grants",
                                                                     "audit", "/v1/workspaces")) \
            and not route.template.endswith("}") and "joinable" not in route.template:
        cases.append(("limit too large", {"query": "limit=100000", "status": (400,)}))
        cases.append(("limit not a number", {"query": "limit=ten", "status": (400,)}))
        cases.append(("forged cursor", {"query": "after=eyJrIjoieCIsInYiOjF9", "status": (400,)}))
    if route.method == "DELETE" or "{inv}" in route.template or "{user}" in route.template or "{grant}" in route.template:
        cases.append(("unknown id", {"ids": True, "body": route.body, "status": (404,)}))
    return cases


CASES = [(r, label, spec) for r in ROUTES for label, spec in _bad_cases(r)]


@pytest.mark.parametrize("route, label, spec", CASES, ids=[f"{r.method} {r.template} [{label}]" for r, label, _ in CASES])
def test_bad_input_is_a_problem_and_writes_nothing(s: scenario.Scenario, route: Route, label: str, spec: dict) -> None:
    client = Client(APP)
    path = s.path(route.template)
    if spec.get("ids"):
        path = route.template.format(ws=s.a.workspace_id, user="usr_01AAAAAAAAAAAAAAAAAAAAAAAA",
                                     inv="inv_01AAAAAAAAAAAAAAAAAAAAAAAA", grant="grant_01AAAAAAAAAAAAAAAAAAAAAAAA")
    if "query" in spec:
        path += "?" + spec["query"]
    before = _BASELINE.get("snapshot") or scenario.snapshot()
    _BASELINE["snapshot"] = before
    status, body, headers = call(client, route.method, path, s.a.token, spec.get("body"), raw=spec.get("raw"))
    assert status in spec["status"], (status, body)
    assert headers["Content-Type"] == "application/problem+json"
    assert body["code"]
    assert body["detail"]
    assert body["correlation_id"]
    after = scenario.snapshot()
    _BASELINE["snapshot"] = after  # a failure here must not cascade into the next cases
    assert after == before


def test_the_snapshot_sees_every_kind_of_write(s: scenario.Scenario) -> None:
    """The comparisons above are only as good as the snapshot: an item, an object or a mail shows in it."""
    from chalicelib.core import aws, mail

    before = scenario.snapshot()
    ddb = aws.client("dynamodb", "us-east-1")
    ddb.put_item(TableName=aws.table_name("revoked_tokens"), Item={"jti": {"S": "snapshot-probe"}})
    after_item = scenario.snapshot()
    assert after_item != before
    aws.client("s3", "eu-central-1").put_object(Bucket=aws.bucket_name("data", "eu-central-1"), Key="probe", Body=b"x")
    after_object = scenario.snapshot()
    assert after_object != after_item
    mail.send("probe@example.com", "probe", "probe", region="eu-central-1")
    assert scenario.snapshot() != after_object
    ddb.delete_item(TableName=aws.table_name("revoked_tokens"), Key={"jti": {"S": "snapshot-probe"}})
    aws.client("s3", "eu-central-1").delete_object(Bucket=aws.bucket_name("data", "eu-central-1"), Key="probe")
