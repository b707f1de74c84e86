"""Regional processing (docs/residency.md): a deployment pinned to a region answers 421 for another
region's workspace before any regional store is read, and never creates a client for another region.

Every AWS call and every client creation in the process is recorded by wrapping botocore's
``BaseClient._make_api_call`` and ``Session.create_client`` (boto3 and PynamoDB both go through them)."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import botocore.client
import botocore.session
import pytest
from chalice.test import Client

from chalicelib.core import aws, process_state
from chalicelib.core.config import settings
from chalicelib.core.regions import GLOBAL, RegionPinned
from chalicelib.core.store import tables as models
from chalicelib.core.tenancy import MembershipAttrs
from chalicelib.groups import create_app, route_permissions
from infra.resources import GLOBAL as GLOBAL_SCOPE
from infra.resources import TABLES
from infra.template import CROSSING_TABLES
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.platform.helpers import call

US, EU = "us-east-1", "eu-central-1"
URLS = {US: {"base_url": "http://us.test", "gateway_url": "http://gw-us.test"},
        EU: {"base_url": "http://eu.test", "gateway_url": "http://gw-eu.test"}}
DIRECTORY = {t.name for t in TABLES if t.scope == GLOBAL_SCOPE}


def _table(params: dict[str, Any]) -> str | None:
    """The declared (logical) name of the table a call addresses."""
    name = params.get("TableName") or next(iter(params.get("RequestItems") or {}), None)  # batch calls
    return name.removeprefix(settings().resource_prefix + "-") if name else None


@dataclass
class Recorder:
    calls: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)  # region, service, op, params
    clients: list[tuple[str, str]] = field(default_factory=list)  # service, region

    def regions(self) -> set[str]:
        return {c[0] for c in self.calls} | {c[1] for c in self.clients}

    def clear(self) -> None:
        self.calls.clear()
        self.clients.clear()


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    make_call = botocore.client.BaseClient._make_api_call
    create_client = botocore.session.Session.create_client

    def recording_call(self: Any, operation: str, params: dict[str, Any]) -> Any:
        rec.calls.append((self.meta.region_name, self.meta.service_model.service_name, operation, params))
        return make_call(self, operation, params)

    def recording_create(self: Any, service_name: str, region_name: str | None = None, *a: Any, **kw: Any) -> Any:
        rec.clients.append((service_name, region_name or ""))
        return create_client(self, service_name, region_name, *a, **kw)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording_call)
    monkeypatch.setattr(botocore.session.Session, "create_client", recording_create)
    return rec


@dataclass
class Tenants:
    us: Tenant
    eu: Tenant


@pytest.fixture
def tenants(stack: None) -> Tenants:
    return Tenants(make_tenant("us-owner@example.com", "us-east", "US Co"),
                   make_tenant("eu-owner@example.com", "eu-central", "EU GmbH"))


@pytest.fixture
def pin(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Pin this process to a region, as a regional deployment is; clients and models made before are
    forgotten so that creation is observed."""

    def set_region(region: str) -> None:  # "": not pinned (the global identity and app deployments)
        if region:
            monkeypatch.setenv("REGION", region)
        else:
            monkeypatch.delenv("REGION", raising=False)
        monkeypatch.setenv("REGIONAL_URLS", json.dumps(URLS))
        settings.cache_clear()
        process_state.reset_all(derived=True)

    yield set_region
    monkeypatch.delenv("REGION", raising=False)
    settings.cache_clear()
    process_state.reset_all(derived=True)


def _routes(group: str) -> list[tuple[str, str]]:
    app = create_app(group)
    return sorted((path, method) for path, methods in app.routes.items() for method in methods)


def _scope(group: str, path: str, method: str) -> str:
    from importlib import import_module

    from chalicelib.groups import GROUPS

    for module in GROUPS[group]:
        for route in import_module(module).api.routes:
            if route.path == path and method in route.methods:
                return "public" if route.public else route.scope
    raise AssertionError(f"{method} {path} not declared")


def _fill(path: str, workspace_id: str) -> str:
    return re.sub(r"\{[a-z_A-Z]+\}", lambda m: workspace_id if m.group(0) == "{workspace_id}" else "x_01abc",
                  path)


