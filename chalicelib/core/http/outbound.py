"""The one outbound HTTP client: every request the platform makes to another server goes through ``request``
or ``open_stream`` (the http connector, model endpoints, identity providers, client metadata documents, the
web app's calls to its own API).

A URL's host is resolved once; every address it resolves to is checked (``check_address``) and the
connection is then made to that checked address, with the host name kept for the ``Host`` header and for
TLS (SNI and certificate verification), so a DNS answer that changes between check and connect (DNS
rebinding) cannot redirect the request. Instance-metadata, link-local, multicast, unspecified and reserved
addresses are refused always. Private and loopback addresses are refused unless the caller's ``Policy``
allows them: either every one (the deployment's own endpoints; the http connector in the local and test
stages) or only those the deployment declares in ``OUTBOUND_ALLOW`` (comma-separated CIDR blocks or
``address:port`` pairs; ``make run`` declares its local model server's address this way).

Redirects are never followed: a 3xx answer is an ``OutboundError`` (``redirect``), or, for a caller that
forwards answers as they are (``redirects="return"``), handed back unfollowed. Every exchange has a connect
timeout, a timeout between bytes and a deadline for the whole exchange (``Timeouts``), and a body larger
than ``max_bytes`` is cut off with an ``OutboundError`` (``too_large``). Every failure is an
``OutboundError``; ``status`` is what a route answers for it (``api_error``). The HTTP itself is the
standard library's ``http.client``.
"""
from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Literal

from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError

IP = ipaddress.IPv4Address | ipaddress.IPv6Address

# cloud instance-metadata and container-credential endpoints: refused whatever is declared
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "169.254.170.23", "fd00:ec2::254", "fd00:ec2::23", "100.100.100.200"))


class OutboundError(Exception):
    """An outbound request that failed or was not made; the message names the host, never a key or a body.

    ``kind``: forbidden (an address never allowed, whatever is declared) | private | unresolvable | malformed
    (these four: ``Refused``, nothing was sent) | redirect | too_large | timeout | unreachable.
    """

    REFUSED_KINDS = ("forbidden", "private", "unresolvable", "malformed")

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def status(self) -> int:
        """422 when the URL the caller gave may not be reached; 502 when the server answered badly or not at all."""
        return 422 if self.kind in self.REFUSED_KINDS else 502

    def api_error(self, code: str | None = None, detail: str | None = None) -> ApiError:
        """The problem a route answers: ``endpoint_refused`` (422) or ``upstream_failed`` (502) by default."""
        default = "endpoint_refused" if self.status == 422 else "upstream_failed"
        return ApiError(self.status, code or default, detail or str(self))


class Refused(OutboundError):
    """The request may not be made (its URL or an address the host resolves to is not allowed): nothing was sent."""


@dataclass(frozen=True)
class Policy:
    """Which non-public addresses a request may reach (public ones are always allowed)."""

    private: bool = False  # every private and loopback address (local and test stages of the http connector)
    declared: bool = True  # the deployment's OUTBOUND_ALLOW entries
    loopback: bool = False  # any loopback address (model endpoints under make run with LOCAL_ENDPOINTS=1)

    def allows(self, ip: IP, port: int) -> bool:
        if self.private or (self.loopback and ip.is_loopback):
            return True
        return self.declared and any(_matches(entry, ip, port) for entry in declared_entries())


TRUSTED = Policy(private=True)  # the deployment's own endpoints (its configuration, never a tenant's input)


def declared_entries() -> tuple[str, ...]:
    """The deployment's ``OUTBOUND_ALLOW`` entries (``core.config``)."""
    return settings().outbound_allow


def _matches(entry: str, ip: IP, port: int) -> bool:
    try:
        if "/" in entry:
            net = ipaddress.ip_network(entry, strict=False)
            return ip.version == net.version and ip in net
        host, _, port_text = entry.rpartition(":")
        return ipaddress.ip_address(host.strip("[]")) == ip and int(port_text) == port
    except ValueError:
        return False


