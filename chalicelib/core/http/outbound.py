"""Outbound requests made on a tenant's behalf (the http connector, model connections): one set of checks.

A URL's host is resolved once; every address it resolves to is checked (``check_address``) and the
connection is then made to that checked address (``pinned_connection``; TLS still verifies the
certificate for the host name), so a DNS answer that changes between check and connect (DNS rebinding)
cannot redirect the request. Instance-metadata, link-local, multicast, unspecified and reserved addresses
are refused always. Private and loopback addresses are refused unless the caller's ``Policy`` allows
them: either every one (the http connector in the local and test stages) or only those the deployment
declares in ``OUTBOUND_ALLOW`` (comma-separated CIDR blocks or ``address:port`` pairs; ``make run``
declares its local model server's address this way). Redirects are never followed by these connections.
"""
from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import urllib.parse
from dataclasses import dataclass

from chalicelib.core.config import settings

IP = ipaddress.IPv4Address | ipaddress.IPv6Address

# cloud instance-metadata and container-credential endpoints: refused whatever is declared
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "169.254.170.23", "fd00:ec2::254", "fd00:ec2::23", "100.100.100.200"))


class Refused(Exception):
    """The request may not be made; the message names the host, never a key or a body."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind  # forbidden (never allowed, whatever is declared) | private | unresolvable | malformed


@dataclass(frozen=True)
class Policy:
    """Which non-public addresses a request may reach (public ones are always allowed)."""

    private: bool = False  # every private and loopback address (local and test stages of the http connector)
    declared: bool = True  # the deployment's OUTBOUND_ALLOW entries

    def allows(self, ip: IP, port: int) -> bool:
        if self.private:
            return True
        return self.declared and any(_matches(entry, ip, port) for entry in declared_entries())


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
            raise Refused(f"{host} resolves to a private address", "private")


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


class PinnedHTTP(http.client.HTTPConnection):
    """Connects to the checked address, whatever the host name would resolve to now."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class PinnedHTTPS(http.client.HTTPSConnection):
    """TLS to the checked address, with the certificate verified for the host name."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


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


def pinned_connection(url: str, timeout: float, policy: Policy = Policy()) -> tuple[http.client.HTTPConnection, str]:
    """A connection to ``url``'s checked address and the request target of ``url`` (path and query)."""
    split, host, port = split_url(url)
    address = resolve(host, port, policy)
    cls = PinnedHTTPS if split.scheme == "https" else PinnedHTTP
    target = urllib.parse.urlunsplit(("", "", split.path or "/", split.query, ""))
    return cls(host, port, address, timeout), target
