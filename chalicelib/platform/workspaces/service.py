"""Workspace creation: the global directory entry, a unique slug, and the creator as Admin in-region.

Slug rule: the name folded to ASCII, lower-cased, every run of other characters turned into one ``-``,
trimmed to 40 characters (``workspace`` if nothing is left); when taken, ``-2``, ``-3``, ... is added.
A slug is claimed by an item ``slug#<slug>`` in the same transaction as the workspace, so two
workspaces can never share one.
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.core import audit, clock
from chalicelib.core.authz import Role, mfa_used
from chalicelib.core.config import settings
from chalicelib.core.durations import duration_check
from chalicelib.core.http import paging, rate_limits
from chalicelib.core.http.errors import ApiError, validation_error
from chalicelib.core.http.validation import F, validate
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import DR_REGIONS, endpoints, region_for
from chalicelib.core.store import idempotency, scope_versions
from chalicelib.core.store.tables import BaseModel, global_connection, global_model
from chalicelib.core.store.transact import Refused, Tx
from chalicelib.core.tenancy import (
    WorkspaceAttrs,
    forget_scopes,
    membership_changed,
    memberships,
    workspaces,
    workspaces_of,
)
from chalicelib.core.workspace_settings import (
    ANSWER_LINK_HOSTS,
    ANSWER_MODE,
    ANSWER_MODES,
    PLAIN_SETTINGS,
    RATE_LIMITS,
    settings_of,
)
from chalicelib.identity.oauth.grants.token_exchange import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE
from chalicelib.platform.models import DomainJoinIndexAttrs, domain_index
from chalicelib.platform.workspaces import disaster_recovery, link_hosts

log = get_logger("platform.workspaces")

SLUG_MAX = 40
MAX_SLUG_ATTEMPTS = 50


class SlugClaimAttrs(BaseModel):
    TABLE = "workspaces"
    id = UnicodeAttribute(hash_key=True)  # slug#<slug>
    workspace_id = UnicodeAttribute()


def slugify(name: str) -> str:
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")[:SLUG_MAX].strip("-")
    return slug or "workspace"


def default_replication(residency: str) -> str:
    """EU-pinned workspaces default to ``none``; us-east defaults to ``in-region-multi-az``."""
    return "none" if residency == "eu-central" else "in-region-multi-az"


def create_workspace(*, owner_id: str, owner_email: str, name: str, residency: str, enforce_mfa: bool,
                     caller: Any = None, joined_via: str = "created") -> WorkspaceAttrs:
    """Create the workspace in its region with its creator as Admin; audited in that region.

    The directory entry and slug claim (global store) commit with the membership and the audit event in
    one transaction when the workspace's region is the global region; elsewhere the directory entry is
    written first (a transaction cannot span regions), then the membership with its event."""
    region = region_for(residency)
    together = region == settings().global_region
    base = slugify(name)
    ws_id = new_id("ws")
    now = clock.iso()
    owner = memberships(region)(ws_id, owner_id, role=Role.ADMIN.value, email=owner_email, joined_at=now,
                                joined_via=joined_via, role_since=now)
    for attempt in range(1, MAX_SLUG_ATTEMPTS + 1):
        suffix = "" if attempt == 1 else f"-{attempt}"
        slug = base[: SLUG_MAX - len(suffix)].rstrip("-") + suffix
        ws = workspaces()(ws_id, name=name, slug=slug, residency=residency, region=region,
                          enforce_mfa=enforce_mfa, replication=default_replication(residency),
                          created_at=now, created_by=owner_id, member_count=1)
        claim = global_model(SlugClaimAttrs)(f"slug#{slug}", workspace_id=ws_id)

        def directory(tx: Any, claim: Any = claim, ws: WorkspaceAttrs = ws) -> None:
            tx.save(claim, condition=SlugClaimAttrs.id.does_not_exist(), **({"tag": "slug"} if together else {}))
            tx.save(ws, condition=WorkspaceAttrs.id.does_not_exist())

        def effects(tx: Tx, directory: Any = directory) -> None:  # the membership commits with the audit event
            if together:
                directory(tx)
            tx.save(owner)
            idempotency.complete_in(tx, {"type": "workspace", "id": ws_id})

        if not together:
            try:
                with TransactWrite(connection=global_connection()) as gtx:
                    directory(gtx)
            except TransactWriteError:
                continue
        try:
            audit.append(region, ws_id, "workspace.created",
                         actor=audit.Actor("user", owner_id, owner_email),
                         target={"type": "workspace", "id": ws_id},
                         details={"name": name, "slug": ws.slug, "residency": residency, "enforce_mfa": enforce_mfa},
                         caller=caller, effects=effects)
        except Refused as refused:
            if together and "slug" in refused.tags:
                continue
            raise
        membership_changed(owner_id)
        return ws
    raise RuntimeError("could not find a free slug")


# --- reading, listing, changing ------------------------------------------------------------------

REPLICATION_VALUES = ("none", "in-region-multi-az", "cross-region-dr")
# cross-region-dr copies to a named secondary region (docs/decisions.md, Platform API): the declared
# default of the residency (core/regions.DR_REGIONS; chalicelib/residency/replication.py makes the copy)
SECONDARY_REGION = {residency: regions[0] for residency, regions in DR_REGIONS.items()}
NAME_MAX = 100


def public_settings(ws: WorkspaceAttrs) -> dict[str, Any]:
    s = settings_of(ws)
    dj = s.get("domain_join") or {}
    plan = rate_limits.plan_quotas(ws.billing_plan)
    chosen = s.get(RATE_LIMITS) or {}
    return {"domain_join": {"enabled": bool(dj.get("enabled")), "domain": dj.get("domain")},
            **{key: s.get(key) for key in PLAIN_SETTINGS},
            ANSWER_MODE: s.get(ANSWER_MODE) or ANSWER_MODES[0],
            ANSWER_LINK_HOSTS: list(s.get(ANSWER_LINK_HOSTS) or []),
            RATE_LIMITS: {name: chosen.get(name) or getattr(plan, name) for name in rate_limits.SETTING_FIELDS}}


def to_public(ws: WorkspaceAttrs) -> dict[str, Any]:
    """The workspace object every route returns."""
    return {
        "id": ws.id,
        "name": ws.name,
        "slug": ws.slug,
        "residency": ws.residency,
        "region": ws.region,
        "replication": ws.replication,
        **disaster_recovery.status(ws),  # replication_secondary_region, last_replicated_at, replication_lag_seconds
        "enforce_mfa": bool(ws.enforce_mfa),
        "created_at": ws.created_at,
        "created_by": ws.created_by,
        "member_count": int(ws.member_count or 0),
        "settings": public_settings(ws),
        **served_at(ws.region),
    }


def served_at(region: str) -> dict[str, str]:
    """Where a workspace's requests go: its region's platform API and gateway (docs/residency.md)."""
    where = endpoints(region)
    return {"api_base_url": where["api_base_url"], "gateway_url": where["gateway_url"]}


def token_exchange_hint(workspace_id: str) -> dict[str, str]:
    """How to obtain a token for a workspace the caller belongs to (RFC 8693 at the identity service)."""

    return {"token_endpoint": settings().auth_url + "/oauth2/token", "grant_type": TOKEN_EXCHANGE,
            "subject_token_type": ACCESS_TOKEN_TYPE, "workspace_id": workspace_id}


def adjust_member_count(workspace_id: str, delta: int) -> None:
    """Keep the directory's usage counter roughly right (it is not in the membership transaction:
    memberships live in the workspace's region, the directory in the global one)."""
    try:
        workspaces()(workspace_id).update(actions=[WorkspaceAttrs.member_count.add(delta)],
                                          condition=WorkspaceAttrs.id.exists())
    except Exception:  # a counter must never fail the membership change it follows
        log.warning("member_count not adjusted", extra={"workspace_id": workspace_id})


