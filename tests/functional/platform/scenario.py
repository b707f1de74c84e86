"""A two-workspace scenario and the table of every platform route, shared by the tenancy, role-matrix
and bad-input tests. Every route of the modules this area owns must have a row (a test checks it)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import aws, clock
from chalicelib.core.regions import OPEN_REGIONS
from chalicelib.groups import route_permissions
from chalicelib.platform.support import service as support
from infra.resources import BUCKETS, GLOBAL, TABLES
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.platform.helpers import User, add_member, user_token

OWNED_MODULES = ("chalicelib.platform.routes", "chalicelib.platform.workspaces.routes",
                 "chalicelib.platform.workspaces.member_routes", "chalicelib.platform.workspaces.invitation_routes",
                 "chalicelib.platform.audit.routes", "chalicelib.platform.support.routes")


@dataclass
class Scenario:
    a: Tenant  # us-east workspace "Acme" (admin token)
    member: User
    viewer: User
    target: User  # a member of A the matrix may change or remove
    staff: User
    invitation_id: str
    grant_id: str
    b: Tenant  # eu-central workspace "Bravo"; its admin is a stranger to A
    dual: User  # Admin of A and of B, with a token for B
    secrets: list[str] = field(default_factory=list)  # strings of A that must never reach B

    def token(self, role: str) -> str:
        return {"admin": self.a.token, "member": self.member.token, "viewer": self.viewer.token}[role]

    def path(self, template: str, ws: str | None = None) -> str:
        return template.format(ws=ws or self.a.workspace_id, user=self.target.user_id, inv=self.invitation_id,
                               grant=self.grant_id, export_id=UNKNOWN_EXPORT)


def build() -> Scenario:
    from chalicelib.core.audit import Actor
    from chalicelib.core.tenancy import get_workspace, workspace_scope
    from chalicelib.platform.workspaces import invitations

    a = make_tenant("alice@acme.test", "us-east", "Acme")
    member = add_member(a.workspace_id, "mike@acme.test", "member")
    viewer = add_member(a.workspace_id, "vera@acme.test", "viewer")
    target = add_member(a.workspace_id, "tina@acme.test", "member")
    own = make_tenant("sam@support.test", "us-east", "Support Desk")
    support.register_staff(own.user_id, "Sam", "US")
    staff = User(own.user_id, own.email, own.token)
    actor = Actor("user", a.user_id, a.email)
    inv = invitations.create(workspace_scope(a.workspace_id), {"email": "ivan@acme.test", "role": "member"}, actor=actor)
    grant = support.create(get_workspace(a.workspace_id), {"support_email": staff.email, "duration": "PT4H",
                                                            "reason": "ticket 1"}, actor=actor)
    b = make_tenant("bob@bravo.test", "eu-central", "Bravo")
    dual_user = add_member(a.workspace_id, "dana@both.test", "admin")
    from chalicelib.core.tenancy import memberships

    memberships("eu-central-1")(b.workspace_id, dual_user.user_id, role="admin", email=dual_user.email,
                                joined_at=clock.iso(), joined_via="seed").save()
    dual = User(dual_user.user_id, dual_user.email, user_token(dual_user.user_id, dual_user.email, b.workspace_id, "admin"))
    secrets = [a.workspace_id, "Acme", "acme", member.email, viewer.email, target.user_id, target.email,
               inv["id"], "ivan@acme.test", grant["id"]]
    return Scenario(a, member, viewer, target, staff, inv["id"], grant["id"], b, dual, secrets)


@dataclass(frozen=True)
class Route:
    method: str
    template: str  # {ws} {user} {inv} {grant}
    body: Any = None  # a valid body (None: no body)
    roles: dict[str, int] = field(default_factory=dict)  # expected status per role of workspace A
    # the answer to workspace B's Admin (None: the path names no workspace; the answer must leak nothing)
    foreign: tuple[int, ...] | None = (404,)
    bad: tuple[tuple[str, Any, int], ...] = ()  # route-specific bad input: (label, body, status)

    @property
    def key(self) -> tuple[str, str]:
        return self.method, self.template.replace("{ws}", "{workspace_id}").replace("{user}", "{user_id}") \
            .replace("{inv}", "{invitation_id}").replace("{grant}", "{grant_id}")


UNKNOWN_EXPORT = "exp_01ARZ3NDEKTSV4RRFFQ69G5FAV"  # no such export: the Admin gets 404, others 403
ALL_OK = {"admin": 200, "member": 200, "viewer": 200}
ADMIN_ONLY = {"admin": 200, "member": 403, "viewer": 403}
WS = "/v1/workspaces/{ws}"

ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/me", roles=ALL_OK, foreign=None),
    Route("GET", "/v1/openapi.json", roles=ALL_OK, foreign=None),
    Route("POST", "/v1/workspaces", {"name": "Fresh", "residency": "us-east", "enforce_mfa": False},
          roles={"admin": 201, "member": 201, "viewer": 201}, foreign=None,
          bad=(("wrong type", {"name": 5, "residency": "us-east"}, 400),
               ("unknown residency", {"name": "X", "residency": "mars"}, 400),
               ("planned residency", {"name": "X", "residency": "br-south"}, 422),
               ("missing name", {"residency": "us-east"}, 400),
               ("blank name", {"name": "   ", "residency": "us-east"}, 400),
               ("wrong type mfa", {"name": "X", "residency": "us-east", "enforce_mfa": "yes"}, 400))),
    Route("GET", "/v1/workspaces", roles=ALL_OK, foreign=None),
    Route("GET", WS, roles=ALL_OK),
    Route("PATCH", WS, {"name": "Renamed"}, roles=ADMIN_ONLY,
          bad=(("wrong type", {"name": ["x"]}, 400), ("residency", {"residency": "eu-central"}, 409),
               ("unknown replication", {"replication": "everywhere"}, 400),
               ("dr without acknowledgement on eu is fine on us; bad ack type", {"replication": "cross-region-dr",
                                                                                 "acknowledge_data_leaves_region": "yes"}, 400),
               ("domain join wrong type", {"domain_join": {"enabled": "yes"}}, 400),
               ("domain join unknown field", {"domain_join": {"enabled": True, "x": 1}}, 400),
               ("domain not the admin's", {"domain_join": {"enabled": True, "domain": "evil.test"}}, 422),
               ("bad duration", {"chat_auto_expiry": "P1M"}, 400), ("empty", {}, 400))),
    Route("GET", "/v1/joinable-workspaces", roles=ALL_OK, foreign=None),
    Route("POST", WS + "/join", roles={"admin": 404, "member": 404, "viewer": 404}),
    Route("GET", WS + "/members", roles=ADMIN_ONLY),
    Route("PATCH", WS + "/members/{user}", {"role": "viewer"}, roles=ADMIN_ONLY,
          bad=(("unknown role", {"role": "owner"}, 400), ("wrong type", {"role": 1}, 400),
               ("upper-case role", {"role": "Admin"}, 400))),
    Route("DELETE", WS + "/members/{user}", roles={"admin": 204, "member": 403, "viewer": 403}),
    Route("POST", WS + "/invitations", {"email": "nina@acme.test", "role": "member"},
          roles={"admin": 201, "member": 403, "viewer": 403},
          bad=(("bad e-mail", {"email": "not-an-address", "role": "member"}, 400),
               ("bad e-mail 2", {"email": "a@b", "role": "member"}, 400),
               ("unknown role", {"email": "x@acme.test", "role": "owner"}, 400),
               ("wrong type", {"email": ["x@acme.test"], "role": "member"}, 400),
               ("missing role", {"email": "x@acme.test"}, 400),
               ("duplicate pending", {"email": "ivan@acme.test", "role": "member"}, 409),
               ("already member", {"email": "mike@acme.test", "role": "member"}, 409))),
    Route("GET", WS + "/invitations", roles=ADMIN_ONLY),
    Route("GET", WS + "/invitations/{inv}", roles=ADMIN_ONLY),
    Route("DELETE", WS + "/invitations/{inv}", roles=ADMIN_ONLY),
    Route("POST", WS + "/invitations/{inv}/accept", roles={"admin": 404, "member": 404, "viewer": 404}),
    Route("GET", WS + "/invitations/{inv}/preview", roles={"admin": 404, "member": 404, "viewer": 404}),
    Route("GET", "/v1/audit/events", roles={"admin": 200, "member": 403, "viewer": 200}, foreign=None),
    Route("POST", "/v1/audit/exports", {}, roles={"admin": 202, "member": 403, "viewer": 403}, foreign=None,
          bad=(("bad from", {"from": "last week"}, 400), ("no offset", {"from": "2026-01-01T00:00:00"}, 400),
               ("wrong type", {"from": 20260101}, 400), ("nothing in range", {"from": "2999-01-01T00:00:00Z"}, 422))),
    Route("GET", "/v1/audit/exports/{export_id}", roles={"admin": 404, "member": 403, "viewer": 403}, foreign=(404,)),
    Route("POST", WS + "/support-grants", {"support_email": "sam@support.test", "duration": "PT1H", "reason": "ticket 2"},
          roles={"admin": 201, "member": 403, "viewer": 403},
          bad=(("bad e-mail", {"support_email": "sam", "duration": "PT1H", "reason": "ticket"}, 400),
               ("too long", {"support_email": "sam@support.test", "duration": "PT100H", "reason": "ticket"}, 400),
               ("not staff", {"support_email": "mike@acme.test", "duration": "PT1H", "reason": "ticket"}, 422),
               ("wrong type", {"support_email": "sam@support.test", "duration": 3600, "reason": "ticket"}, 400))),
    Route("GET", WS + "/support-grants", roles=ADMIN_ONLY),
    Route("DELETE", WS + "/support-grants/{grant}", roles=ADMIN_ONLY),
    Route("GET", "/v1/support/workspaces/{ws}", roles={"admin": 403, "member": 403, "viewer": 403}, foreign=(403,)),
    Route("GET", "/v1/support/workspaces/{ws}/audit/events", roles={"admin": 403, "member": 403, "viewer": 403},
          foreign=(403,)),
    Route("GET", "/v1/support/dead-letters", roles={"admin": 403, "member": 403, "viewer": 403}, foreign=(403,)),
)


def owned_routes() -> set[tuple[str, str]]:
    """(method, path) of every route registered by this area's modules."""
    import importlib

    out = set()
    for module in OWNED_MODULES:
        for r in importlib.import_module(module).api.routes:
            for m in r.methods:
                out.add((m, r.path))
    return out


