"""SCIM provisioning through the API as an identity provider drives it (moto in process, the platform
group's Chalice app, one workspace): ``BENCH_SCIM_USERS`` users (default 1,000) created as Okta does (a
``userName eq`` lookup, then POST), ``BENCH_SCIM_GROUPS`` groups (default 50) created, ``BENCH_SCIM_ADDS`` (default 200) PATCH ``add members``
spread over them once every user exists, then 100 deactivations. Each row gives the time
per request (median and p99 of single requests) and the AWS calls per request; the reference row is a
workspace route (`GET /v1/workspaces/{id}`) through the same app, which pays the token check and the live
membership read.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.common import use_emulator

USERS = int(os.environ.get("BENCH_SCIM_USERS", "1000"))
GROUPS = int(os.environ.get("BENCH_SCIM_GROUPS", "50"))
DEACTIVATIONS = min(USERS, 100)
ADDS = min(USERS, int(os.environ.get("BENCH_SCIM_ADDS", "200")))  # group member adds timed (an add reads
# its group's members only; moto's Query still walks the workspace's whole directory partition, which real
# DynamoDB does not, so its time here grows with the workspace while its AWS calls do not)


def main() -> None:
    use_emulator()
    from chalice.test import Client
    from moto import mock_aws

    from bench.common import AwsCalls, percentile, quiet
    from chalicelib.groups import create_app
    from chalicelib.identity import users
    from chalicelib.identity.oauth.signing import ensure_key, issue_access_token
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_all

    rows: list[str] = []
    with mock_aws(), quiet():
        bootstrap_all()
        ensure_key()
        owner = users.create_user("bench-scim@example.com", email_verified=True)
        ws = create_workspace(owner_id=owner.id, owner_email=owner.email, name="Bench SCIM", residency="us-east",
                              enforce_mfa=False)
        admin, _ = issue_access_token(user_id=owner.id, email=owner.email, workspace_id=ws.id, roles=["admin"],
                                      amr=["pwd", "mfa"])
        calls = AwsCalls()
        with Client(create_app("platform")) as c:
            def request(method: str, path: str, token: str, body: Any = None) -> Any:
                r = c.http.request(method, path, body=json.dumps(body).encode() if body is not None else b"",
                                   headers={"Authorization": f"Bearer {token}", "Content-Type":
                                            "application/json" if path.startswith("/v1/") else "application/scim+json"})
                assert r.status_code < 300, (method, path, r.status_code, r.body[:300])
                return json.loads(r.body) if r.body else None

            created = request("POST", f"/v1/workspaces/{ws.id}/scim/tokens", admin, {"name": "bench"})
            token, base = created["token"], f"/scim/v2/{ws.id}"

            def timed(name: str, steps: list[Callable[[], Any]]) -> list[Any]:
                out, samples = [], []
                calls.reset()
                for step in steps:
                    t0 = time.perf_counter()
                    out.append(step())
                    samples.append(time.perf_counter() - t0)
                per_call = sum(calls.seen.values()) / len(steps)
                p99 = percentile(samples, 0.99)
                rows.append(f"| {name} | {len(steps):,} | {statistics.median(samples) * 1000:.1f} | "
                            f"{'-' if p99 != p99 else f'{p99 * 1000:.1f}'} | {per_call:.1f} | "
                            f"{sum(samples):.1f} |")
                return out

            timed("reference: `GET /v1/workspaces/{id}`", [lambda: request("GET", f"/v1/workspaces/{ws.id}", admin)] * 200)
            names = [f"user{i:05d}@bench.example.com" for i in range(USERS)]
            timed("Okta's lookup before a create: `GET /Users?filter=userName eq`", [
                (lambda n=n: request("GET", f"{base}/Users?filter=userName%20eq%20%22{n}%22", token)) for n in names])
            people = timed("`POST /Users` (account, SCIM record, membership)", [
                (lambda n=n: request("POST", f"{base}/Users", token, {
                    "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": n,
                    "name": {"givenName": "Bench", "familyName": n[:9]}, "emails": [{"value": n, "primary": True}],
                    "active": True})) for n in names])
            groups = timed("`POST /Groups`", [
                (lambda i=i: request("POST", f"{base}/Groups", token, {
                    "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": f"Team {i:03d}"}))
                for i in range(GROUPS)])
            patch = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
            timed("`PATCH /Groups/{id}` add one member", [
                (lambda u=u, g=groups[i % len(groups)]: request("PATCH", f"{base}/Groups/{g['id']}", token, {
                    "schemas": [patch], "Operations": [{"op": "add", "path": "members", "value": [{"value": u["id"]}]}]}))
                for i, u in enumerate(people[:ADDS])])
            timed("`GET /Groups?excludedAttributes=members` (all groups)",
                  [lambda: request("GET", f"{base}/Groups?excludedAttributes=members&count=200", token)] * 20)
            timed("`PATCH /Users/{id}` active false (removes the membership)", [
                (lambda u=u: request("PATCH", f"{base}/Users/{u['id']}", token, {
                    "schemas": [patch], "Operations": [{"op": "replace", "value": {"active": False}}]}))
                for u in people[:DEACTIVATIONS]])
        calls.close()
    print(f"{USERS:,} users and {GROUPS} groups provisioned into one workspace; {ADDS} members added to groups.\n")
    print("| Request | Count | Median ms | p99 ms | AWS calls per request | Total s |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
