"""Token verification and issuing against bare RS256 in the same run (interleaved call by call); GET /me.
Fresh tokens belong to ``USERS`` distinct users (each verified once), with the revocation reads counted.
Cold import per group is in `bench_packaging`."""
from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

from bench.common import measure, measure_pair, table, use_emulator

ROOT = Path(__file__).resolve().parent.parent
USERS = 1000


def _b64d(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def tokens_and_me() -> None:
    import logging

    logging.getLogger("aiplat-svc").setLevel(logging.WARNING)  # no access-log lines in the tables
    use_emulator()
    from chalice.test import Client
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding
    from moto import mock_aws

    from chalicelib.core import tokens
    from chalicelib.groups import create_app
    from chalicelib.identity import users
    from chalicelib.identity.oauth import signing
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_all

    with mock_aws():
        bootstrap_all()
        user = users.create_user("bench@example.com", email_verified=True)
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench", residency="us-east",
                              enforce_mfa=False)

        def issue(user_id: str = user.id) -> str:
            return signing.issue_access_token(user_id=user_id, email=user.email, workspace_id=ws.id,
                                              roles=["admin"], amr=["pwd"])[0]

        # a few revocations of other users first, so the watermark holds buckets as in a live system
        for i in range(20):
            tokens.revoke_key(f"tok_gone{i}", 1e10, "bench", f"usr_gone{i}")
        per_pass = USERS // 2  # measure_pair: n * repeat tokens each for ours and for the reference
        fresh = [issue(f"usr_bench{i:04d}") for i in range(USERS + 20)]
        n, repeat = per_pass // 5, 5
        verifier = tokens.verifier()
        reads_before = verifier.revocations.reads
        kid, key = signing.signer().current()
        private = key.prepared_key
        public = private.public_key()
        it_fresh = iter(fresh)
        it_bare = iter(fresh)

        def bare_verify() -> None:
            header, payload, sig = next(it_bare).split(".")
            public.verify(_b64d(sig), f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())

        def our_verify_fresh() -> None:
            verifier.claims(next(it_fresh))

        ours_fresh, ref_verify = measure_pair(f"our verification incl. revocation check, fresh tokens of {USERS:,} "
                                              "distinct users", our_verify_fresh, "bare RS256 verify (cryptography)",
                                              bare_verify, n=USERS // 10, repeat=10, warmup=10)
        revocation_reads = verifier.revocations.reads - reads_before
        it_floor, it_bare2 = iter(fresh[::-1]), iter(fresh[::-1])

        def floor() -> None:  # what any verify returning claims must do: RSA + base64 + JSON
            header, payload, sig = next(it_floor).split(".")
            public.verify(_b64d(sig), f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
            json.loads(_b64d(payload))

        def bare_verify2() -> None:
            header, payload, sig = next(it_bare2).split(".")
            public.verify(_b64d(sig), f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())

        ref_floor, ref_verify2 = measure_pair("floor: RS256 verify + base64 + JSON", floor,
                                              "bare RS256 verify (cryptography)", bare_verify2, n=n, repeat=repeat,
                                              warmup=10)
        repeated = fresh[0]
        ours_cached = measure("our verification incl. revocation check, repeated token",
                              lambda: verifier.claims(repeated), n=1000)
        repeated_claims = verifier.claims(repeated)
        check = tokens.RevocationCheck()

        def uncached_check() -> None:
            check.clear()
            check.revoked(repeated_claims)

        revocation_only = measure("revocation check with nothing cached (the watermark's consistent GetItem, moto)",
                                  uncached_check, n=200)

        signing_input = b"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0"
        ours_issue, ref_sign = measure_pair("our token issue (claims + sign)", issue, "bare RS256 sign (loaded key)",
                                            lambda: private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256()),
                                            n=60, repeat=5)

        from chalicelib.core import tenancy
        from tests.functional.aws_calls import counting

        member_token = issue()
        with Client(create_app("platform")) as client:
            headers = {"Authorization": f"Bearer {member_token}"}
            assert client.http.get("/v1/me", headers=headers).status_code == 200
            with counting() as me_calls:
                client.http.get("/v1/me", headers=headers)
            me = measure("GET /v1/me (Chalice test client, moto)", lambda: client.http.get("/v1/me", headers=headers),
                         n=100, warmup=10)
            me_ref = measure("the listing's storage reads alone (one by_user query per region, moto)",
                             lambda: [list(tenancy.memberships(r).by_user.query(user.id)) for r in
                                      ("us-east-1", "eu-central-1")], n=100, warmup=10)
            limited, unlimited, (limited_calls, unlimited_calls) = _request_limits(client, headers)
            from bench.common import after_quiet
            from chalicelib.core import aws

            ddb = aws.client("dynamodb", ws.region)
            key = {"workspace_id": {"S": ws.id}, "user_id": {"S": user.id}}
            day = {"Authorization": "Bearer " + signing.issue_access_token(
                user_id=user.id, email=user.email, workspace_id=ws.id, roles=["admin"], amr=["pwd"],
                ttl=24 * 3600)[0]}  # the clock moves on 30 min below

            def me_day() -> None:
                assert client.http.get("/v1/me", headers=day).status_code == 200

            quiet_lines = after_quiet(
                "GET /v1/me after quiet (scope, membership, listing and a due watermark: one batch read; AWS "
                "calls include the request limiter's write)", "GET /v1/me", me_day,
                "one consistent GetItem of the membership (moto)",
                lambda: ddb.get_item(TableName=aws.table_name("memberships"), Key=key, ConsistentRead=True), n=30)

    table("Token verification and issuing (RSA-2048, same run)", [
        (ours_fresh, ref_verify, f"<= 1.5x; {revocation_reads} revocation reads for {USERS + 10:,} tokens "
                                 "(the watermark, once per 5 s; docs/security.md)"),
        (ref_floor, ref_verify2, "the floor of any verify that returns claims"),
        (ours_cached, ref_verify, "< 2 µs"),
        (revocation_only, ref_verify, "once per 5 s per container for every user (in-process moto, not a network hop)"),
        (ours_issue, ref_sign, "includes one read of the user's revocation epochs"),
    ])
    table("GET /v1/me per request", [(me, me_ref, f"{sum(me_calls.values())} AWS calls per request "
                                                    "(one batch: scope versions, membership, due watermark)")])
    print("\n".join(quiet_lines), flush=True)
    table("Request limits on GET /v1/me (core/http/rate_limits.py, same run, interleaved)", [
        (limited, unlimited, f"at most one extra AWS call: {sum(limited_calls.values())} with the limits, "
                             f"{sum(unlimited_calls.values())} without")])


def _request_limits(client: Any, headers: dict[str, str]) -> tuple[Any, Any, Any]:
    """``GET /v1/me`` as served, beside the same request with the request limiter switched off."""
    from chalicelib.core.http import rate_limits
    from tests.functional.aws_calls import counting

    charge = rate_limits.charge

    def unlimited() -> None:
        rate_limits.charge = lambda scope: {}  # type: ignore[assignment]
        try:
            client.http.get("/v1/me", headers=headers)
        finally:
            rate_limits.charge = charge

    with counting() as limited_calls:
        client.http.get("/v1/me", headers=headers)
    with counting() as calls:
        unlimited()
    ours, ref = measure_pair("GET /v1/me with the request limits", lambda: client.http.get("/v1/me", headers=headers),
                             "the same request with the limiter off", unlimited, n=60, repeat=5)
    return ours, ref, (limited_calls, calls)


def main() -> None:
    tokens_and_me()


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"({time.time() - started:.0f}s)")

