"""Step input templates: ``{{input.question}}`` and ``{{steps.<name>.output.<path>}}``.

A string that is exactly one template takes the referenced value as it is (an object stays an object);
a template inside a longer string is replaced by the value's text (JSON for non-strings). Paths are
dot-separated names and list indexes (``steps.find.output.rows.0.1``). A reference that names a missing
value is an error (``MissingValue``); the definition check refuses references to unknown or later steps.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_TEMPLATE = re.compile(r"\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}")
_WHOLE = re.compile(r"^\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}$")


class MissingValue(Exception):
    """A template names a value that does not exist."""

    def __init__(self, ref: str) -> None:
        super().__init__(ref)
        self.ref = ref


def references(value: Any) -> Iterator[str]:
    """Every template reference inside ``value`` (strings in nested lists and objects)."""
    if isinstance(value, str):
        for m in _TEMPLATE.finditer(value):
            yield m.group(1)
    elif isinstance(value, dict):
        for v in value.values():
            yield from references(v)
    elif isinstance(value, list):
        for v in value:
            yield from references(v)


def _lookup(scope: dict[str, Any], ref: str) -> Any:
    current: Any = scope
    for part in ref.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise MissingValue(ref)
    return current


def render(value: Any, scope: dict[str, Any]) -> Any:
    """``value`` with every template replaced from ``scope`` (``{"input": ..., "steps": ...}``)."""
    if isinstance(value, str):
        whole = _WHOLE.match(value)
        if whole:
            return _lookup(scope, whole.group(1))

        def text(m: re.Match[str]) -> str:
            found = _lookup(scope, m.group(1))
            return found if isinstance(found, str) else json.dumps(found, separators=(",", ":"), default=str)

        return _TEMPLATE.sub(text, value)
    if isinstance(value, dict):
        return {k: render(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, scope) for v in value]
    return value


def input_refs(value: Any) -> list[str]:
    """The ``input.<name>`` references of ``value`` (the path after ``input.``)."""
    return [r[len("input."):] for r in references(value) if r.startswith("input.")]


def check_inputs(plan: list[dict[str, Any]], run_input: dict[str, Any]) -> list[dict[str, str]]:
    """The plan's references to the run's ``input`` that ``run_input`` does not hold (as field errors)."""
    errors = []
    for i, step in enumerate(plan):
        for ref in input_refs(step.get("input", {})):
            try:
                _lookup({"input": run_input}, "input." + ref)
            except MissingValue:
                errors.append({"field": f"input.{ref}", "message": f"is required by plan step {i + 1} "
                                                                   f"({step.get('name')})"})
    return errors
