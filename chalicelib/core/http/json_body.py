"""The one parser of JSON request bodies (REST, GraphQL): bounded nesting, well-formed text, 400 for anything
it refuses.

Python's ``json`` decoder recurses once per nesting level, so a body nested a few thousand levels deep
raised ``RecursionError`` (a 500), and a body just under the interpreter's limit would blow the stack
later in code that walks it. Before decoding, a linear scan (string literals removed, brackets counted)
refuses nesting deeper than ``MAX_DEPTH``; no legitimate request body comes near it.

The decoder also accepts text that is not Unicode and that every later step (DynamoDB, S3, the JSON
encoder of the answer) refuses with a 500: an escaped lone UTF-16 surrogate (``"\\ud800"``) decodes to a
``str`` that cannot be encoded as UTF-8. So a body is refused with 400 ``invalid_unicode`` when any string
(member names included) holds an unpaired surrogate or U+0000 (NUL is never part of a legitimate field,
and C-string consumers truncate at it), and with 400 ``malformed_json`` when the bytes are not strict
UTF-8 (overlong forms, encoded surrogates, other encodings) or hold ``NaN``/``Infinity`` (not JSON).
"""
from __future__ import annotations

import json
import re
from typing import Any

from chalicelib.core.http.errors import ApiError

MAX_DEPTH = 64
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


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


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def bad_text(value: Any) -> bool:
    """True when any string in ``value`` (keys too) holds a lone surrogate or NUL (iterative: no recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _BAD_CHARS.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode a JSON body: 400 ``json_too_deep`` past ``max_depth`` levels, 400 ``malformed_json`` when invalid
    (or not strict UTF-8), 400 ``invalid_unicode`` for a lone surrogate or NUL in a string."""
    if isinstance(raw, str):
        if _BAD_CHARS.search(raw):  # raw surrogates or NUL outside any escape
            raise _invalid_unicode()
        data = raw.encode()
    else:
        data = raw
    if nesting_depth(data) > max_depth:
        raise ApiError(400, "json_too_deep", f"The request body nests arrays/objects deeper than {max_depth} levels.")
    try:
        parsed = json.loads(data.decode("utf-8", errors="strict"), parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ApiError(400, "malformed_json", "The request body is not valid JSON in UTF-8.") from None
    if bad_text(parsed):
        raise _invalid_unicode()
    return parsed


def _invalid_unicode() -> ApiError:
    return ApiError(400, "invalid_unicode", "A string in the request body holds an unpaired UTF-16 surrogate "
                    "or a NUL character; send well-formed Unicode text.")