def list_for_user(user_id: str, limit: int, after: str | None) -> dict[str, Any]:
    """The caller's workspaces (every region), ordered by id, cursor-paged."""
    entries = [m for m in workspaces_of(user_id) if after is None or m["workspace_id"] > after]
    chosen = entries[: limit + 1]
    by_id = {w.id: w for w in workspaces().batch_get([m["workspace_id"] for m in chosen])} if chosen else {}
    items = [{**to_public(by_id[m["workspace_id"]]), "role": m["role"]} for m in chosen if m["workspace_id"] in by_id]
    out = paging.page(items, limit, "workspaces", lambda w: w["id"])
    return {"workspaces": out.pop("_items"), **out}


def _check_name(value: Any) -> str | None:
    if not value.strip():
        return "must not be blank"
    if any(unicodedata.category(c) == "Cc" for c in value):
        return "must not contain control characters"
    return None


CREATE_FIELDS = {
    "name": F(str, required=True, min_len=1, max_len=NAME_MAX, check=_check_name),
    "residency": F(str, required=True, max_len=32),
    "enforce_mfa": F(bool),
}


def validate_create(body: Any) -> dict[str, Any]:
    body = validate(body, CREATE_FIELDS)
    region_for(body["residency"])  # 400 unknown, 422 planned (br-south) with the alternatives
    return body


