"""The one parser of JSON request bodies (REST, GraphQL): bounded nesting, 400 for anything it refuses.

Python's ``json`` decoder recurses once per nesting level, so a body nested a few thousand levels deep
raised ``RecursionError`` (a 500), and a body just under the interpreter's limit would blow the stack
later in code that walks it. Before decoding, a linear scan (string literals removed, brackets counted)
refuses nesting deeper than ``MAX_DEPTH``; no legitimate request body comes near it.
"""
from __future__ import annotations

import json
import re
from typing import Any

from chalicelib.core.http.errors import ApiError

MAX_DEPTH = 64
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth(raw: bytes) -> int:
    """The deepest array/object nesting in ``raw`` (brackets inside string literals do not count)."""
    brackets = _STRING.sub(b'""', raw).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def parse(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode a JSON body: 400 ``json_too_deep`` past ``max_depth`` levels, 400 ``malformed_json`` when invalid."""
    data = raw.encode() if isinstance(raw, str) else raw
    if nesting_depth(data) > max_depth:
        raise ApiError(400, "json_too_deep", f"The request body nests arrays/objects deeper than {max_depth} levels.")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ApiError(400, "malformed_json", "The request body is not valid JSON.") from None
