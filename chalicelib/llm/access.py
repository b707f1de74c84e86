"""The per-role model allow-list (Admin-set, stored in the workspace's region)."""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import audit, clock
from chalicelib.core.audit import Actor, CallerLike
from chalicelib.core.authz import ROLE_VALUES
from chalicelib.core.http.errors import validation_error
from chalicelib.core.ids import is_id
from chalicelib.core.store import scope_versions
from chalicelib.core.tenancy import RequestScope
from chalicelib.llm.connections import workspace_registry
from chalicelib.llm.models import ModelAccessAttrs, model_access

MAX_MODELS_PER_ROLE = 100


_settings: scope_versions.VersionedCache[ModelAccessAttrs | None] = scope_versions.VersionedCache(
    "llm.access.settings", scope_versions.MODELS)


def settings_item(scope: RequestScope) -> ModelAccessAttrs | None:
    """The workspace's model settings (allow-list, connections, budget; read-only): one consistent read
    when their version moved (``changed`` after every write), else the one this container holds."""
    return _settings.get(scope.workspace_id, lambda: _read(scope.home, scope.workspace_id))


def _read(region: str, workspace_id: str) -> ModelAccessAttrs | None:
    try:
        return model_access(region).get(workspace_id, consistent_read=True)
    except DoesNotExist:
        return None


def changed(workspace_id: str) -> None:
    """After any write of the model settings item: every container reads it again from its next request."""
    scope_versions.bump(workspace_id, scope_versions.MODELS)


def allow_of(item: ModelAccessAttrs | None) -> dict[str, list[str]]:
    data = json.loads(item.allow or "{}") if item is not None else {}
    return data if isinstance(data, dict) else {}


def allow_list(scope: RequestScope) -> dict[str, list[str]]:
    """``{role: [model ids]}``; a role missing from it may use every model of the region."""
    return allow_of(settings_item(scope))


def allowed_for(allow: dict[str, list[str]], roles: tuple[str, ...], model_id: str,
                groups: frozenset[str] = frozenset()) -> bool:
    """True when any of ``roles`` may use the model (a role without a list may use all), or the list of
    one of the caller's ``groups`` (key ``group:<id>``) names it: a group's list only adds models."""
    return any(r not in allow or model_id in allow[r] for r in roles) or \
        any(model_id in allow.get(f"group:{g}", ()) for g in groups)


def set_allow_list(scope: RequestScope, body: Any, caller: CallerLike | None = None) -> dict[str, Any]:
    """Replace the allow-list: ``{"roles": {"member": ["builtin/extractive"], "group:grp_...": [...]}}``
    (``null`` clears an entry); a group's entry adds models for its members."""
    if not isinstance(body, dict) or set(body) != {"roles"} or not isinstance(body["roles"], dict):
        raise validation_error([{"field": "roles", "message": "must be an object mapping roles to model id lists"}])
    principal = scope.principal
    known = {m.id for m in workspace_registry(scope.workspace_id, settings_item(scope)).models}
    allow: dict[str, list[str]] = {}
    errors = []
    for role, ids in body["roles"].items():
        if role not in ROLE_VALUES and not (isinstance(role, str) and role.startswith("group:")
                                            and is_id(role[len("group:"):], "grp")):
            errors.append({"field": f"roles.{str(role)[:32]}", "message": "is not a role or group:<group id>"})
        elif ids is None:
            continue
        elif not isinstance(ids, list) or len(ids) > MAX_MODELS_PER_ROLE or not all(isinstance(i, str) for i in ids):
            errors.append({"field": f"roles.{role}", "message": "must be a list of model ids (or null)"})
        elif unknown := [i for i in ids if i not in known]:
            errors.append({"field": f"roles.{role}", "message": f"unknown model {unknown[0][:100]}"})
        else:
            allow[role] = sorted(set(ids))
    if errors:
        raise validation_error(errors)
    region = scope.home
    cls = model_access(region)
    cls(principal.workspace_id).update(actions=[  # an update: the item's connections stay as they are
        cls.allow.set(json.dumps(allow, sort_keys=True)), cls.updated_at.set(clock.iso()),
        cls.updated_by.set(principal.user_id)])
    changed(principal.workspace_id)
    audit.append(region, principal.workspace_id, "models.allow_list_updated",
                 actor=Actor.of(principal), target={"type": "workspace",
                                                                                  "id": principal.workspace_id},
                 details={"roles": allow}, caller=caller)
    return {"roles": allow}