def _audience(group: str, path: str, method: str) -> str:
    from importlib import import_module

    from chalicelib.groups import GROUPS

    for module in GROUPS[group]:
        for route in import_module(module).api.routes:
            if route.path == path and method in route.methods:
                return route.audience.name
    raise AssertionError(f"{method} {path} not declared")


def _token(group: str, path: str, method: str, tenant: Tenant) -> str:
    """The tenant's token for the route: an MCP route takes tokens issued for an MCP resource (its region's)."""
    if _audience(group, path, method) == "service-api":
        return tenant.token
    from chalicelib.core.regions import endpoints
    from chalicelib.identity.oauth.signing import issue_access_token

    return issue_access_token(user_id=tenant.user_id, email=tenant.email, workspace_id=tenant.workspace_id,
                              roles=["admin"], amr=["pwd", "otp", "mfa"],
                              audience=endpoints(tenant.region)["gateway_url"] + "/mcp")[0]


def _problem(body: dict[str, Any]) -> dict[str, Any]:
    """The problem members of an answer (OpenAI-shaped routes carry them in their ``error`` object)."""
    return body["error"] if isinstance(body.get("error"), dict) else body


def _regional_routes(group: str) -> list[tuple[str, str]]:
    out = []
    for path, method in _routes(group):
        scope = _scope(group, path, method)
        if scope not in ("public", GLOBAL):
            out.append((path, method))
    return out


@pytest.mark.parametrize("group", ["platform", "gateway"])
def test_eu_token_at_us_deployment_is_421_before_any_eu_call(tenants: Tenants, recorder: Recorder, pin: Any,
                                                             group: str) -> None:
    pin(US)
    client = Client(create_app(group))
    routes = _regional_routes(group)
    assert len(routes) > 5
    tokens = {(path, method): _token(group, path, method, tenants.eu) for path, method in routes}
    recorder.clear()
    for path, method in routes:
        status, body, headers = call(client, method, _fill(path, tenants.eu.workspace_id), tokens[(path, method)],
                                     body={})
        assert status == 421, (method, path, status, body)
        assert headers["Content-Type"] == ("application/json" if "error" in body else "application/problem+json")
        body = _problem(body)
        assert body["code"] == "wrong_region"
        assert body["region"] == EU
        assert body["residency"] == "eu-central"
        assert body["api_base_url"] == "http://eu.test/v1"
        assert body["gateway_url"] == "http://gw-eu.test"
    assert EU not in recorder.regions(), [c for c in recorder.calls if c[0] == EU]
    tables = {_table(c[3]) for c in recorder.calls}
    assert tables <= DIRECTORY, tables  # only the global directory was read (workspace region, signing keys)


def test_eu_token_at_us_graphql_is_421(tenants: Tenants, recorder: Recorder, pin: Any) -> None:
    pin(US)
    client = Client(create_app("gateway"))
    recorder.clear()
    status, body, _ = call(client, "POST", "/graphql", tenants.eu.token, body={"query": "{ connectors { id } }"})
    assert status == 421
    ext = body["errors"][0]["extensions"]
    assert ext["code"] == "WRONG_REGION"
    assert ext["api_base_url"] == "http://eu.test/v1"
    assert EU not in recorder.regions()


@pytest.mark.parametrize("group", ["platform", "gateway"])
def test_us_token_at_eu_deployment_is_421_and_reads_only_the_directory(tenants: Tenants, recorder: Recorder,
                                                                        pin: Any, group: str) -> None:
    pin(EU)
    client = Client(create_app(group))
    tokens = {(path, method): _token(group, path, method, tenants.us) for path, method in _regional_routes(group)}
    recorder.clear()
    for path, method in _regional_routes(group):
        status, body, _ = call(client, method, _fill(path, tenants.us.workspace_id), tokens[(path, method)],
                               body={})
        assert status == 421, (path, body)
        body = _problem(body)
        assert body["region"] == US, (path, body)
        assert body["api_base_url"] == "http://us.test/v1", (path, body)
    us_calls = [c for c in recorder.calls if c[0] == US]
    assert {c[1] for c in us_calls} <= {"dynamodb"}
    assert {_table(c[3]) for c in us_calls} <= DIRECTORY


