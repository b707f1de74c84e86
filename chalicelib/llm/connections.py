"""Model connections a workspace's Admins declare: an OpenAI-compatible endpoint (a local llama.cpp
server, Ollama, vLLM, LM Studio, a hosted provider) or a Bedrock model, in the workspace's own region.

A connection is named (``^[a-z][a-z0-9-]{1,31}$``, unique in the workspace, never a deployment
provider's id); its models are offered as ``<name>/<model>`` beside the deployment's registry, under the
same per-role allow-list (``workspace_registry``). Its key is encrypted with the region's KMS ``data``
key (encryption context: purpose, workspace and connection) and never returned, logged or audited: an
answer says only ``has_key``. An endpoint URL is an outbound request on the tenant's behalf: it goes
through ``core/http/outbound.py`` when tested, listed and used (no private, loopback, link-local or metadata
address unless the deployment declares it in ``OUTBOUND_ALLOW``; loopback under ``make run`` started with
``LOCAL_ENDPOINTS=1``, never in a deployment; metadata and link-local never). A workspace may declare a connection
only in its own region, so an EU-pinned workspace may use only connections declared in eu-central.

Connections live in the workspace's ``model_access`` item (one item per workspace, next to the
allow-list; at most ``MAX_CONNECTIONS``), written with a version condition so concurrent edits never
overwrite each other silently. Every change is audited with the acting Admin.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any

from pynamodb.exceptions import DoesNotExist, PutError, UpdateError

from chalicelib.core import audit, clock
from chalicelib.core.audit import Actor, CallerLike
from chalicelib.core.config import settings
from chalicelib.core.http import outbound
from chalicelib.core.http.errors import ApiError, conflict, not_found, validation_error
from chalicelib.core.http.validation import F, validate
from chalicelib.core.regions import OPEN_REGIONS, RESIDENCIES
from chalicelib.core.store import scope_versions
from chalicelib.core.tenancy import RequestScope
from chalicelib.llm import secrets
from chalicelib.llm.models import ModelAccessAttrs, model_access
from chalicelib.llm.prompt import Prompt
from chalicelib.llm.providers import bedrock, openai_http
from chalicelib.llm.registry import CROSS_REGION_PREFIXES, ConfigError, Endpoint, ModelSpec, Registry, limits, registry

MAX_CONNECTIONS = 20
MAX_MODELS = 50
TEST_TIMEOUT_S = 10.0
NAME_PATTERN = r"^[a-z][a-z0-9-]{1,31}$"
KINDS = ("openai", "bedrock")
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+\-]{0,199}$")
# a Bedrock foundation-model id of the region (``provider.model-name-v1:0``): no ARN (of another region,
# account, provisioned or imported model, or application inference profile) and no inference profile
_BEDROCK_MODEL = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}\.[A-Za-z0-9][A-Za-z0-9._-]{0,150}(:[A-Za-z0-9._-]{1,32}){0,2}$")
MODEL_FIELDS = {
    "id": F(str, required=True, min_len=1, max_len=200),
    "name": F(str, max_len=100),
    "context_tokens": F(int, minimum=256, maximum=2_000_000),
    "streaming": F(bool),
    "tool_use": F(bool),
    "timeout_seconds": F((int, float), minimum=1, maximum=900),
    "max_answer_tokens": F(int, minimum=1, maximum=32768),
}
FIELDS = {
    "name": F(str, required=True, pattern=NAME_PATTERN),
    "kind": F(str, required=True, enum=KINDS),
    "region": F(str, required=True, min_len=2, max_len=32),
    "base_url": F(str, min_len=8, max_len=2048),
    "api_key": F(str, min_len=1, max_len=4096),
    "models": F(list, max_len=MAX_MODELS),
}
PATCH_FIELDS = {"name": F(str, pattern=NAME_PATTERN), "base_url": F(str, min_len=8, max_len=2048), "api_key": F(str, nullable=True, min_len=1, max_len=4096),
                "models": F(list, min_len=1, max_len=MAX_MODELS)}


def _context(workspace_id: str, name: str) -> str:
    """The KMS encryption context's provider value of a connection's key."""
    return f"{workspace_id}/{name}"


# --- storage ---------------------------------------------------------------------------------------------

def _item(region: str, workspace_id: str) -> ModelAccessAttrs | None:
    try:
        return model_access(region).get(workspace_id, consistent_read=True)
    except DoesNotExist:
        return None


def stored(item: ModelAccessAttrs | None) -> list[dict[str, Any]]:
    data = json.loads(item.connections or "[]") if item is not None else []
    return data if isinstance(data, list) else []


def _save(scope: RequestScope, item: ModelAccessAttrs | None, conns: list[dict[str, Any]]) -> None:
    """Write the list under a version condition (a concurrent change answers 409, nothing lost)."""
    principal = scope.principal
    cls = model_access(scope.home)
    raw = json.dumps(conns, sort_keys=True, separators=(",", ":"))
    try:
        if item is None:
            cls(principal.workspace_id, allow="{}", connections=raw, version=1, updated_at=clock.iso(),
                updated_by=principal.user_id).save(condition=cls.workspace_id.does_not_exist())
        else:
            version = int(item.version or 0)
            cond = cls.version.does_not_exist() if not item.version else cls.version == version
            item.update(actions=[cls.connections.set(raw), cls.version.set(version + 1),
                                 cls.updated_at.set(clock.iso()), cls.updated_by.set(principal.user_id)],
                        condition=cond)
    except (PutError, UpdateError):
        raise conflict("concurrent_change", "The model settings changed meanwhile; read them and try again.") \
            from None
    scope_versions.bump(principal.workspace_id, scope_versions.MODELS)  # every container reads them again


# --- validation ------------------------------------------------------------------------------------------

def _region(scope: RequestScope, value: str) -> str:
    """The AWS region of a declared connection: the workspace's own region, or a 422 that says why."""
    home = scope.home
    declared = RESIDENCIES[value].region if value in RESIDENCIES else value
    if declared not in OPEN_REGIONS:
        raise validation_error([{"field": "region", "message": "must be one of "
                                 + ", ".join(sorted(set(OPEN_REGIONS) | {k for k, r in RESIDENCIES.items()
                                                                         if r.region}))}])
    if declared != home:
        eu = home == RESIDENCIES["eu-central"].region
        raise ApiError(422, "connection_region_not_allowed",
                       ("This workspace is pinned to the EU: it may use only model connections declared in "
                        "eu-central." if eu else
                        f"This workspace's data stays in {home}: declare the connection in {home}."),
                       errors=[{"field": "region", "message": f"must be {home}, this workspace's region"}])
    return declared