PATCH_FIELDS = {
    "name": F(str, min_len=1, max_len=NAME_MAX, check=_check_name),
    "enforce_mfa": F(bool),
    "domain_join": F(dict),
    "chat_auto_expiry": F(str, nullable=True, max_len=32,
                          check=duration_check(3600, 3650 * 86400, "PT1H and P3650D")),
    "agent_run_auto_expiry": F(str, nullable=True, max_len=32,
                               check=duration_check(3600, 3650 * 86400, "PT1H and P3650D")),
    "answer_link_hosts": F(list, nullable=True, max_len=link_hosts.MAX_HOSTS, check=link_hosts.check),
    "grounding_check_model": F(str, nullable=True, min_len=1, max_len=200),
    "trace_content": F(bool, nullable=True),
    ANSWER_MODE: F(str, nullable=True, enum=ANSWER_MODES),
    "replication": F(str, enum=REPLICATION_VALUES),
    "acknowledge_data_leaves_region": F(bool),
    "replication_secondary_region": F(str, max_len=32),
    RATE_LIMITS: F(dict, nullable=True),
}
# requests per minute; the ceiling is the plan's (core/http/rate_limits.PLANS), checked when applied
RATE_LIMIT_FIELDS = {name: F(int, minimum=1, maximum=1_000_000) for name in rate_limits.SETTING_FIELDS}
DOMAIN_JOIN_FIELDS = {"enabled": F(bool, required=True), "domain": F(str, min_len=3, max_len=253)}
# public mail providers: a workspace cannot claim everyone who has an address there
PUBLIC_MAIL_DOMAINS = frozenset({"gmail.com", "googlemail.com", "outlook.com", "hotmail.com", "live.com",
                                 "yahoo.com", "icloud.com", "me.com", "aol.com", "proton.me", "protonmail.com",
                                 "gmx.de", "gmx.net", "web.de", "mail.com", "yandex.ru", "qq.com"})


def residency_immutable() -> ApiError:
    return ApiError(409, "residency_immutable",
                    "Residency is chosen once, when the workspace is created, and cannot be changed in place. "
                    "Moving a workspace to another region is a supervised migration run by support: it needs a "
                    "maintenance window, re-indexing of embeddings and re-issued API keys. Contact support to "
                    "plan one.")


def validate_patch(body: Any) -> dict[str, Any]:
    if isinstance(body, dict) and "residency" in body:
        raise residency_immutable()
    body = validate(body, PATCH_FIELDS)
    if not body:
        raise validation_error([{"field": "body", "message": "must change at least one field"}])
    if "domain_join" in body:
        try:
            validate(body["domain_join"], DOMAIN_JOIN_FIELDS)
        except ApiError as err:
            raise validation_error([{"field": f"domain_join.{e['field']}", "message": e["message"]}
                                    for e in (err.errors or [{"field": "", "message": err.detail}])]) from None
    if body.get(RATE_LIMITS) is not None:
        try:
            validate(body[RATE_LIMITS], RATE_LIMIT_FIELDS)
        except ApiError as err:
            raise validation_error([{"field": f"{RATE_LIMITS}.{e['field']}", "message": e["message"]}
                                    for e in (err.errors or [{"field": "", "message": err.detail}])]) from None
    if "acknowledge_data_leaves_region" in body and body.get("replication") != "cross-region-dr":
        raise validation_error([{"field": "acknowledge_data_leaves_region",
                                 "message": "is only accepted with replication cross-region-dr"}])
    if "replication_secondary_region" in body and body.get("replication") != "cross-region-dr":
        raise validation_error([{"field": "replication_secondary_region",
                                 "message": "is only accepted with replication cross-region-dr"}])
    return body


@dataclass
class _Patch:
    """What a PATCH changes: the directory-entry update actions, the audited changes, the settings JSON,
    the domain-join index entries to add and remove, and the replication change (audited on its own)."""
    settings: dict[str, Any]
    actions: list[Any] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)
    index_add: str | None = None
    index_remove: str | None = None
    replication: dict[str, Any] | None = None
    dr_secondary: str | None = None  # set when cross-region-dr is turned on


