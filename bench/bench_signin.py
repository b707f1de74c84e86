"""Sign-in benchmarks: password sign-ins, token issues and introspections per second (one thread).

Runs in-process against moto (``mock_aws``), so DynamoDB/KMS calls cost a Python function call rather
than a network round trip; the argon2id work is real. Each figure is printed beside a same-run
reference (the bare primitive it is built on) and beside Keycloak's published sizing guidance
(about 15 password logins/s and 120 client-credential grants/s per vCPU) as reference rows.
"""
from __future__ import annotations

import base64
import os
import time

from bench.common import Measure, measure_pair, table


def _reference(name: str, per_second: float) -> Measure:
    return Measure(name, 1e6 / per_second, float("nan"), per_second)


def main() -> None:
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    from jose import jwt as jose_jwt
    from moto import mock_aws

    from chalicelib.core import clock
    from chalicelib.core.tokens import TokenVerifier, verifier
    from chalicelib.identity import users
    from chalicelib.identity.mfa.totp import confirm_setup, start_setup
    from chalicelib.identity.oauth import introspection, token_endpoint
    from chalicelib.identity.oauth.clients import authenticate_basic, register_client
    from chalicelib.identity.oauth.signing import issue_access_token, signer
    from chalicelib.identity.signin import password_hashing as passwords
    from chalicelib.identity.signin import password_signin as signin
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_all

    with mock_aws():
        bootstrap_all()
        user = users.create_user("bench@example.com", email_verified=True)
        password = "bench password that is long"
        signin.set_password_hash(user.id, passwords.hash_password(password))
        import pyotp
        secret = start_setup(user.id, user.email)["secret"]
        confirm_setup(user.id, pyotp.TOTP(secret).now())
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench", residency="us-east",
                              enforce_mfa=False)
        stored = users.get_user(user.id).password_hash  # type: ignore[union-attr]

        print(f"argon2id parameters: time_cost={passwords.TIME_COST}, memory_cost={passwords.MEMORY_COST_KIB} KiB "
              f"({passwords.MEMORY_COST_KIB // 1024} MiB), parallelism={passwords.PARALLELISM}, "
              f"hash_len={passwords.HASH_LEN}, salt_len={passwords.SALT_LEN}\n", flush=True)
        signin_step, bare_verify = measure_pair(
            "password sign-in step (lockout reserve/release + argon2id + mfa_token)",
            lambda: signin.password_signin(user.email, password, "http://x/account", caller=None),
            "bare argon2id verify (same parameters)", lambda: passwords.HASHER.verify(stored, password),
            n=10, repeat=5, warmup=2)
        keycloak_pwd = _reference("Keycloak sizing: password logins per vCPU", 15)
        table("Password sign-in (one thread)", [
            (signin_step, bare_verify, "Keycloak ~15/s per vCPU"),
            (keycloak_pwd, None, "published reference"),
        ])

        client_id, client_secret = register_client("bench", confidential=True, grant_types=["client_credentials"],
                                                   workspace_id=ws.id, roles=["viewer"])
        basic = "Basic " + base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        kid, key = signer().current()
        now = int(clock.now())
        sample = {"iss": "x", "aud": "service-api", "sub": user.id, "workspace_id": ws.id, "roles": ["admin"],
                  "email": user.email, "amr": ["pwd"], "iat": now, "nbf": now, "exp": now + 900, "jti": "tok_x"}
        issue, bare_sign = measure_pair(
            "issue_access_token (claims + RS256 sign)",
            lambda: issue_access_token(user_id=user.id, email=user.email, workspace_id=ws.id, roles=["admin"],
                                       amr=["pwd", "otp", "mfa"]),
            "bare RS256 sign (python-jose, same claims)",
            lambda: jose_jwt.encode(sample, key, algorithm="RS256", headers={"kid": kid}))
        grant, bare_sign2 = measure_pair(
            "client_credentials grant (Basic auth + client lookup + sign)",
            lambda: token_endpoint.GRANTS["client_credentials"]({"grant_type": "client_credentials"}, authenticate_basic(basic)),
            "bare RS256 sign (python-jose, same claims)",
            lambda: jose_jwt.encode(sample, key, algorithm="RS256", headers={"kid": kid}), n=50)
        keycloak_cc = _reference("Keycloak sizing: client-credential grants per vCPU", 120)
        table("Token issue (one thread)", [
            (issue, bare_sign, ""),
            (grant, bare_sign2, "Keycloak ~120/s per vCPU"),
            (keycloak_cc, None, "published reference"),
        ])

        token, _ = issue_access_token(user_id=user.id, email=user.email, workspace_id=ws.id, roles=["admin"],
                                      amr=["pwd"])
        verifier().claims(token)
        public = verifier().keyring.key(kid)
        def bare() -> object:
            return jose_jwt.decode(token, public, algorithms=["RS256"], audience="service-api",
                                   options={"verify_exp": False, "verify_iss": False})

        caller = authenticate_basic(basic)  # the workspace's confidential client may introspect its tokens
        assert introspection.introspect({"token": token}, caller)["active"] is True
        cached, bare_decode = measure_pair("introspect (verifier cache hit)",
                                           lambda: introspection.introspect({"token": token}, caller),
                                           "bare RS256 verify + decode (python-jose)", bare)
        cold_verifier = TokenVerifier(keyring=verifier().keyring, revocations=verifier().revocations)

        def uncached() -> object:
            cold_verifier._cache.clear()
            return cold_verifier.claims(token)

        cold, bare_decode2 = measure_pair("introspect path, full verification (cache cleared)", uncached,
                                          "bare RS256 verify + decode (python-jose)", bare)
        table("Introspection (one thread)", [
            (cached, bare_decode, ""),
            (cold, bare_decode2, ""),
        ])
        print(f"(run at {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, {os.cpu_count()} CPUs visible, "
              "in-process moto)\n", flush=True)


if __name__ == "__main__":
    main()
