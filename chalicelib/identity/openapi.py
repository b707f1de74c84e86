"""The identity service's OpenAPI document: ``openapi.yaml`` beside this module, loaded once."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from chalicelib.core.config import settings

SOURCE = Path(__file__).with_name("openapi.yaml")


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    return yaml.safe_load(SOURCE.read_text(encoding="utf-8"))


def document() -> dict[str, Any]:
    doc = dict(_load())
    doc["servers"] = [{"url": settings().auth_url, "description": "identity service ({auth_url})"}]
    return doc