def update_workspace(ws_id: str, body: dict[str, Any], *, actor: audit.Actor, amr: tuple[str, ...],
                     verified_email_domain: str | None, caller: Any = None) -> WorkspaceAttrs:
    """Apply a validated PATCH; audited (``workspace.updated``, ``workspace.replication_changed``)."""
    ws = workspaces().get(ws_id, consistent_read=True)
    old_settings_raw = ws.settings
    patch = _Patch(settings=settings_of(ws))
    _rename(ws, body, patch)
    _set_enforce_mfa(ws, body, amr, patch)
    if "domain_join" in body:
        _set_domain_join(body["domain_join"], verified_email_domain, patch)
    _set_auto_expiry(body, patch)
    _set_rate_limits(ws, body, patch)
    _set_link_hosts(body, patch)
    _set_replication(ws, body, actor, patch)
    if {"domain_join", RATE_LIMITS, ANSWER_LINK_HOSTS, *PLAIN_SETTINGS} & set(patch.changes):
        patch.actions.append(WorkspaceAttrs.settings.set(json.dumps(patch.settings, sort_keys=True)))
    if not patch.actions:
        return ws
    if patch.dr_secondary:  # before the directory changes: a refusal (409) leaves everything as it was
        disaster_recovery.enable(ws.region, ws.id, patch.dr_secondary)
    try:
        _write_update(ws, patch.actions, old_settings_raw, patch.index_add, patch.index_remove)
    except TransactWriteError:
        raise ApiError(409, "concurrent_update", "The workspace was changed by another request at the same "
                                                 "time; read it again and retry.") from None
    _audit_patch(ws, patch, actor, caller)
    return workspaces().get(ws.id, consistent_read=True)


def _rename(ws: WorkspaceAttrs, body: dict[str, Any], patch: _Patch) -> None:
    if "name" in body and body["name"].strip() != ws.name:
        name = body["name"].strip()
        patch.actions.append(WorkspaceAttrs.name.set(name))
        patch.changes["name"] = {"from": ws.name, "to": name}


def _set_enforce_mfa(ws: WorkspaceAttrs, body: dict[str, Any], amr: tuple[str, ...], patch: _Patch) -> None:
    """Turning enforcement on needs a sign-in with a second factor, so the Admin keeps access."""
    if "enforce_mfa" not in body or body["enforce_mfa"] == bool(ws.enforce_mfa):
        return
    if body["enforce_mfa"] and not mfa_used(amr):
        raise ApiError(403, "mfa_required", "Sign in with a second factor before enforcing MFA for the "
                                            "workspace, so that you keep access to it.")
    patch.actions.append(WorkspaceAttrs.enforce_mfa.set(body["enforce_mfa"]))
    patch.changes["enforce_mfa"] = {"from": bool(ws.enforce_mfa), "to": body["enforce_mfa"]}


def _joinable_domain(wanted: dict[str, Any], verified_email_domain: str | None) -> str | None:
    """The domain to open the workspace to: the acting Admin's own verified, non-public e-mail domain."""
    if not wanted["enabled"]:
        return None
    domain = (wanted.get("domain") or verified_email_domain or "").lower()
    if not verified_email_domain:
        raise ApiError(422, "email_not_verified", "Domain-join needs your own verified e-mail address "
                                                  "in the domain; verify your e-mail first.")
    if domain != verified_email_domain:
        raise ApiError(422, "domain_not_yours", f"Domain-join can only be enabled for the domain of your "
                                                f"own verified e-mail address ({verified_email_domain}).",
                       errors=[{"field": "domain_join.domain", "message": f"must be {verified_email_domain}"}])
    if domain in PUBLIC_MAIL_DOMAINS:
        raise ApiError(422, "public_mail_domain", f"'{domain}' is a public mail provider; domain-join "
                                                  "needs your organisation's own domain.")
    return domain


def _set_domain_join(wanted: dict[str, Any], verified_email_domain: str | None, patch: _Patch) -> None:
    """The new domain-join setting, and which domain index entries move with it."""
    old = patch.settings.get("domain_join") or {}
    domain = _joinable_domain(wanted, verified_email_domain)
    before = {"enabled": bool(old.get("enabled")), "domain": old.get("domain")}
    new = {"enabled": bool(wanted["enabled"]), "domain": domain}
    if new == before:
        return
    index_remove = old["domain"] if old.get("enabled") and old.get("domain") else None
    index_add = domain if new["enabled"] else None
    if index_add != index_remove:
        patch.index_add, patch.index_remove = index_add, index_remove
    patch.settings["domain_join"] = new
    patch.changes["domain_join"] = {"from": before, "to": new}


def _set_auto_expiry(body: dict[str, Any], patch: _Patch) -> None:
    """Chat and agent-run auto-expiry (ISO 8601 durations, or null for "until deleted"), and the model that
    checks answers' grounding (a model id, "off", or null for the answering model)."""
    for key in PLAIN_SETTINGS:
        if key in body and body[key] != patch.settings.get(key):
            patch.changes[key] = {"from": patch.settings.get(key), "to": body[key]}
            patch.settings[key] = body[key]


