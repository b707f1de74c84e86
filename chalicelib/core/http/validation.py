"""Declarative checks for JSON bodies and query parameters.

A body is refused whole (400 ``validation_failed``, each bad field listed) when it has unknown
fields, missing required ones, wrong types, values outside an enum or out of bounds.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib.core.http.errors import ApiError, validation_error
from chalicelib.core.process_state import cached

EMAIL_RE = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$")


@dataclass(frozen=True)
class F:
    """One field: its JSON type and constraints."""

    type: type | tuple[type, ...]
    required: bool = False
    enum: tuple[Any, ...] | None = None
    min_len: int | None = None
    max_len: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    check: Callable[[Any], str | None] | None = None  # returns an error message or None
    nullable: bool = False
    pattern: str | None = None  # a JSON Schema pattern written ``^...$``, matched against the whole string


@cached(maxsize=64, derived=True)
def _whole(pattern: str) -> re.Pattern[str]:
    """``pattern`` as ECMA-262 reads ``^...$`` (Python's ``$`` would also match before a final newline)."""
    return re.compile(pattern.removeprefix("^").removesuffix("$"))


def email(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > 254 or not EMAIL_RE.match(value):
        return "must be a valid e-mail address"
    return None


def _type_name(t: type | tuple[type, ...]) -> str:
    names = {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object", list: "array"}
    if isinstance(t, tuple):
        return " or ".join(names.get(x, x.__name__) for x in t)
    return names.get(t, t.__name__)


def _check_one(name: str, spec: F, value: Any) -> str | None:
    if value is None:
        return None if spec.nullable else "must not be null"
    message = _type_problem(spec, value) or _size_problem(spec, value)
    if message:
        return message
    if spec.pattern is not None and isinstance(value, str) and not _whole(spec.pattern).fullmatch(value):
        return f"must match {spec.pattern}"
    if spec.check is not None:
        return spec.check(value)
    return None


def _type_problem(spec: F, value: Any) -> str | None:
    """The value's type against the field's (a JSON boolean is no number), then its enumeration."""
    # bool is an int in Python; JSON keeps them apart
    if isinstance(value, bool) and spec.type is not bool and not (isinstance(spec.type, tuple) and bool in spec.type):
        return f"must be a {_type_name(spec.type)}"
    if not isinstance(value, spec.type):
        return f"must be a {_type_name(spec.type)}"
    if spec.enum is not None and value not in spec.enum:
        return "must be one of " + ", ".join(str(e) for e in spec.enum)
    return None


def _size_problem(spec: F, value: Any) -> str | None:
    """A text's or list's length, or a number's value, against the field's bounds."""
    if isinstance(value, (str, list, dict)):
        unit = "characters" if isinstance(value, str) else "items"
        if spec.min_len is not None and len(value) < spec.min_len:
            return f"must have at least {spec.min_len} {unit}"
        if spec.max_len is not None and len(value) > spec.max_len:
            return f"must have at most {spec.max_len} {unit}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if spec.minimum is not None and value < spec.minimum:
            return f"must be at least {spec.minimum}"
        if spec.maximum is not None and value > spec.maximum:
            return f"must be at most {spec.maximum}"
    return None


def problem(spec: F, value: Any) -> str | None:
    """Why ``value`` does not fit ``spec`` (a field's message), or None when it does."""
    return _check_one("", spec, value)


def validate(body: Any, fields: dict[str, F], *, allow_unknown: bool = False) -> dict[str, Any]:
    """Return ``body`` when it matches ``fields``; raise a 400 listing every problem otherwise."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "The request body must be a JSON object.")
    errors: list[dict[str, str]] = []
    if not allow_unknown:
        for key in body:
            if key not in fields:
                errors.append({"field": str(key)[:64], "message": "is not a known field"})
    for name, spec in fields.items():
        if name not in body:
            if spec.required:
                errors.append({"field": name, "message": "is required"})
            continue
        problem = _check_one(name, spec, body[name])
        if problem:
            errors.append({"field": name, "message": problem})
    if errors:
        raise validation_error(errors)
    return body


def query_int(params: dict[str, str] | None, name: str, default: int, *, minimum: int, maximum: int) -> int:
    raw = (params or {}).get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise validation_error([{"field": name, "message": "must be an integer"}]) from None
    if not minimum <= value <= maximum:
        raise validation_error([{"field": name, "message": f"must be between {minimum} and {maximum}"}])
    return value
