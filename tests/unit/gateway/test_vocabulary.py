"""Connector kinds and the gateway's enumerations are declared once (``gateway/vocabulary.py``); the
sources' modules, the OpenAPI document and the GraphQL SDL agree with that declaration."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from graphql import build_schema

from chalicelib.gateway import vocabulary
from chalicelib.gateway.ingest import sources

GATEWAY = Path(vocabulary.__file__).parent / "api"


def _connector_enums(node: Any, prop: str) -> list[list[str]]:
    """Every ``enum`` of ``prop`` in a connector-shaped schema (one with ``config`` or ``category``) or in a
    query parameter named ``prop`` of the connector routes."""
    found: list[list[str]] = []
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and ({"config", "category"} & set(props)) and "enum" in props.get(prop, {}):
            found.append(props[prop]["enum"])
        if node.get("in") == "query" and node.get("name") == prop and "enum" in node.get("schema", {}):
            found.append(node["schema"]["enum"])
        for value in node.values():
            found.extend(_connector_enums(value, prop))
    elif isinstance(node, list):
        for value in node:
            found.extend(_connector_enums(value, prop))
    return found


def test_categories_derive_from_kinds() -> None:
    assert set(vocabulary.CATEGORY_OF_KIND) == set(vocabulary.KINDS)
    assert set(vocabulary.CATEGORIES) == set(vocabulary.CATEGORY_OF_KIND.values())


@pytest.mark.parametrize(("prop", "values"), [
    ("kind", vocabulary.KINDS), ("category", vocabulary.CATEGORIES),
])
def test_openapi_enums_equal_the_declaration(prop: str, values: tuple[str, ...]) -> None:
    document = json.loads((GATEWAY / "openapi.json").read_text())
    enums = _connector_enums(document, prop)
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


@pytest.mark.parametrize("kind", sorted(vocabulary.CONNECTOR_KINDS))
def test_every_connector_kind_has_a_reader_module(kind: str) -> None:
    reader = sources.module(kind)
    assert reader.__name__ == f"chalicelib.gateway.ingest.sources.{vocabulary.CONNECTOR_KINDS[kind].module}"
    assert isinstance(reader.FIELDS, dict) and isinstance(reader.SECRETS, tuple)
    assert callable(reader.health) and callable(reader.read)
    assert vocabulary.CONNECTOR_KINDS[kind].access in ("role", "url", "upload")