def _set_rate_limits(ws: WorkspaceAttrs, body: dict[str, Any], patch: _Patch) -> None:
    """Request quotas per minute (null: the plan's); never above what the workspace's plan allows."""
    if RATE_LIMITS not in body:
        return
    wanted = body[RATE_LIMITS]
    plan = rate_limits.plan_quotas(ws.billing_plan)
    over = [{"field": f"{RATE_LIMITS}.{name}", "message": f"must be at most {getattr(plan, name)} on the "
                                                           f"{ws.billing_plan or 'free'} plan"}
            for name, value in (wanted or {}).items() if value > getattr(plan, name)]
    if over:
        raise ApiError(422, "above_plan", "A rate limit may be lowered, not raised past the plan's.", errors=over)
    if wanted != patch.settings.get(RATE_LIMITS):
        patch.changes[RATE_LIMITS] = {"from": patch.settings.get(RATE_LIMITS), "to": wanted}
        if wanted is None:
            patch.settings.pop(RATE_LIMITS, None)
        else:
            patch.settings[RATE_LIMITS] = wanted


def _set_link_hosts(body: dict[str, Any], patch: _Patch) -> None:
    """The hosts answers may link to (lower-cased, each once; null or [] for none)."""
    if ANSWER_LINK_HOSTS not in body:
        return
    new = link_hosts.normalise(body[ANSWER_LINK_HOSTS] or [])
    old = list(patch.settings.get(ANSWER_LINK_HOSTS) or [])
    if new != old:
        patch.changes[ANSWER_LINK_HOSTS] = {"from": old, "to": new}
        patch.settings[ANSWER_LINK_HOSTS] = new


def _set_replication(ws: WorkspaceAttrs, body: dict[str, Any], actor: audit.Actor, patch: _Patch) -> None:
    """A replication change; sending EU data out of its region needs the Admin's recorded acknowledgement."""
    if "replication" not in body or body["replication"] == ws.replication:
        return
    to = body["replication"]
    acknowledged = bool(body.get("acknowledge_data_leaves_region"))
    leaves_region = to == "cross-region-dr"
    secondary = disaster_recovery.check_secondary(ws.residency, body.get("replication_secondary_region")) \
        if leaves_region else None  # 422 for a region not declared for this residency
    if leaves_region and ws.residency == "eu-central" and not acknowledged:
        raise ApiError(422, "acknowledgement_required",
                       "This workspace is pinned to eu-central. cross-region-dr sends an encrypted copy of its "
                       f"data to {secondary}, outside eu-central-1. Send "
                       "\"acknowledge_data_leaves_region\": true to confirm; the acknowledgement is written to "
                       "the audit trail with your identity.",
                       errors=[{"field": "acknowledge_data_leaves_region", "message": "must be true"}])
    patch.actions.append(WorkspaceAttrs.replication.set(to))
    change: dict[str, Any] = {"from": ws.replication, "to": to, "secondary_region": secondary}
    patch.dr_secondary = secondary
    if leaves_region:
        change.update(data_leaves_region=True, acknowledged=acknowledged)
        if acknowledged:
            change["acknowledged_by"] = actor.as_dict()
    patch.replication = change


def _audit_patch(ws: WorkspaceAttrs, patch: _Patch, actor: audit.Actor, caller: Any) -> None:
    target = {"type": "workspace", "id": ws.id}
    if patch.changes:
        audit.append(ws.region, ws.id, "workspace.updated", actor=actor, target=target,
                     details={"changes": patch.changes}, caller=caller)
    if patch.replication:
        audit.append(ws.region, ws.id, "workspace.replication_changed", actor=actor, target=target,
                     details=patch.replication, caller=caller)


def _write_update(ws: WorkspaceAttrs, actions: list[Any], old_settings: str, index_add: str | None,
                  index_remove: str | None) -> None:
    """The directory entry and the domain-join index change together, only if nobody changed it meanwhile."""
    with TransactWrite(connection=global_connection()) as tx:
        tx.update(ws, actions=actions, condition=WorkspaceAttrs.settings == old_settings)
        if index_add:
            tx.update(domain_index()(f"domain#{index_add}"), actions=[DomainJoinIndexAttrs.workspace_ids.add({ws.id})])
        if index_remove:
            tx.update(domain_index()(f"domain#{index_remove}"),
                      actions=[DomainJoinIndexAttrs.workspace_ids.delete({ws.id})])
    forget_scopes()
    scope_versions.bump(ws.id, scope_versions.DIRECTORY)  # every container reads it again from its next request
