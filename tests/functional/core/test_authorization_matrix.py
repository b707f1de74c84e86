"""The authorization matrix, generated: every workspace route of every group's route table and every
GraphQL root field (``gateway/api/graphql_api.ROOT_FIELDS``) x every kind of caller, checked against the one
permission map (``core/authz.PERMISSIONS``). A route or field added later is covered without edits.

Callers: Admin, Member, Viewer; a removed member (token still valid, membership gone); a demoted member
(token says admin, membership says viewer); another workspace's Admin (path ids of this workspace); and
an Admin token without a second factor after the workspace turned ``enforce_mfa`` on. A route that takes
tokens of another audience (the MCP endpoint) is called with that audience's tokens; a route with its own
error shape (OpenAI's ``error`` object) has its ``code`` read from there.
"""
from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.authz import AUTHENTICATED, PERMISSIONS
from chalicelib.core.tenancy import get_workspace, memberships
from chalicelib.core.tokens import API, mcp_resource
from chalicelib.gateway.api import graphql_api
from chalicelib.groups import GROUPS, HTTP_GROUPS, create_app
from chalicelib.identity import users
from chalicelib.identity.oauth.signing import issue_access_token
from tests.functional.conftest import _wipe, bearer, make_tenant, reset_process_state, signing_key
from tests.functional.gateway.data import field, put_connector, put_dataset

CALLERS = ("admin", "member", "viewer", "removed", "demoted", "other_admin", "no_mfa")
REFUSALS = {"forbidden", "membership_revoked", "mfa_required"}


@dataclass(frozen=True)
class Row:
    group: str
    method: str
    path: str
    permission: str
    audience: str = API.name


def workspace_routes() -> list[Row]:
    """Every route bound to the token's workspace (not public, not user-level), from the route tables."""
    rows = []
    for group in HTTP_GROUPS:
        for module in GROUPS[group]:
            for route in importlib.import_module(module).api.routes:
                if route.public or route.permission == AUTHENTICATED:
                    continue
                rows.extend(Row(group, m, route.path, route.permission or "", route.audience.name)
                            for m in route.methods)
    return rows


ROUTES = workspace_routes()
APPS = {group: create_app(group) for group in HTTP_GROUPS}


def allowed(role: str, permission: str) -> bool:
    return any(r.value == role for r in PERMISSIONS.get(permission, ()))


@dataclass
class World:
    ws: str
    region: str
    tokens: dict[str, str]
    mfa_ws: str
    mcp_tokens: dict[str, str]
    connector: str
    dataset: str


def _user_token(ws: str, role_in_membership: str | None, token_roles: list[str], amr: list[str],
                audience: str | None = None) -> str:
    email = f"{'-'.join(token_roles)}-{clock.iso()[-9:-1].replace(':', '').replace('.', '')}-{id(amr)}@example.com"
    user = users.create_user(email, email_verified=True)
    region = get_workspace(ws).region
    memberships(region)(ws, user.id, role=role_in_membership or "member", email=email, joined_at=clock.iso()).save()
    if role_in_membership is None:  # removed after the token was issued
        memberships(region)(ws, user.id).delete()
    token, _ = issue_access_token(user_id=user.id, email=email, workspace_id=ws, roles=token_roles, amr=amr,
                                  **({"audience": audience} if audience else {}))
    return token


def build() -> World:
    a = make_tenant("matrix-admin@example.com", name="Matrix A")
    other = make_tenant("matrix-other@example.com", name="Matrix B")
    strict = make_tenant("matrix-strict@example.com", name="Matrix MFA", enforce_mfa=True)
    mfa = ["pwd", "otp", "mfa"]

    def tokens_for(audience: str | None) -> dict[str, str]:
        aud = {"audience": audience} if audience else {}
        return {
            "admin": issue_access_token(user_id=a.user_id, email=a.email, workspace_id=a.workspace_id,
                                        roles=["admin"], amr=mfa, **aud)[0],
            "member": _user_token(a.workspace_id, "member", ["member"], mfa, audience),
            "viewer": _user_token(a.workspace_id, "viewer", ["viewer"], mfa, audience),
            "removed": _user_token(a.workspace_id, None, ["admin"], mfa, audience),
            "demoted": _user_token(a.workspace_id, "viewer", ["admin"], mfa, audience),
            "other_admin": issue_access_token(user_id=other.user_id, email=other.email, workspace_id=other.workspace_id,
                                              roles=["admin"], amr=mfa, **aud)[0],
            "no_mfa": issue_access_token(user_id=strict.user_id, email=strict.email, workspace_id=strict.workspace_id,
                                         roles=["admin"], amr=["pwd"], **aud)[0],
        }

    tokens = tokens_for(None)
    conn = put_connector(a.workspace_id, a.region, "matrix")
    ds = put_dataset(a.workspace_id, a.region, "matrix_rows", [field("id", "INTEGER"), field("email", "STRING", "PII")],
                     [(1, "a@example.com")], connector_id=conn, acl=[{"type": "role", "id": "member"}])
    return World(a.workspace_id, a.region, tokens, strict.workspace_id, tokens_for(mcp_resource()), conn, ds)