def platform_routes() -> set[tuple[str, str]]:
    return {(m, p) for (name, p, m) in route_permissions() if name == "platform"}


def snapshot() -> dict[str, Any]:
    """Every stored item of every declared table in every region, archive objects and mail counters; not the
    API request counters (every authorized request counts, refused by its route or not).

    Read from the in-process emulator's own state (this runs twice around every request of the isolation
    and matrix sweeps): the same items a scan returns, without signing, sending and serialising a scan of
    every table in every region."""
    from moto.backends import get_backend
    from moto.core import DEFAULT_ACCOUNT_ID

    out: dict[str, Any] = {}
    dynamodb, s3, ses = (get_backend(name)[DEFAULT_ACCOUNT_ID] for name in ("dynamodb", "s3", "ses"))
    for table in TABLES:
        if table.name == "request_counters":
            continue
        regions = ["us-east-1"] if table.scope == GLOBAL else list(OPEN_REGIONS)
        for region in regions:
            stored = dynamodb[region].get_table(aws.table_name(table.name))
            out[f"{region}/{table.name}"] = sorted(json.dumps(i.to_json(), sort_keys=True, default=str)
                                                   for i in stored.all_items())
    for region in OPEN_REGIONS:
        for bucket in BUCKETS:
            name = aws.bucket_name(bucket.name, region)
            out[f"s3/{name}"] = sorted(s3["global"].get_bucket(name).keys.keys())
        out[f"ses/{region}"] = ses[region].sent_message_count
    return out