def test_each_region_serves_its_own_workspaces(tenants: Tenants, recorder: Recorder, pin: Any) -> None:
    pin(EU)
    platform, gateway = Client(create_app("platform")), Client(create_app("gateway"))
    recorder.clear()
    status, body, _ = call(platform, "GET", f"/v1/workspaces/{tenants.eu.workspace_id}", tenants.eu.token)
    assert status == 200
    assert body["api_base_url"] == "http://eu.test/v1"
    assert body["gateway_url"] == "http://gw-eu.test"
    assert call(platform, "GET", "/v1/audit/events", tenants.eu.token)[0] == 200
    assert call(gateway, "GET", "/v1/connectors", tenants.eu.token)[0] == 200
    assert {c[0] for c in recorder.calls if _table(c[3]) not in DIRECTORY} == {EU}


def test_global_routes_are_served_only_by_the_global_deployment(tenants: Tenants, pin: Any) -> None:
    pin(EU)
    platform = Client(create_app("platform"))
    status, body, _ = call(platform, "GET", "/v1/me", tenants.eu.token)
    assert status == 421
    assert body["code"] == "global_route"
    assert body["api_base_url"] == "http://us.test/v1"
    status, body, _ = call(platform, "POST", "/v1/workspaces", tenants.eu.token,
                           body={"name": "New", "residency": "eu-central"})
    assert status == 421
    assert body["code"] == "global_route"


def test_me_names_every_workspaces_base_urls(tenants: Tenants, pin: Any) -> None:
    eu_again = make_tenant("us-owner@example.com", "eu-central", "US Co Europe")
    pin(US)
    status, body, _ = call(Client(create_app("platform")), "GET", "/v1/me", tenants.us.token)
    assert status == 200
    assert body["workspace"]["api_base_url"] == "http://us.test/v1"
    urls = {w["workspace_id"]: (w["region"], w["api_base_url"], w["gateway_url"]) for w in body["workspaces"]}
    assert urls == {tenants.us.workspace_id: (US, "http://us.test/v1", "http://gw-us.test"),
                    eu_again.workspace_id: (EU, "http://eu.test/v1", "http://gw-eu.test")}


# the fields a global operation writes into another region, by table (docs/residency.md, "What crosses")
CROSSING_FIELDS = {
    "memberships": {"workspace_id", "user_id", "role", "email", "joined_at", "joined_via", "role_since"},
    "audit_events": {"workspace_id", "seq", "id", "occurred_at", "actor", "action", "target",
                            "correlation_id", "ip", "user_agent", "details", "prev_hash", "hash", "v", "personal"},
    "audit_personal": {"workspace_id", "ref", "subject", "email", "nonce", "values"},
    "audit_heads": {"workspace_id", "seq", "hash", "occurred_at"},
    "idempotency": {"user_id", "key", "request_hash", "state", "token", "claimed_until", "expires_at"},
}


