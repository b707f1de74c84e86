"""Prefixed, sortable identifiers (ULID) such as ``ws_01J...``."""
from __future__ import annotations

import re

from ulid import ULID

PREFIXES = frozenset(
    {"usr", "ws", "inv", "chat", "agt", "run", "conn", "ds", "sync", "evt", "tok", "key", "sess",
     "grant", "cli", "pol", "exp", "msg", "doc", "q", "bkp", "rst", "dsr", "mcp", "grp", "pre"}
)
_ID_RE = re.compile(r"^(?P<prefix>[a-z]+)_(?P<ulid>[0-9A-HJKMNP-TV-Z]{26})$")


def new_id(prefix: str) -> str:
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{ULID()}"


def is_id(value: object, prefix: str) -> bool:
    """True when ``value`` is a well-formed id of the given kind."""
    if not isinstance(value, str):
        return False
    m = _ID_RE.match(value)
    return bool(m and m.group("prefix") == prefix)