def _path(template: str, w: World, caller: str) -> str:
    """Path parameters: the workspace's own ids for another tenant's Admin (they must not reach them),
    ids that match nothing for everyone else (so permitted calls change nothing)."""
    ws = w.mfa_ws if caller == "no_mfa" else w.ws

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        if name == "workspace_id":
            return ws
        if caller == "other_admin":
            return {"connector_id": w.connector, "dataset_id": w.dataset}.get(name, f"{name}_matrix")
        return f"{name.split('_')[0]}_01M8ZZZZZZZZZZZZZZZZZZZZZZ"

    return re.sub(r"\{(\w+)\}", fill, template)


def _call(client: Client, method: str, path: str, token: str) -> tuple[int, dict[str, Any]]:
    headers = {**bearer(token), "Content-Type": "application/json"}
    kwargs: dict[str, Any] = {"headers": headers}
    if method in ("POST", "PUT", "PATCH"):
        kwargs["body"] = "{}"
    r = getattr(client.http, method.lower())(path, **kwargs)
    try:
        body = json.loads(r.body) if r.body else {}
    except ValueError:
        body = {}
    return r.status_code, body if isinstance(body, dict) else {}


@pytest.fixture
def world(stack: None) -> World:
    return build()


@pytest.fixture(scope="module")
def read_world(_moto: None) -> Iterator[World]:
    """One world for every reading route (a GET changes nothing a later case could see); it runs before the
    writing routes, whose function-scoped ``stack`` wipes it."""
    _wipe()
    reset_process_state()
    signing_key()
    yield build()
    reset_process_state()


def test_the_matrix_covers_every_group_and_permission() -> None:
    assert {r.group for r in ROUTES} >= {"platform", "gateway"}
    used = {r.permission for r in ROUTES} | {graphql_api.root_permission(*k) for k in graphql_api.ROOT_FIELDS}
    assert used <= set(PERMISSIONS), used - set(PERMISSIONS)


READS = [r for r in ROUTES if r.method == "GET"]
WRITES = [r for r in ROUTES if r.method != "GET"]


@pytest.mark.parametrize("row", READS, ids=[f"{r.group} {r.method} {r.path}" for r in READS])
def test_reading_route(read_world: World, row: Row) -> None:
    _check_route(read_world, row)


@pytest.mark.parametrize("row", WRITES, ids=[f"{r.group} {r.method} {r.path}" for r in WRITES])
def test_writing_route(world: World, row: Row) -> None:
    _check_route(world, row)


def _check_route(world: World, row: Row) -> None:
    client = Client(APPS[row.group])
    problems = []
    for caller in CALLERS:
        tokens = world.tokens if row.audience == API.name else world.mcp_tokens
        status, body = _call(client, row.method, _path(row.path, world, caller), tokens[caller])
        code = body.get("code") or (body["error"].get("code") if isinstance(body.get("error"), dict) else None)
        expect_role = {"demoted": "viewer"}.get(caller, caller)
        if status >= 500 or status == 401:
            problems.append((caller, status, body))
        elif caller == "removed":
            ok = status == 403 and code == "membership_revoked"
            problems += [] if ok else [(caller, status, body)]
        elif caller == "no_mfa":
            ok = status == 403 and code == "mfa_required"
            problems += [] if ok else [(caller, status, body)]
        elif caller == "other_admin":
            reaches_ours = "{" in row.path
            if reaches_ours and not (status in (403, 404) or (status == 400 and code != "forbidden")):
                problems.append((caller, status, body))
        elif allowed(expect_role, row.permission):
            if status == 403 and code in REFUSALS:
                problems.append((caller, status, body))
        elif not (status == 403 and code == "forbidden"):
            problems.append((caller, status, body))
    assert not problems, (row, problems)


# --- GraphQL: the same callers through every root field ---------------------------------------------

