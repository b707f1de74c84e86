"""Regional processing: the cost of the region check each request makes (``core.tenancy.ensure_served_here``)
beside the token verification the same request makes, measured in the same run. A pinned deployment
reads the workspace's region from the global directory once per workspace and process (cached: the
residency never changes), so the steady-state check is a dictionary lookup; the first request for a
workspace pays one directory read (moto in process here)."""
from __future__ import annotations

import os
import time

from bench.common import measure, measure_pair, table, use_emulator


def main() -> None:
    import logging

    logging.getLogger("aiplat-svc").setLevel(logging.WARNING)
    use_emulator()
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.core import process_state, tenancy, tokens
    from chalicelib.core.config import settings
    from chalicelib.core.http.errors import ApiError
    from chalicelib.core.regions import WORKSPACE
    from chalicelib.groups import create_app
    from chalicelib.identity import users
    from chalicelib.identity.oauth import signing
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_all

    with mock_aws():
        bootstrap_all()
        user = users.create_user("bench-regions@example.com", email_verified=True)
        us = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench US", residency="us-east",
                              enforce_mfa=False)
        eu = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench EU", residency="eu-central",
                              enforce_mfa=False)

        def issue(ws_id: str) -> str:
            return signing.issue_access_token(user_id=user.id, email=user.email, workspace_id=ws_id,
                                              roles=["admin"], amr=["pwd"])[0]

        n = 100
        fresh = [issue(us.id) for _ in range(n * 8 + 20)]
        eu_token = issue(eu.id)
        os.environ["REGION"] = "us-east-1"  # this process is now the us-east-1 deployment
        settings.cache_clear()
        process_state.reset_all(derived=True)
        try:
            verifier = tokens.verifier()
            principal = verifier.principal(fresh[0])
            eu_principal = verifier.principal(eu_token)
            it = iter(fresh)

            def check() -> None:
                tenancy.ensure_served_here(principal, WORKSPACE, {})

            def check_cold() -> None:
                tenancy.region_of.cache_clear()
                tenancy.ensure_served_here(principal, WORKSPACE, {})

            def refuse() -> None:
                try:
                    tenancy.ensure_served_here(eu_principal, WORKSPACE, {})
                except ApiError:
                    pass

            verify_ref = lambda: verifier.claims(next(it))  # noqa: E731 - the same request's other step
            ours, ref = measure_pair("region check, workspace seen before", check,
                                     "token verification, fresh token", verify_ref, n=n, warmup=10)
            refused = measure("region check answering 421 (EU token at us-east-1)", refuse, n=2000)
            cold = measure("region check, first request for a workspace (directory read)", check_cold, n=60,
                           warmup=5)
            with Client(create_app("gateway")) as client:
                eu_headers = {"Authorization": f"Bearer {eu_token}"}
                us_headers = {"Authorization": f"Bearer {fresh[0]}"}
                misdirected = measure("GET /v1/connectors, EU token at us-east-1 (421)",
                                      lambda: client.http.get("/v1/connectors", headers=eu_headers), n=100, warmup=10)
                served = measure("GET /v1/connectors, US token at us-east-1 (200)",
                                 lambda: client.http.get("/v1/connectors", headers=us_headers), n=100, warmup=10)
        finally:
            os.environ.pop("REGION", None)
            settings.cache_clear()
            process_state.reset_all(derived=True)

    table("Region check per request beside token verification (same run)", [
        (ours, ref, "a small fraction of verification (ratio << 1)"),
        (refused, ref, "a small fraction of verification"),
        (cold, ref, "once per workspace and process"),
    ])
    table("A misdirected request is answered before any regional read", [
        (misdirected, served, "cheaper than serving it (ratio < 1)"),
    ])


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"({time.time() - started:.0f}s)")
