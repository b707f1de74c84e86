"""Loopback peers for the SSO tests: the real npm ``oidc-provider`` (Node), a GitHub-kind OAuth2
provider and a web server publishing domain-verification files (both tiny Python servers)."""
from __future__ import annotations

import base64
import json
import secrets
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

from cryptography.hazmat.primitives.asymmetric import rsa

from infra.sso_demo import start_peer
from tests.integration.conftest import free_port
from tests.local_http import PeerServer, send_body

PEER_DIR = Path(__file__).parent / "peers" / "oidc-provider"


def _b64(n: int) -> str:
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def rsa_jwk(kid: str = "test-key") -> tuple[dict[str, Any], Any]:
    """A private RSA JWK (for oidc-provider's ``jwks``) and the key object (to mint tokens in tests)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv, pub = key.private_numbers(), key.public_key().public_numbers()
    jwk = {"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig", "n": _b64(pub.n), "e": _b64(pub.e),
           "d": _b64(priv.d), "p": _b64(priv.p), "q": _b64(priv.q), "dp": _b64(priv.dmp1),
           "dq": _b64(priv.dmq1), "qi": _b64(priv.iqmp)}
    return jwk, key


def node_available() -> bool:
    return shutil.which("node") is not None and (PEER_DIR / "node_modules" / "oidc-provider").is_dir()


@dataclass
class OidcProvider:
    """A running oidc-provider; ``stop()`` ends only this process."""

    issuer: str
    client_id: str
    client_secret: str
    account: dict[str, Any]
    jwk: dict[str, Any]
    key: Any
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def start_oidc_provider(redirect_uri: str, account: dict[str, Any], *, port: int | None = None,
                        secret: str | None = None) -> OidcProvider:
    port = port or free_port()
    jwk, key = rsa_jwk()
    client_id, secret = "aiplat-rp", secret or secrets.token_urlsafe(16)
    proc = start_peer(port, {"ACCOUNT": json.dumps(account), "JWKS": json.dumps({"keys": [jwk]}),
                             "CLIENTS": json.dumps([{"client_id": client_id, "client_secret": secret,
                                                     "redirect_uris": [redirect_uri],
                                                     "grant_types": ["authorization_code"], "response_types": ["code"]}])})
    if proc is None:
        raise RuntimeError("oidc-provider did not start")
    return OidcProvider(f"http://127.0.0.1:{port}", client_id, secret, account, jwk, key, proc)


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = PeerServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class VerificationFiles(_Server):
    """Serves ``/<domain>/.well-known/aiplat-domain-verification.txt`` from ``files``."""

    def __init__(self) -> None:
        files: dict[str, str] = {}
        self.files = files

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                domain, _, rest = self.path.lstrip("/").partition("/")
                body = files.get(domain) if rest == ".well-known/aiplat-domain-verification.txt" else None
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write((body or "not found").encode())

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)

    @property
    def url_template(self) -> str:
        return self.url + "/{domain}/.well-known/aiplat-domain-verification.txt"


class CodeHostingProvider(_Server):
    """A GitHub-kind OAuth2 provider: authorize redirects straight back with a code; the user API
    answers ``emails`` (list of {email, primary, verified}) for the token it issued."""

    def __init__(self, emails: list[dict[str, Any]]) -> None:
        self.emails = emails
        codes: dict[str, str] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _json(self, status: int, body: Any) -> None:
                send_body(self, body, status)

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/login/oauth/authorize":
                    code = secrets.token_urlsafe(8)
                    codes[code] = q.get("code_challenge", "")
                    self.send_response(302)
                    self.send_header("Location", q["redirect_uri"] + "?" + urlencode({"code": code, "state": q["state"]}))
                    self.end_headers()
                elif url.path in ("/user", "/user/emails"):
                    if self.headers.get("Authorization") != "Bearer gho_test":
                        self._json(401, {"message": "Bad credentials"})
                    elif url.path == "/user":
                        self._json(200, {"id": 4242, "login": "octo"})
                    else:
                        self._json(200, outer.emails)
                else:
                    self._json(404, {})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if urlparse(self.path).path == "/login/oauth/access_token" and form.get("code") in codes \
                        and form.get("client_secret") == "gh-secret":
                    codes.pop(form["code"])
                    self._json(200, {"access_token": "gho_test", "token_type": "bearer", "scope": "user:email"})
                else:
                    self._json(400, {"error": "bad_verification_code"})

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)

    def endpoints(self) -> dict[str, str]:
        return {"authorization_endpoint": self.url + "/login/oauth/authorize",
                "token_endpoint": self.url + "/login/oauth/access_token",
                "user_endpoint": self.url + "/user", "emails_endpoint": self.url + "/user/emails"}


def follow_until(session: Any, url: str, prefix: str, limit: int = 15) -> str:
    """Follow redirects with ``session`` (cookies kept) until one points at ``prefix``; returns it."""
    for _ in range(limit):
        if url.startswith(prefix):
            return url
        res = session.get(url, allow_redirects=False, timeout=10)
        location = res.headers.get("Location")
        assert res.status_code in (302, 303) and location, (res.status_code, res.text[:500])
        url = urljoin(url, location)
    raise AssertionError("too many redirects")