def _writes(calls: list[tuple[str, str, str, dict[str, Any]]]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The calls with each item of a TransactWriteItems as its own (PutItem, UpdateItem, ...) call."""
    out = []
    for region, service, op, params in calls:
        if op != "TransactWriteItems":
            out.append((region, service, op, params))
            continue
        for entry in params["TransactItems"]:
            (kind, item_params), = entry.items()
            out.append((region, service, {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                                          "ConditionCheck": "ConditionCheck"}[kind], item_params))
    return out


def test_creating_an_eu_workspace_at_the_global_deployment_writes_only_minimal_eu_records(
        tenants: Tenants, recorder: Recorder, pin: Any) -> None:
    pin(US)  # the us-east-1 platform doubles as the global deployment
    platform = Client(create_app("platform"))
    recorder.clear()
    status, body, _ = call(platform, "POST", "/v1/workspaces", tenants.us.token,
                           body={"name": "Zweig", "residency": "eu-central"}, headers={"Idempotency-Key": "k-1"})
    assert status == 201
    assert body["api_base_url"] == "http://eu.test/v1"
    assert body["region"] == EU
    eu_calls = _writes([c for c in recorder.calls if c[0] == EU])
    assert eu_calls
    assert {c[1] for c in eu_calls} == {"dynamodb"}  # no EU bucket, queue or key touched
    assert {_table(c[3]) for c in eu_calls} <= set(CROSSING_TABLES)
    for _, _, op, params in eu_calls:
        if op == "PutItem":
            fields = CROSSING_FIELDS[_table(params)]
            if fields is not None:
                assert set(params["Item"]) <= fields, (params["TableName"], set(params["Item"]) - fields)
            if _table(params) == "audit_events":
                assert set(json.loads(params["Item"]["details"]["S"])) <= {"name", "slug", "residency", "enforce_mfa"}
        if op == "UpdateItem" and _table(params) == "idempotency":  # done: a reference, never the answer
            values = json.dumps(params.get("ExpressionAttributeValues", {}))
            assert "Zweig" not in values and "@" not in values


def test_pinned_factories_refuse_other_regions(pin: Any) -> None:
    pin(US)
    with pytest.raises(RegionPinned):
        models.regional(MembershipAttrs, EU)
    with pytest.raises(RegionPinned):
        aws.client("sqs", EU)
    with pytest.raises(RegionPinned):
        models.connection(EU)
    pin(EU)
    with pytest.raises(RegionPinned):
        models.regional(MembershipAttrs, US)  # regional stores of the global region too
    assert aws.client("dynamodb", US)  # the global directory is reachable from every region


def test_token_exchange_and_discovery_name_the_regional_urls(tenants: Tenants, pin: Any) -> None:
    eu_again = make_tenant("us-owner@example.com", "eu-central", "US Co Europe")
    pin("")  # identity is global: it looks up memberships in every region
    identity = Client(create_app("identity"))
    from chalicelib.identity.oauth.signing import issue_access_token

    token, _ = issue_access_token(user_id=tenants.us.user_id, email=tenants.us.email, workspace_id=tenants.us.workspace_id,
                                  roles=["admin"], amr=["pwd", "otp", "mfa"])
    form = ("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&subject_token_type="
            "urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token&subject_token=" + token
            + "&workspace_id=" + eu_again.workspace_id)
    r = identity.http.post("/oauth2/token", headers={"Content-Type": "application/x-www-form-urlencoded"},
                           body=form.encode())
    assert r.status_code == 200, r.body
    answer = json.loads(r.body)
    assert answer["api_base_url"] == "http://eu.test/v1"
    assert answer["gateway_url"] == "http://gw-eu.test"
    doc = json.loads(identity.http.get("/.well-known/openid-configuration").body)
    assert doc["regional_endpoints"]["eu-central"]["api_base_url"] == "http://eu.test/v1"


def test_every_route_has_a_known_scope() -> None:
    assert route_permissions()  # routes registered
    for group in ("platform", "gateway"):
        for path, method in _routes(group):
            assert _scope(group, path, method) in ("public", "workspace", "path", "global")


def test_workers_do_only_their_regions_work(tenants: Tenants, recorder: Recorder, pin: Any) -> None:
    from chalicelib.core.ids import new_id
    from chalicelib.gateway.ingest import sync_worker
    from chalicelib.workers import jobs

    pin(EU)
    recorder.clear()
    message = {"workspace_id": tenants.us.workspace_id, "sync_id": new_id("sync"), "connector_id": new_id("conn")}
    result = sync_worker.handle({"Records": [{"messageId": "m-1", "body": json.dumps(message), "awsRegion": EU}]})
    assert result["batchItemFailures"] == [{"itemIdentifier": "m-1"}]  # redelivered, then dead-lettered
    assert {_table(c[3]) for c in recorder.calls if c[0] == US} <= DIRECTORY
    scheduled = {job.name for job in jobs.SCHEDULED if jobs.runs_here(job)}
    assert "expire_support_grants" in scheduled
    assert "rotate_signing_keys" not in scheduled
    pin(US)
    assert "rotate_signing_keys" in {job.name for job in jobs.SCHEDULED if jobs.runs_here(job)}
    recorder.clear()
    jobs.expire_support_grants({})  # a scheduled job iterates only its region's workspaces
    assert EU not in recorder.regions()


def test_a_regional_deployment_updates_its_workspace_in_the_global_directory(tenants: Tenants, pin: Any) -> None:
    """A settings change at the EU deployment is one transaction on the global directory; pinning must
    allow that global table while still refusing other regions' stores."""
    pin(EU)
    platform = Client(create_app("platform"))
    path = f"/v1/workspaces/{tenants.eu.workspace_id}"
    status, body, _ = call(platform, "PATCH", path, tenants.eu.token, {"name": "EU GmbH renamed"})
    assert status == 200
    assert body["name"] == "EU GmbH renamed"
    assert call(platform, "GET", path, tenants.eu.token)[1]["name"] == "EU GmbH renamed"
