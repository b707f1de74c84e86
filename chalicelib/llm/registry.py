"""The model registry: every provider, its models, the regions each model can serve in and its
capabilities, read once per process from the deployment's provider file (``MODEL_PROVIDERS``; format in
``docs/api/models.md``). The built-in extractive provider is always present.

A model's public id is ``<provider id>/<model id>``. Bedrock cross-region inference profiles (model ids
starting ``us.``, ``eu.``, ``apac.``, ``global.``, ...) can run a request outside the workspace's region,
so they serve no region at all here: only single-region model ids are offered.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.config import settings
from chalicelib.core.logs import get_logger
from chalicelib.core.process_state import cached
from chalicelib.core.regions import OPEN_REGIONS

log = get_logger("models.registry")

EXTRACTIVE_ID = "builtin/extractive"
PROVIDER_KINDS = ("extractive", "openai", "bedrock")
CROSS_REGION_PREFIXES = ("us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.", "ca.")


class ConfigError(ValueError):
    """The provider file is malformed (raised at load; the message names the entry, never a key)."""


@dataclass(frozen=True)
class Endpoint:
    """Where an OpenAI-compatible provider is reached in one region."""

    base_url: str
    api_key_ciphertext: str | None = field(default=None, repr=False)  # KMS ciphertext, base64


@dataclass(frozen=True)
class ModelSpec:
    """One model as the selector and the router see it."""

    id: str  # "<provider>/<model>"
    provider: str
    provider_kind: str  # extractive | openai | bedrock
    model: str  # the provider's own model id
    name: str
    kind: str  # generative | extractive | embedding
    context_tokens: int
    streaming: bool
    tool_use: bool
    embeddings: bool
    regions: tuple[str, ...]
    endpoints: dict[str, Endpoint] = field(default_factory=dict, compare=False, repr=False)

    def capabilities(self) -> dict[str, Any]:
        return {"context_tokens": self.context_tokens, "streaming": self.streaming, "tool_use": self.tool_use,
                "embeddings": self.embeddings, "generative": self.kind == "generative"}


@dataclass(frozen=True)
class Registry:
    models: tuple[ModelSpec, ...]
    preference: tuple[str, ...]  # model ids, most preferred first (unlisted ones follow, by id)
    embedding_model: str | None = None  # used for dense retrieval (knowledge/dense.py); None: lexical only

    def get(self, model_id: str) -> ModelSpec | None:
        return next((m for m in self.models if m.id == model_id), None)

    def in_region(self, region: str) -> list[ModelSpec]:
        return [m for m in self.models if region in m.regions]

    def rank(self, model_id: str) -> tuple[int, str]:
        return (self.preference.index(model_id) if model_id in self.preference else len(self.preference), model_id)


EXTRACTIVE = ModelSpec(
    id=EXTRACTIVE_ID, provider="builtin", provider_kind="extractive", model="extractive",
    name="Extractive answers (built in, not generative)", kind="extractive", context_tokens=1_000_000,
    streaming=True, tool_use=False, embeddings=False, regions=OPEN_REGIONS)


def _regions(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
        raise ConfigError(f"{where}: regions must be a list of region names")
    return tuple(r for r in raw if r in OPEN_REGIONS)


def _model(provider: dict[str, Any], raw: dict[str, Any], regions: tuple[str, ...],
           endpoints: dict[str, Endpoint]) -> ModelSpec:
    pid = provider["id"]
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"]:
        raise ConfigError(f"provider {pid}: every model needs an id")
    mid = raw["id"]
    kind = "embedding" if raw.get("embeddings") and not raw.get("chat", True) else "generative"
    served = regions
    if "regions" in raw:
        served = tuple(r for r in _regions(raw["regions"], f"model {pid}/{mid}") if r in regions)
    if provider["kind"] == "bedrock" and mid.startswith(CROSS_REGION_PREFIXES):
        log.warning("cross-region inference profile not offered", extra={"model": f"{pid}/{mid}"})
        served = ()
    return ModelSpec(
        id=f"{pid}/{mid}", provider=pid, provider_kind=provider["kind"], model=mid,
        name=str(raw.get("name") or mid), kind=kind, context_tokens=int(raw.get("context_tokens", 8192)),
        streaming=bool(raw.get("streaming", True)), tool_use=bool(raw.get("tool_use", False)),
        embeddings=bool(raw.get("embeddings", False)), regions=served,
        endpoints={r: e for r, e in endpoints.items() if r in served})


def parse(config: dict[str, Any]) -> Registry:
    """The registry described by a provider file's JSON (see ``docs/api/models.md``)."""
    if not isinstance(config, dict):
        raise ConfigError("the provider file must hold a JSON object")
    models: list[ModelSpec] = [EXTRACTIVE]
    seen = {"builtin"}
    for provider in config.get("providers", []):
        if not isinstance(provider, dict) or provider.get("kind") not in PROVIDER_KINDS:
            raise ConfigError(f"provider kind must be one of {', '.join(PROVIDER_KINDS)}")
        pid = provider.get("id")
        if not isinstance(pid, str) or not pid or "/" in pid or pid in seen:
            raise ConfigError("each provider needs a unique id without '/'")
        seen.add(pid)
        if provider["kind"] == "extractive":
            continue  # always present
        endpoints: dict[str, Endpoint] = {}
        if provider["kind"] == "openai":
            raw_eps = provider.get("endpoints")
            if not isinstance(raw_eps, dict) or not raw_eps:
                raise ConfigError(f"provider {pid}: endpoints must map regions to {{base_url, api_key_ciphertext}}")
            for region, ep in raw_eps.items():
                if region not in OPEN_REGIONS:
                    continue
                if not isinstance(ep, dict) or not str(ep.get("base_url", "")).startswith(("http://", "https://")):
                    raise ConfigError(f"provider {pid}: endpoint of {region} needs an http(s) base_url")
                endpoints[region] = Endpoint(str(ep["base_url"]).rstrip("/"), ep.get("api_key_ciphertext"))
            regions = tuple(endpoints)
        else:
            regions = _regions(provider.get("regions", []), f"provider {pid}")
        for raw in provider.get("models", []):
            models.append(_model(provider, raw, regions, endpoints))
    pref = config.get("preference", [])
    if not isinstance(pref, list) or not all(isinstance(p, str) for p in pref):
        raise ConfigError("preference must be a list of model ids")
    emb = (config.get("embeddings") or {}).get("model") if isinstance(config.get("embeddings"), dict) else None
    if emb is not None and not isinstance(emb, str):
        raise ConfigError("embeddings.model must be a model id")
    return Registry(tuple(models), tuple(pref), emb)


def load_config(value: str) -> dict[str, Any]:
    """``value`` is a path to the provider file or its JSON text; empty means built-in only."""
    if not value.strip():
        return {}
    text = value if value.lstrip().startswith("{") else open(os.path.expanduser(value), encoding="utf-8").read()
    try:
        return json.loads(text)
    except ValueError:
        raise ConfigError("the provider file is not valid JSON") from None


@cached(maxsize=1)
def registry() -> Registry:
    """The deployment's registry (tests call ``registry.cache_clear()`` after changing ``MODEL_PROVIDERS``)."""
    return parse(load_config(settings().model_providers))
