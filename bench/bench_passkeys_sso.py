"""Passkey sign-in and SSO ID-token validation, each beside a same-run reference.

- passkey sign-in (service path over in-process moto: store the challenge, consume it, look up the
  credential by id, verify the assertion, advance the counter) vs the bare ES256 signature check;
- ID-token validation (python-jose against a JWKS: issuer, signature, audience, expiry, nonce) vs the
  bare RS256 signature check.
"""
from __future__ import annotations

from bench.common import measure_pair, table, use_emulator


def main() -> None:
    import logging

    logging.getLogger("aiplat").setLevel(logging.WARNING)
    use_emulator(AUTH_URL="http://localhost:8002")
    import hashlib
    import time

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from jose import jwt
    from moto import mock_aws
    from webauthn.helpers import base64url_to_bytes

    from chalicelib.core.config import settings
    from chalicelib.identity import users
    from chalicelib.identity.mfa import webauthn as wa
    from chalicelib.identity.signin import sessions
    from chalicelib.identity.sso.flow import validate_id_token
    from infra.bootstrap import bootstrap_all
    from tests.integration.sso_peers import rsa_jwk
    from tests.softauthn import SoftAuthenticator

    settings.cache_clear()
    rows = []
    with mock_aws():
        bootstrap_all()
        user = users.create_user("bench@example.com", email_verified=True)
        auth = SoftAuthenticator()
        opts = wa.registration_options(user, wa.PASSKEY)
        wa.verify_registration(user, opts["challenge_id"], auth.create(opts["publicKey"], wa.origin()), "bench")
        del sessions  # the session write is the password sign-in's cost, measured in bench_signin

        def passkey_signin() -> None:
            o = wa.authentication_options(wa.PASSKEY)
            wa.verify_authentication(o["challenge_id"], auth.get(o["publicKey"], wa.origin()), wa.PASSKEY)

        sample = auth.get(wa.authentication_options(wa.PASSKEY)["publicKey"], wa.origin())
        signed = base64url_to_bytes(sample["response"]["authenticatorData"]) + hashlib.sha256(
            base64url_to_bytes(sample["response"]["clientDataJSON"])).digest()
        signature = base64url_to_bytes(sample["response"]["signature"])
        public = auth.key.public_key()

        def bare_es256() -> None:
            public.verify(signature, signed, ec.ECDSA(hashes.SHA256()))

        from webauthn import verify_authentication_response

        stored = wa.find_credential(sample["id"])
        challenge = base64url_to_bytes(
            __import__("json").loads(base64url_to_bytes(sample["response"]["clientDataJSON"]))["challenge"])

        def library_verify() -> None:
            verify_authentication_response(credential=sample, expected_challenge=challenge, expected_rp_id=wa.rp_id(),
                                           expected_origin=wa.origin(),
                                           credential_public_key=base64url_to_bytes(stored.public_key),
                                           credential_current_sign_count=0, require_user_verification=True)

        ours, ref = measure_pair("assertion verification (webauthn library)", library_verify,
                                 "bare ES256 verify", bare_es256)
        rows.append((ours, ref, "CPU cost of one passkey check"))
        ours, ref = measure_pair("passkey sign-in (challenge, lookup, verify, counter)", passkey_signin,
                                 "bare ES256 verify", bare_es256, n=30, repeat=5, warmup=5)
        rows.append((ours, ref, "interactive: well under 100 ms"))

    jwk, key = rsa_jwk()
    public_jwk = {k: jwk[k] for k in ("kty", "kid", "alg", "use", "n", "e")}
    now = int(time.time())
    claims = {"iss": "https://idp.example", "aud": "client", "sub": "u1", "iat": now, "exp": now + 600,
              "nonce": "n-1", "email": "a@corp.example"}
    token = jwt.encode(claims, jwk, algorithm="RS256", headers={"kid": jwk["kid"]})

    class Conn:
        issuer = "https://idp.example"
        client_id = "client"

    import chalicelib.identity.sso.flow as flow

    flow.http_client.get_json = lambda url, headers=None: {"keys": [public_jwk]}  # the JWKS fetch is network
    head, payload, sig = token.split(".")
    signing_input = f"{head}.{payload}".encode()
    raw_sig = base64url_to_bytes(sig)
    rsa_public = key.public_key()

    def validate() -> None:
        validate_id_token(Conn(), {"jwks_uri": "https://idp.example/jwks"}, {"id_token": token, "access_token": "x"},
                          "n-1")

    def bare_rs256() -> None:
        rsa_public.verify(raw_sig, signing_input, padding.PKCS1v15(), hashes.SHA256())

    ours, ref = measure_pair("SSO ID-token validation (jose + checks)", validate, "bare RS256 verify", bare_rs256)
    rows.append((ours, ref, "one per SSO sign-in"))
    table("Sign-in in the browser: passkeys and SSO", rows)


if __name__ == "__main__":
    main()