def _documents(w: World) -> dict[tuple[str, str], str]:
    """One document per root field; a field without one fails ``test_every_graphql_field_has_a_document``."""
    return {
        ("Query", "connectors"): "{ connectors { id } }",
        ("Query", "datasets"): "{ datasets(first: 5) { totalCount edges { node { id } } } }",
        ("Query", "dataset"): f'{{ dataset(id: "{w.dataset}") {{ id name }} }}',
        ("Query", "lineage"): f'{{ lineage(datasetId: "{w.dataset}") {{ root }} }}',
        ("Query", "policies"): "{ policies { id } }",
        ("Mutation", "syncConnector"): f'mutation {{ syncConnector(id: "{w.connector}") {{ id }} }}',
        ("Mutation", "setFieldPolicy"): f'mutation {{ setFieldPolicy(datasetId: "{w.dataset}", field: "email", '
                                        f'policy: MASK) {{ name policy }} }}',
    }


def test_every_graphql_field_has_a_document() -> None:
    w = World("ws", "r", {}, "ws", {}, "conn", "ds")
    assert set(_documents(w)) == set(graphql_api.ROOT_FIELDS)
    schema = graphql_api.schema()
    roots = {("Query", f) for f in schema.query_type.fields} | {("Mutation", f) for f in schema.mutation_type.fields}
    assert roots == set(graphql_api.ROOT_FIELDS)


@pytest.mark.parametrize("key", sorted(graphql_api.ROOT_FIELDS), ids=[".".join(k) for k in sorted(graphql_api.ROOT_FIELDS)])
def test_graphql_field(world: World, key: tuple[str, str]) -> None:
    client = Client(APPS["gateway"])
    permission = graphql_api.root_permission(*key)
    query = _documents(world)[key]
    problems = []
    for caller in CALLERS:
        r = client.http.post("/graphql", headers={**bearer(world.tokens[caller]), "Content-Type": "application/json"},
                             body=json.dumps({"query": query}))
        body = json.loads(r.body)
        codes = {e["extensions"]["code"] for e in body.get("errors", [])}
        reasons = {e["extensions"].get("reason") for e in body.get("errors", [])}
        expect_role = {"demoted": "viewer"}.get(caller, caller)
        if caller == "removed":
            ok = r.status_code == 403 and reasons == {"membership_revoked"} and "data" not in body
        elif caller == "no_mfa":
            ok = r.status_code == 403 and reasons == {"mfa_required"} and "data" not in body
        elif caller == "other_admin":  # acts in its own workspace: never sees or changes ours
            ok = r.status_code == 200 and world.connector not in r.body.decode() and (
                world.dataset not in json.dumps(body.get("data")))
        elif allowed(expect_role, permission):
            ok = r.status_code == 200 and "FORBIDDEN" not in codes and "INTERNAL" not in codes
        else:
            ok = r.status_code == 200 and codes == {"FORBIDDEN"} and not any((body.get("data") or {}).values())
        if not ok:
            problems.append((caller, r.status_code, body))
    assert not problems, (key, problems)


def test_enforce_mfa_applies_at_once_to_tokens_that_already_exist(world: World) -> None:
    """An Admin and an API token without MFA work until the Admin turns enforcement on; then neither does."""
    from chalicelib.core.tenancy import workspaces

    plain = issue_access_token(user_id=users.find_by_email("matrix-admin@example.com").id, email="matrix-admin@example.com",
                               workspace_id=world.ws, roles=["admin"], amr=["pwd"])[0]
    api_token = issue_access_token(user_id=users.find_by_email("matrix-admin@example.com").id,
                                   email="matrix-admin@example.com", workspace_id=world.ws, roles=["admin"], amr=["pwd"],
                                   ttl=30 * 24 * 3600, extra={"token_use": "api"})[0]
    with_mfa = world.tokens["admin"]
    client = Client(APPS["gateway"])
    for token in (plain, api_token, with_mfa):
        assert client.http.get("/v1/connectors", headers=bearer(token)).status_code == 200
    ws = workspaces().get(world.ws)
    ws.update(actions=[type(ws).enforce_mfa.set(True)])
    for token in (plain, api_token):
        r = client.http.get("/v1/connectors", headers=bearer(token))
        assert r.status_code == 403
        assert json.loads(r.body)["code"] == "mfa_required"
        g = client.http.post("/graphql", headers={**bearer(token), "Content-Type": "application/json"},
                             body=json.dumps({"query": "{ connectors { id } }"}))
        assert g.status_code == 403
        assert "data" not in json.loads(g.body)
    assert client.http.get("/v1/connectors", headers=bearer(with_mfa)).status_code == 200