def _models(raw: Any, kind: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise validation_error([{"field": "models", "message": "must be a list of models"}])
    out: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    for i, m in enumerate(raw):
        m = {"id": m} if isinstance(m, str) else m
        try:
            checked = validate(m, MODEL_FIELDS)
        except ApiError as err:
            errors += [{"field": f"models[{i}].{e['field']}", "message": e["message"]} for e in err.errors or []]
            continue
        if not _MODEL_ID.match(checked["id"]):
            errors.append({"field": f"models[{i}].id", "message": "is not a model id"})
        elif kind == "bedrock" and checked["id"].startswith(CROSS_REGION_PREFIXES):
            errors.append({"field": f"models[{i}].id", "message": "is a cross-region inference profile; "
                                                                   "use a single-region model id"})
        elif kind == "bedrock" and not _BEDROCK_MODEL.match(checked["id"]):
            errors.append({"field": f"models[{i}].id", "message": "must be a Bedrock foundation-model id of this "
                                                                   "region (provider.model-v1:0), not an ARN"})
        elif any(o["id"] == checked["id"] for o in out):
            errors.append({"field": f"models[{i}].id", "message": "is listed twice"})
        else:
            out.append(checked)
    if errors:
        raise validation_error(errors)
    return out


def _base_url(value: str) -> str:
    """The endpoint's base URL (a trailing ``/v1`` is dropped: the provider adds the paths), refused with
    a 422 when its host resolves to an address a tenant may not reach (checked again on every use)."""
    try:
        split, host, port = outbound.split_url(value)
    except outbound.Refused:
        raise validation_error([{"field": "base_url", "message": "must be an absolute http(s) URL"}]) from None
    if split.username or split.password or split.query or split.fragment:
        raise validation_error([{"field": "base_url", "message": "must carry no credentials, query or fragment; "
                                                                "put the key in api_key"}])
    try:
        outbound.resolve(host, port, openai_http.policy(Endpoint(value, None, tenant="new")))
    except outbound.Refused as err:
        hint = (f" It is on this machine or a private network; {openai_http.LOCAL_HINT}. Other private addresses "
                "only when the deployment declares them (OUTBOUND_ALLOW)." if err.kind == "private" else
                " Instance-metadata and link-local addresses are always refused." if err.kind == "forbidden" else "")
        raise ApiError(422, "endpoint_refused", f"The endpoint may not be reached from the platform: {err}.{hint}",
                       errors=[{"field": "base_url", "message": str(err)}]) from None
    return value.rstrip("/").removesuffix("/v1").rstrip("/")


def public(conn: dict[str, Any]) -> dict[str, Any]:
    """A connection as answers show it: no key, only whether one is kept."""
    out = {k: v for k, v in conn.items() if k != "api_key_ciphertext"}
    out["has_key"] = bool(conn.get("api_key_ciphertext"))
    out["model_ids"] = [f"{conn['name']}/{m['id']}" for m in conn["models"]]
    return out


def _audit(scope: RequestScope, action: str, conn: dict[str, Any], caller: CallerLike | None,
           extra: dict[str, Any] | None = None) -> None:
    details = {"name": conn["name"], "kind": conn["kind"], "region": conn["region"],
               "base_url": conn.get("base_url"), "models": [m["id"] for m in conn["models"]],
               "has_key": bool(conn.get("api_key_ciphertext")), **(extra or {})}
    principal = scope.principal
    audit.append(scope.home, principal.workspace_id, action,
                 actor=Actor("user", principal.user_id, principal.email),
                 target={"type": "model_connection", "id": conn["name"]}, details=details, caller=caller)


# --- the registry a workspace sees ------------------------------------------------------------------------

def spec_of(workspace_id: str, conn: dict[str, Any], model: dict[str, Any]) -> ModelSpec:
    region = conn["region"]
    endpoints = {region: Endpoint("", None, tenant=workspace_id)}  # Bedrock: the platform's role, no URL
    if conn["kind"] == "openai":
        endpoints = {region: Endpoint(conn["base_url"], conn.get("api_key_ciphertext"), tenant=workspace_id,
                                      key_context=_context(workspace_id, conn["name"]))}
    return ModelSpec(
        id=f"{conn['name']}/{model['id']}", provider=conn["name"], provider_kind=conn["kind"], model=model["id"],
        name=model.get("name") or model["id"], kind="generative",
        context_tokens=int(model.get("context_tokens", 8192)), streaming=bool(model.get("streaming", True)),
        tool_use=bool(model.get("tool_use", False)), embeddings=False, regions=(region,), endpoints=endpoints,
        connection=conn["name"], **limits(model, f"connection {conn['name']}"))


def workspace_registry(workspace_id: str, item: ModelAccessAttrs | None) -> Registry:
    """The deployment's registry plus the workspace's connections (deployment models keep their ids)."""
    reg = registry()
    extra: list[ModelSpec] = []
    taken = {m.id for m in reg.models}
    for conn in stored(item):
        for model in conn.get("models", []):
            try:
                spec = spec_of(workspace_id, conn, model)
            except (ConfigError, KeyError, TypeError):
                continue
            if spec.id not in taken:
                extra.append(spec)
    if not extra:
        return reg
    return Registry(reg.models + tuple(extra), reg.preference, reg.embedding_model,
                    tuple(m.id for m in extra))


def check_call(spec: ModelSpec, region: str, home: str) -> None:
    """Before each call of a connection's model: the connection, as stored now, declares exactly this model,
    in ``region``, which is its workspace's region ``home`` (a Bedrock model runs at the platform's cost:
    only what the workspace's Admin declared, only there). A ``ProviderError`` (``model_not_declared``)
    otherwise. Deployment models (no connection) pass."""
    if spec.connection is None:
        return
    ep = spec.endpoints.get(region)
    workspace_id = ep.tenant if ep is not None else None
    conn = next((c for c in stored(_item(home, workspace_id)) if c.get("name") == spec.connection), None) \
        if workspace_id else None
    declared = (conn is not None and conn.get("kind") == spec.provider_kind and conn.get("region") == region
                and region == home
                and any(m.get("id") == spec.model for m in conn.get("models", []))
                and (spec.provider_kind != "bedrock" or bool(_BEDROCK_MODEL.match(spec.model))))
    if not declared:
        raise openai_http.ProviderError(f"{spec.id} is not a model its connection declares in {region}",
                                        "model_not_declared")


# --- service ----------------------------------------------------------------------------------------------

def list_connections(scope: RequestScope) -> dict[str, Any]:
    return {"items": [public(c) for c in stored(_item(scope.home, scope.workspace_id))],
            "region": scope.home, "local_endpoints": settings().local_endpoints}


def _find(conns: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = next((c for c in conns if c["name"] == name), None)
    if found is None:
        raise not_found("model connection")
    return found


def _check_free_name(conns: list[dict[str, Any]], name: str) -> None:
    """409 when ``name`` is a provider of the deployment or another connection of the workspace."""
    if name in {m.provider for m in registry().models} | {"builtin", "auto"}:
        raise conflict("connection_exists", f"'{name}' is a provider of this deployment; choose another name.")
    if any(c["name"] == name for c in conns):
        raise conflict("connection_exists", f"A model connection named '{name}' exists; edit it or pick another name.")


def get_connection(scope: RequestScope, name: str) -> dict[str, Any]:
    return public(_find(stored(_item(scope.home, scope.workspace_id)), name))


def create(scope: RequestScope, body: Any, caller: CallerLike | None = None) -> dict[str, Any]:
    """Declare a connection (its models listed from the endpoint when the body names none)."""
    principal = scope.principal
    data = validate(body, FIELDS)
    name, kind = data["name"], data["kind"]
    region = _region(scope, data["region"])
    _check_free_name([], name)
    conn: dict[str, Any] = {"name": name, "kind": kind, "region": region, "created_at": clock.iso(),
                            "created_by": principal.user_id}
    if kind == "openai":
        if "base_url" not in data:
            raise validation_error([{"field": "base_url", "message": "is required for an OpenAI-compatible endpoint"}])
        conn["base_url"] = _base_url(data["base_url"])
    elif "base_url" in data or "api_key" in data:
        raise validation_error([{"field": "base_url" if "base_url" in data else "api_key",
                                 "message": "a Bedrock connection uses the platform's AWS role in the region; "
                                            "it takes no URL or key"}])
    key = data.get("api_key")
    if "models" in data and data["models"]:
        conn["models"] = _models(data["models"], kind)
    elif kind == "openai":
        ids = _list_remote(name, conn, key)
        if not ids:
            raise ApiError(422, "no_models", f"{name} lists no models; name them in 'models'.")
        conn["models"] = [{"id": i} for i in ids[:MAX_MODELS]]
    else:
        raise validation_error([{"field": "models", "message": "name at least one Bedrock model id"}])
    item = _item(scope.home, principal.workspace_id)
    conns = stored(item)
    _check_free_name(conns, name)
    if len(conns) >= MAX_CONNECTIONS:
        raise ApiError(422, "too_many_connections", f"A workspace may have at most {MAX_CONNECTIONS} connections.")
    if key:
        conn["api_key_ciphertext"] = secrets.encrypt(region, _context(principal.workspace_id, name), key)
    _save(scope, item, conns + [conn])
    _audit(scope, "models.connection_created", conn, caller)
    return public(conn)


def update(scope: RequestScope, name: str, body: Any, caller: CallerLike | None = None) -> dict[str, Any]:
    """Change the name, the URL, the key (``null`` removes it; write-only) or the models of a connection,
    with the checks of ``create``. A new name re-encrypts the kept key under the new name's context."""
    principal = scope.principal
    data = validate(body, PATCH_FIELDS)
    item = _item(scope.home, principal.workspace_id)
    conns = stored(item)
    conn = dict(_find(conns, name))
    changed = sorted(data)
    new_name = data.get("name", name)
    if new_name != name:
        _check_free_name(conns, new_name)
        if conn.get("api_key_ciphertext") and "api_key" not in data:
            clear = secrets.decrypt(conn["region"], _context(principal.workspace_id, name), conn["api_key_ciphertext"])
            conn["api_key_ciphertext"] = secrets.encrypt(conn["region"], _context(principal.workspace_id, new_name),
                                                         clear)
        conn["name"] = new_name
    if "base_url" in data:
        if conn["kind"] != "openai":
            raise validation_error([{"field": "base_url", "message": "a Bedrock connection takes no URL"}])
        conn["base_url"] = _base_url(data["base_url"])
    if "models" in data:
        conn["models"] = _models(data["models"], conn["kind"])
    if "api_key" in data:
        if conn["kind"] != "openai":
            raise validation_error([{"field": "api_key", "message": "a Bedrock connection takes no key"}])
        if data["api_key"] is None:
            conn.pop("api_key_ciphertext", None)
        else:
            conn["api_key_ciphertext"] = secrets.encrypt(conn["region"], _context(principal.workspace_id, new_name),
                                                         data["api_key"])
    conn["updated_at"], conn["updated_by"] = clock.iso(), principal.user_id
    _save(scope, item, [conn if c["name"] == name else c for c in conns])
    _audit(scope, "models.connection_updated", conn, caller,
           {"changed": changed, **({"renamed_from": name} if new_name != name else {})})
    return public(conn)


def delete(scope: RequestScope, name: str, caller: CallerLike | None = None) -> None:
    principal = scope.principal
    item = _item(scope.home, principal.workspace_id)
    conns = stored(item)
    conn = _find(conns, name)
    _save(scope, item, [c for c in conns if c["name"] != name])
    _audit(scope, "models.connection_deleted", conn, caller)


# --- test connection --------------------------------------------------------------------------------------

def _list_remote(name: str, conn: dict[str, Any], key: str | None) -> list[str]:
    ep = Endpoint(conn["base_url"], None, tenant="new")
    try:
        return openai_http.list_models(name, ep, key, TEST_TIMEOUT_S)
    except openai_http.ProviderError as err:
        raise ApiError(422, "connection_failed", f"Could not list the models of {name}: {err}",
                       extra={"failure": err.code}) from None


def _check(ok: bool, step: str, message: str, code: str | None = None) -> dict[str, Any]:
    return {"step": step, "ok": ok, "message": message, **({"code": code} if code else {})}


def test(scope: RequestScope, name: str, caller: CallerLike | None = None) -> dict[str, Any]:
    """Reach the endpoint as a chat would and say exactly what failed: ``{"ok", "checks": [...]}``."""
    principal = scope.principal
    conn = _find(stored(_item(scope.home, principal.workspace_id)), name)
    checks: list[dict[str, Any]] = []
    listed: list[str] | None = None
    started = time.perf_counter()
    specs = [spec_of(principal.workspace_id, conn, m) for m in conn["models"]]
    try:
        if conn["kind"] == "openai":
            ep = specs[0].endpoints[conn["region"]]
            key = openai_http.key_of(specs[0], conn["region"], ep)
            listed = openai_http.list_models(name, ep, key, TEST_TIMEOUT_S)
            checks.append(_check(True, "list_models", f"the endpoint lists {len(listed)} model(s)"))
            missing = [m["id"] for m in conn["models"] if m["id"] not in listed]
            if missing:
                checks.append(_check(False, "models", f"the endpoint does not serve {', '.join(missing[:5])}",
                                     "model_missing"))
        probe = next((s for s in specs if listed is None or s.model in listed), None)
        if probe is not None:
            check_call(probe, conn["region"], scope.home)
            tiny = Prompt([{"role": "user", "content": "Reply with OK."}], max_tokens=1)
            module = openai_http if conn["kind"] == "openai" else bedrock
            module.complete(probe, conn["region"], tiny)
            checks.append(_check(True, "chat", f"{probe.id} answered a chat completion"))
    except openai_http.ProviderError as err:
        step = "list_models" if conn["kind"] == "openai" and listed is None else "chat"
        checks.append(_check(False, step, str(err), err.code))
    ok = all(c["ok"] for c in checks) and bool(checks)
    result = {"name": name, "ok": ok, "checks": checks, "listed_models": listed,
              "duration_ms": round((time.perf_counter() - started) * 1000, 1)}
    _audit(scope, "models.connection_tested", conn, caller,
           {"ok": ok, "failure": next((c.get("code") for c in checks if not c["ok"]), None)})
    return result