def check_address(ip: IP, host: str, port: int = 0, policy: Policy = Policy()) -> None:
    """Refuse metadata and link-local always; anything not globally routable unless ``policy`` allows it."""
    mapped = getattr(ip, "ipv4_mapped", None) or getattr(ip, "sixtofour", None)
    for addr in (ip, mapped) if mapped else (ip,):
        if (addr in METADATA_ADDRESSES or addr.is_link_local or addr.is_multicast or addr.is_unspecified
                or addr.is_reserved):
            raise Refused(f"{host} resolves to a forbidden address", "forbidden")
        if not addr.is_global and not policy.allows(addr, port):
            where = "on this machine (loopback)" if addr.is_loopback else "on a private network"
            raise Refused(f"{host} resolves to a private address {where}", "private")


def resolve(host: str, port: int, policy: Policy = Policy()) -> str:
    """The one address to connect to: the host resolved once, every answer checked."""
    try:
        ip_literal = ipaddress.ip_address(host)
        infos = [(None, None, None, None, (str(ip_literal), port))]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)  # type: ignore[assignment]
        except (OSError, UnicodeError):
            raise Refused(f"cannot resolve {host}", "unresolvable") from None
    if not infos:
        raise Refused(f"cannot resolve {host}", "unresolvable")
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    for ip in addresses:
        check_address(ip, host, port, policy)
    return str(addresses[0])


def split_url(url: str) -> tuple[urllib.parse.SplitResult, str, int]:
    """``(parts, host, port)`` of an absolute http(s) URL (``Refused`` for anything else)."""
    try:
        split = urllib.parse.urlsplit(url)
        port = split.port or (443 if split.scheme == "https" else 80)
    except ValueError:
        raise Refused("the URL is malformed", "malformed") from None
    if split.scheme not in ("http", "https") or not split.hostname:
        raise Refused("the URL must be an absolute http(s) URL", "malformed")
    try:  # a host name no resolver can take (lone surrogates, an empty or over-long label) is malformed
        split.hostname.encode("idna")
    except UnicodeError:
        raise Refused("the URL's host name is malformed", "malformed") from None
    return split, split.hostname, port


@dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect (TCP and TLS), between two reads, and for the whole exchange (connect to last byte)."""

    connect: float = 5.0
    read: float = 30.0
    total: float = 60.0

    @classmethod
    def within(cls, seconds: float) -> Timeouts:
        """Every limit at most ``seconds`` (a caller with one budget for the whole answer)."""
        return cls(min(cls.connect, seconds), seconds, seconds)


MAX_BYTES = 1024 * 1024
_CHUNK = 64 * 1024


class _Pinned(http.client.HTTPConnection):
    """Connects to the checked address, whatever the host name would resolve to now; ``Host`` stays the name."""

    def __init__(self, host: str, port: int, address: str, connect_timeout: float) -> None:
        super().__init__(host, port, timeout=connect_timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedTLS(http.client.HTTPSConnection):
    """TLS to the checked address, with SNI and the certificate verified for the host name."""

    def __init__(self, host: str, port: int, address: str, connect_timeout: float, tls: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=connect_timeout, context=tls)
        self._address = address
        self._tls = tls

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        try:
            self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise


class Stream:
    """An answer being read: ``status``, ``headers``, and a body read within the size limit and the deadline.

    Use as a context manager (or call ``close``): the connection is closed when done."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, host: str,
                 max_bytes: int, timeouts: Timeouts, deadline: float) -> None:
        self._conn, self._resp, self._host = conn, resp, host
        self._max, self._timeouts, self._deadline = max_bytes, timeouts, deadline
        self._read = 0
        self.status: int = resp.status
        self.headers: http.client.HTTPMessage = resp.headers

    def read(self) -> bytes:
        """The rest of the body (``too_large`` past ``max_bytes``)."""
        parts: list[bytes] = []
        while True:
            chunk = self._call(lambda: self._resp.read(min(_CHUNK, self._max + 1 - self._read)))
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
            self._count(len(chunk))

    def read_some(self) -> bytes:
        """What the connection has now (at least one byte, at most 64 KiB; ``b""`` at the end): a stream
        passed on as it arrives (``read`` would wait for a full buffer)."""
        chunk = self._call(lambda: self._resp.read1(min(_CHUNK, self._max + 1 - self._read)))
        self._count(len(chunk))
        return chunk

    def readline(self) -> bytes:
        """The next line of the body, ``b""`` at its end (a line counts towards ``max_bytes`` too)."""
        line = self._call(lambda: self._resp.readline(self._max + 1 - self._read))
        self._count(len(line))
        return line

    def _count(self, n: int) -> None:
        self._read += n
        if self._read > self._max:
            raise OutboundError(f"{self._host} answered more than {self._max} bytes", "too_large")

    def _call(self, read: Callable[[], bytes]) -> bytes:
        _arm(self._conn, self._timeouts, self._deadline, self._host)
        try:
            return read()
        except TimeoutError:
            raise _timeout(self._host, self._timeouts) from None
        except (OSError, http.client.HTTPException) as err:
            raise OutboundError(f"{self._host} broke off its answer ({type(err).__name__})", "unreachable") from None

    def close(self) -> None:
        self._resp.close()
        self._conn.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


