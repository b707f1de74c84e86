"""The workspace setting ``answer_link_hosts``: the hosts whose links answers keep (``knowledge/answer_links``).

Each entry is a host name (``docs.example.com``) or ``*.`` and a host name for every subdomain of it
(``*.example.com``); no scheme, port, path or IP address. Entries are stored lower-cased, in IDNA (punycode)
form, each once; at most ``MAX_HOSTS``.
"""
from __future__ import annotations

from typing import Any

MAX_HOSTS = 50
MAX_HOST_CHARS = 253
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def _ascii(entry: str) -> str | None:
    host = entry.strip().lower().rstrip(".")
    wildcard = host.startswith("*.")
    name = host[2:] if wildcard else host
    try:
        name = name.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    labels = name.split(".")
    if (not 3 <= len(name) <= MAX_HOST_CHARS or len(labels) < 2 or labels[-1].isdigit()
            or not all(1 <= len(lb) <= 63 and set(lb) <= _LABEL_CHARS and lb[0] != "-" and lb[-1] != "-"
                       for lb in labels)):
        return None
    return ("*." if wildcard else "") + name


def check(value: Any) -> str | None:
    """A validation message for the list, or None."""
    if not all(isinstance(v, str) and v.strip() and _ascii(v) is not None for v in value):
        return ("must list host names such as docs.example.com, or *.example.com for its subdomains "
                "(no scheme, port, path or IP address)")
    return None


def normalise(value: list[str]) -> list[str]:
    out: list[str] = []
    for v in value:
        host = _ascii(v)
        if host is not None and host not in out:
            out.append(host)
    return out
