"""Serving a group's OpenAPI document: the file beside its routes (YAML or JSON), read once per container."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chalicelib.core.http.api import Response, json_response
from chalicelib.core.process_state import cached


@cached(maxsize=8, derived=True)
def load(path: Path) -> dict[str, Any]:
    """The document at ``path`` (``.yaml`` or ``.json``)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    import yaml  # noqa: PLC0415 - only the groups with a YAML document ship PyYAML

    return yaml.safe_load(text)


def response(path: Path, server_url: str | None = None, description: str = "") -> Response:
    """The document as a cacheable JSON response, its ``servers`` set to this deployment when given."""
    doc = dict(load(path))
    if server_url:
        doc["servers"] = [{"url": server_url, "description": description}]
    return json_response(doc, headers={"Cache-Control": "public, max-age=300"})
