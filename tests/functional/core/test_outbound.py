"""The one outbound HTTP client (``core/http/outbound.py``) against a real server on 127.0.0.1: it connects to
the address it checked (DNS rebinding cannot move it), keeps the host name for ``Host`` and TLS, never
follows a redirect (to the metadata address or back to loopback), cuts off an oversized body, gives up on a
silent or trickling server, and names each failure with a kind a route maps to 422 or 502."""
from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from chalicelib.core.http import outbound
from chalicelib.core.http.outbound import OutboundError, Policy, Refused, Timeouts
from tests.local_http import send_body, serve, stop

LOCAL = Policy(private=True)  # the server under test is on loopback
QUICK = Timeouts(connect=2, read=0.3, total=2)


class _Server:
    """Answers by path; records each request's path and Host header, and the TLS server name it was asked for."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.seen: list[tuple[str, str]] = []
        self.sni: list[str | None] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                outer.seen.append((self.path, self.headers.get("Host", "")))
                path = self.path.split("?", 1)[0]
                if path.startswith("/redirect/"):
                    target = {"metadata": "http://169.254.169.254/latest/meta-data/",
                              "loopback": f"http://127.0.0.1:{outer.port}/secret"}[path.rsplit("/", 1)[1]]
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif path == "/big":
                    send_body(self, b"x" * 2048, content_type=None)
                elif path == "/silent":
                    outer.release.wait(10)
                elif path == "/trickle":
                    self.send_response(200)
                    self.end_headers()
                    for _ in range(200):
                        if outer.release.wait(0.05):
                            break
                        self.wfile.write(b"data: x\n")
                        self.wfile.flush()
                else:
                    send_body(self, b'{"ok": true}\nsecond line\n')

        if tls is not None:
            tls.sni_callback = lambda sock, name, ctx: self.sni.append(name)  # type: ignore[assignment,misc]
        self.server = serve(Handler, tls)
        self.port = self.server.server_address[1]

    def close(self) -> None:
        self.release.set()
        stop(self.server)


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


@pytest.fixture
def connected(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every address a socket was opened to."""
    seen: list[str] = []
    real = socket.create_connection

    def recording(address: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(address[0])
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording)
    return seen


def _resolving(monkeypatch: pytest.MonkeyPatch, host: str, *answers: str) -> list[str]:
    """``host`` resolves to each of ``answers`` in turn (then the last again); other names as usual."""
    real, given = socket.getaddrinfo, []

    def fake(name: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if name != host:
            return real(name, port, *args, **kwargs)
        answer = answers[min(len(given), len(answers) - 1)]
        given.append(answer)
        family = socket.AF_INET6 if ":" in answer else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (answer, port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return given


def test_a_request_reaches_the_checked_address_with_the_host_name_kept(server: _Server, connected: list[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _resolving(monkeypatch, "api.rebind.test", "127.0.0.1", "169.254.169.254")
    answer = outbound.request("GET", f"http://api.rebind.test:{server.port}/ok?a=1", policy=LOCAL)
    assert answer.status == 200 and answer.body.startswith(b'{"ok": true}')
    assert server.seen == [("/ok?a=1", f"api.rebind.test:{server.port}")]
    assert connected == ["127.0.0.1"]
    # the next lookup answers the metadata address: refused before any connection
    with pytest.raises(Refused) as refused:
        outbound.request("GET", f"http://api.rebind.test:{server.port}/ok", policy=LOCAL)
    assert refused.value.kind == "forbidden" and refused.value.status == 422
    assert connected == ["127.0.0.1"] and len(server.seen) == 1


def test_every_answer_of_a_lookup_is_checked(monkeypatch: pytest.MonkeyPatch, connected: list[str]) -> None:
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda name, port, *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.9", port))] if name == "mixed.example" else real(
        name, port, *a, **k))
    with pytest.raises(Refused, match="private address"):
        outbound.request("GET", "https://mixed.example/x")
    assert connected == []


@pytest.mark.parametrize("address,kind", [("10.1.2.3", "private"), ("192.168.0.7", "private"), ("127.0.0.1", "private"),
                                          ("fd12:3456::1", "private"), ("169.254.169.254", "forbidden"),
                                          ("fd00:ec2::254", "forbidden"), ("::ffff:169.254.169.254", "forbidden")])
def test_a_host_name_resolving_to_a_private_or_metadata_address_is_refused(
        monkeypatch: pytest.MonkeyPatch, connected: list[str], address: str, kind: str) -> None:
    _resolving(monkeypatch, "innocent.example", address)
    with pytest.raises(Refused) as refused:
        outbound.request("GET", "https://innocent.example/latest/meta-data/")
    assert refused.value.kind == kind
    assert refused.value.api_error().status == 422 and refused.value.api_error().code == "endpoint_refused"
    assert connected == []


def test_metadata_addresses_are_refused_even_for_the_deployments_own_endpoints(connected: list[str]) -> None:
    with pytest.raises(Refused, match="forbidden"):
        outbound.request("GET", "http://169.254.169.254/latest/meta-data/", policy=outbound.TRUSTED)
    assert connected == []


@pytest.mark.parametrize("where", ["metadata", "loopback"])
def test_a_redirect_is_never_followed(server: _Server, connected: list[str], where: str) -> None:
    with pytest.raises(OutboundError) as failed:
        outbound.request("GET", f"http://127.0.0.1:{server.port}/redirect/{where}", policy=LOCAL)
    assert failed.value.kind == "redirect" and failed.value.status == 502
    assert failed.value.api_error().code == "upstream_failed"
    assert [path for path, _ in server.seen] == [f"/redirect/{where}"]  # /secret was never asked for
    assert connected == ["127.0.0.1"]  # and nothing else was connected to


def test_a_caller_that_forwards_answers_gets_the_redirect_unfollowed(server: _Server, connected: list[str]) -> None:
    answer = outbound.request("GET", f"http://127.0.0.1:{server.port}/redirect/metadata", policy=LOCAL,
                              redirects="return")
    assert answer.status == 302 and answer.headers["Location"].startswith("http://169.254.169.254/")
    assert connected == ["127.0.0.1"]


def test_an_oversized_body_is_cut_off(server: _Server) -> None:
    with pytest.raises(OutboundError) as failed:
        outbound.request("GET", f"http://127.0.0.1:{server.port}/big", policy=LOCAL, max_bytes=2047)
    assert failed.value.kind == "too_large" and failed.value.status == 502
    assert outbound.request("GET", f"http://127.0.0.1:{server.port}/big", policy=LOCAL, max_bytes=2048).body == \
        b"x" * 2048


def test_an_oversized_stream_is_cut_off_line_by_line(server: _Server) -> None:
    with outbound.open_stream("GET", f"http://127.0.0.1:{server.port}/ok", policy=LOCAL, max_bytes=20) as answer:
        assert answer.readline() == b'{"ok": true}\n'
        with pytest.raises(OutboundError, match="more than 20 bytes"):
            answer.readline()


def test_a_silent_server_times_out(server: _Server) -> None:
    with pytest.raises(OutboundError) as failed:
        outbound.request("GET", f"http://127.0.0.1:{server.port}/silent", policy=LOCAL, timeouts=QUICK)
    assert failed.value.kind == "timeout" and failed.value.status == 502


def test_a_trickling_answer_is_bounded_by_the_total_deadline(server: _Server) -> None:
    """Every read gets a byte well within the read timeout; the exchange as a whole still ends."""
    lines = 0
    with pytest.raises(OutboundError) as failed:  # noqa: PT012 - the stream is read until the deadline
        with outbound.open_stream("GET", f"http://127.0.0.1:{server.port}/trickle", policy=LOCAL,
                                  timeouts=Timeouts(connect=2, read=2, total=0.5)) as answer:
            while answer.readline():
                lines += 1
    assert failed.value.kind == "timeout"
    assert 0 < lines < 200  # it was answering, and was cut off before the end


def test_an_unreachable_server_is_named_as_such() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OutboundError) as failed:
        outbound.request("GET", f"http://127.0.0.1:{port}/", policy=LOCAL, timeouts=QUICK)
    assert failed.value.kind == "unreachable" and not isinstance(failed.value, Refused)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd", "http:///nohost", "http://[::1/x",
                                 "https://example.com:99999/"])
