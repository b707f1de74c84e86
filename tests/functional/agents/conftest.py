"""Fixtures of the agent tests that need a model: the scripted tool-calling model, registered as the
deployment's only tool-capable model, and a tenant seeded with the demo datasets."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from chalicelib.core.config import settings
from chalicelib.gateway import demo
from chalicelib.llm.registry import registry
from chalicelib.workers import jobs
from tests.functional.agents.scripted_model import ScriptedModel
from tests.functional.conftest import Tenant


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedModel]:
    scripted = ScriptedModel([])
    monkeypatch.setenv("MODEL_PROVIDERS", json.dumps({"providers": [{
        "id": "local", "kind": "openai", "endpoints": {"us-east-1": {"base_url": scripted.url}},
        "models": [{"id": "tool-model", "tool_use": True, "context_tokens": 32000}]}],
        "preference": ["local/tool-model"]}))
    settings.cache_clear()
    registry.cache_clear()
    yield scripted
    scripted.close()
    monkeypatch.delenv("MODEL_PROVIDERS")
    settings.cache_clear()
    registry.cache_clear()


@pytest.fixture
def seeded(tenant: Tenant) -> Tenant:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email, on_changed=jobs.index_changed_dataset)
    return tenant