@dataclass(frozen=True)
class Response:
    status: int
    headers: http.client.HTTPMessage  # case-insensitive lookups
    body: bytes


def _timeout(host: str, timeouts: Timeouts) -> OutboundError:
    return OutboundError(f"{host} did not answer in time ({timeouts.connect:g} s to connect, {timeouts.read:g} s "
                         f"between reads, {timeouts.total:g} s in all)", "timeout")


def _arm(conn: http.client.HTTPConnection, timeouts: Timeouts, deadline: float, host: str) -> None:
    """The next socket operation may last the read timeout, and never past the deadline."""
    left = deadline - time.monotonic()
    if left <= 0:
        conn.close()
        raise _timeout(host, timeouts)
    if conn.sock is not None:
        conn.sock.settimeout(min(timeouts.read, left))


def open_stream(method: str, url: str, *, headers: Mapping[str, str] | None = None, body: bytes | None = None,
                policy: Policy = Policy(), timeouts: Timeouts = Timeouts(), max_bytes: int = MAX_BYTES,
                redirects: Literal["refuse", "return"] = "refuse", tls: ssl.SSLContext | None = None) -> Stream:
    """Send one request to ``url``'s checked address; the answer with its body still to read.

    ``Refused`` before anything is sent; ``OutboundError`` when the server cannot be reached, is too slow,
    or answers a redirect (unless ``redirects="return"``, which hands the 3xx back unfollowed)."""
    split, host, port = split_url(url)
    address = resolve(host, port, policy)
    deadline = time.monotonic() + timeouts.total
    conn: http.client.HTTPConnection
    if split.scheme == "https":
        conn = _PinnedTLS(host, port, address, min(timeouts.connect, timeouts.total),
                          tls or ssl.create_default_context())
    else:
        conn = _Pinned(host, port, address, min(timeouts.connect, timeouts.total))
    target = urllib.parse.urlunsplit(("", "", split.path or "/", split.query, ""))
    try:
        conn.connect()
        _arm(conn, timeouts, deadline, host)
        conn.request(method, target, body=body, headers=dict(headers or {}))
        _arm(conn, timeouts, deadline, host)
        resp = conn.getresponse()
    except OutboundError:
        conn.close()
        raise
    except TimeoutError:
        conn.close()
        raise _timeout(host, timeouts) from None
    except ssl.SSLError as err:
        conn.close()
        raise OutboundError(f"{host} failed the TLS handshake ({err.reason or type(err).__name__})",
                            "unreachable") from None
    except (OSError, http.client.HTTPException) as err:
        conn.close()
        raise OutboundError(f"{host} is unreachable ({type(err).__name__})", "unreachable") from None
    if 300 <= resp.status < 400 and redirects == "refuse":
        resp.close()
        conn.close()
        raise OutboundError(f"{host} answered a redirect (HTTP {resp.status}), which is not followed", "redirect")
    return Stream(conn, resp, host, max_bytes, timeouts, deadline)


def request(method: str, url: str, *, headers: Mapping[str, str] | None = None, body: bytes | None = None,
            policy: Policy = Policy(), timeouts: Timeouts = Timeouts(), max_bytes: int = MAX_BYTES,
            redirects: Literal["refuse", "return"] = "refuse", tls: ssl.SSLContext | None = None) -> Response:
    """``open_stream`` and read the whole body: status, headers and body of any non-redirect answer."""
    with open_stream(method, url, headers=headers, body=body, policy=policy, timeouts=timeouts,
                     max_bytes=max_bytes, redirects=redirects, tls=tls) as answer:
        return Response(answer.status, answer.headers, answer.read())
