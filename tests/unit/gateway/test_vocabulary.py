"""Connector kinds and the gateway's enumerations are declared once (``gateway/vocabulary.py``); the
sources' modules, the OpenAPI document and the GraphQL SDL agree with that declaration."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from graphql import build_schema

from chalicelib.gateway import sources, vocabulary

GATEWAY = Path(vocabulary.__file__).parent


def _enums_of_property(node: Any, prop: str) -> list[list[str]]:
    """Every ``enum`` given for a property or parameter named ``prop`` anywhere in the document."""
    found: list[list[str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == prop and isinstance(value, dict) and "enum" in value:
                found.append(value["enum"])
            found.extend(_enums_of_property(value, prop))
        if node.get("name") == prop and "enum" in node.get("schema", {}):
            found.append(node["schema"]["enum"])
    elif isinstance(node, list):
        for value in node:
            found.extend(_enums_of_property(value, prop))
    return found


def test_every_kind_has_a_source_module() -> None:
    assert set(sources._MODULES) == set(vocabulary.KINDS)
    for kind in vocabulary.KINDS:
        assert sources.module(kind).__name__.startswith("chalicelib.gateway.sources.")


def test_categories_derive_from_kinds() -> None:
    assert set(vocabulary.CATEGORY_OF_KIND) == set(vocabulary.KINDS)
    assert set(vocabulary.CATEGORIES) == set(vocabulary.CATEGORY_OF_KIND.values())


@pytest.mark.parametrize(("prop", "values"), [
    ("kind", vocabulary.KINDS), ("category", vocabulary.CATEGORIES), ("mode", vocabulary.INGESTION_MODES),
])
def test_openapi_enums_equal_the_declaration(prop: str, values: tuple[str, ...]) -> None:
    document = json.loads((GATEWAY / "openapi.json").read_text())
    enums = _enums_of_property(document, prop)
    assert enums, f"no enum for {prop!r} in openapi.json"
    for enum in enums:
        assert tuple(enum) == values


@pytest.mark.parametrize(("enum", "values"), [
    ("Category", vocabulary.CATEGORIES), ("Status", vocabulary.STATUSES),
    ("IngestionMode", vocabulary.INGESTION_MODES), ("SyncStatus", vocabulary.SYNC_STATUSES),
    ("FieldType", vocabulary.FIELD_TYPES), ("Classification", vocabulary.CLASSIFICATIONS),
    ("FieldPolicy", vocabulary.FIELD_POLICIES),
])
def test_graphql_enums_equal_the_declaration(enum: str, values: tuple[str, ...]) -> None:
    schema = build_schema((GATEWAY / "schema.graphql").read_text())
    assert tuple(schema.type_map[enum].values) == values  # type: ignore[attr-defined]