def test_anything_but_an_absolute_http_url_is_refused(url: str) -> None:
    with pytest.raises(Refused) as refused:
        outbound.request("GET", url)
    assert refused.value.kind == "malformed"


def _tls_for(name: str, tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a self-signed certificate for ``name``, and a client context trusting only it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp / "cert.pem").write_bytes(pem)
    (tmp / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    client = ssl.create_default_context(cadata=pem.decode())
    return server, client


def test_tls_goes_to_the_checked_address_with_sni_and_the_certificate_of_the_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, connected: list[str]) -> None:
    server_tls, client_tls = _tls_for("api.pinned.test", tmp_path)
    tls_server = _Server(server_tls)
    try:
        _resolving(monkeypatch, "api.pinned.test", "127.0.0.1")
        answer = outbound.request("GET", f"https://api.pinned.test:{tls_server.port}/ok", policy=LOCAL,
                                  tls=client_tls)
        assert answer.status == 200
        assert tls_server.sni == ["api.pinned.test"]
        assert tls_server.seen == [("/ok", f"api.pinned.test:{tls_server.port}")]
        assert connected == ["127.0.0.1"]
        # another name on the same address: the certificate does not match it, so nothing is sent
        _resolving(monkeypatch, "other.pinned.test", "127.0.0.1")
        with pytest.raises(OutboundError) as failed:
            outbound.request("GET", f"https://other.pinned.test:{tls_server.port}/ok", policy=LOCAL, tls=client_tls)
        assert failed.value.kind == "unreachable" and "TLS" in str(failed.value)
        assert len(tls_server.seen) == 1
    finally:
        tls_server.close()


def test_declared_entries_open_only_their_address(monkeypatch: pytest.MonkeyPatch, server: _Server) -> None:
    from chalicelib.core.config import settings

    monkeypatch.setenv("OUTBOUND_ALLOW", f"127.0.0.1:{server.port}")
    settings.cache_clear()
    try:
        assert outbound.request("GET", f"http://127.0.0.1:{server.port}/ok").status == 200
        with pytest.raises(Refused, match="private"):
            outbound.request("GET", f"http://127.0.0.1:{server.port}/ok", policy=Policy(declared=False))
        with pytest.raises(Refused, match="private"):
            outbound.request("GET", f"http://127.0.0.2:{server.port}/ok")
    finally:
        monkeypatch.delenv("OUTBOUND_ALLOW")
        settings.cache_clear()


def test_the_address_checks_cover_ipv4_mapped_and_6to4_forms() -> None:
    for literal in ("::ffff:10.0.0.1", "2002:a00:1::"):  # 6to4 of 10.0.0.1
        with pytest.raises(Refused):
            outbound.check_address(ipaddress.ip_address(literal), "h")
    outbound.check_address(ipaddress.ip_address("93.184.216.34"), "h")  # public: allowed
