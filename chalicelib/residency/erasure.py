"""Erasure of a user: in one workspace's region, in the global identity directory, and the ledgers
that make it final.

``erase_in_workspace`` removes the user's membership, chats, agent memory, the agent runs they started
(with their step and event logs), the lineage edges into their chats' answers and runs, their
``Idempotency-Key`` records, invitations addressed to them, their e-mail where it names them as an author
(``_attributions``: invitations and support grants they made, agents they last edited and other members'
runs' snapshots of them, connectors and datasets they own; the ids stay), and the personal values of
audit events (``audit_personal`` records; the events themselves stay and show a pseudonym, see
``core/audit.py``). ``erase_identity`` removes the global directory entry, its e-mail
and identity-provider claims, sessions, API token records, passkeys and security keys, TOTP and recovery
codes, lockout counters and every other sign-in state naming the user.

Each erasure writes a ledger entry holding only the user id and ``email_mac`` (HMAC of the lower-cased
address under the region's ``field-hash`` KMS key, context ``aiplat/erasure/v1/``): ``erasure_ledger``
per workspace (regional) and ``erased_users`` in the global store. ``replay`` runs the regional erasure
again for every ledger entry of a workspace and is called by every restore, so a backup can never bring
erased data back; ``replay_identities`` does the same for the global store.
"""
from __future__ import annotations

import hmac
import json
from collections.abc import Iterator
from typing import Any

from chalicelib.core import audit, aws, clock, tokens
from chalicelib.core.config import settings
from chalicelib.core.logs import get_logger
from chalicelib.core.store import idempotency
from chalicelib.core.tenancy import membership_changed, workspaces
from chalicelib.gateway.catalog import service as catalog
from chalicelib.residency.models import erased_users, erasure_ledger

log = get_logger("residency.erasure")
MAC_CONTEXT = "aiplat/erasure/v1/"
# auth_state kinds keyed by the user id ("<kind>#<user_id>") and by the address ("ecode#<address>")
_STATE_BY_USER = ("lock", "totp", "rc")
_STATE_BY_EMAIL = ("ecode",)


def email_mac(region: str, email: str) -> str:
    """A keyed MAC of an address: matches it again without storing it (the key never leaves KMS)."""
    if not email:
        return ""
    out = aws.client("kms", region).generate_mac(KeyId=aws.key_alias("field-hash"), MacAlgorithm="HMAC_SHA_256",
                                                 Message=(MAC_CONTEXT + email.strip().lower()).encode())
    return bytes(out["Mac"]).hex()


class _Matcher:
    """Is an address the erased user's? By the clear address when known, else by its MAC (cached)."""

    def __init__(self, region: str, mac: str, email: str | None) -> None:
        self.region, self.mac, self.email = region, mac, (email or "").strip().lower()
        self._seen: dict[str, bool] = {}

    def __call__(self, address: str | None) -> bool:
        address = (address or "").strip().lower()
        if not address or not self.mac:
            return False
        if self.email:
            return address == self.email
        if address not in self._seen:
            self._seen[address] = hmac.compare_digest(email_mac(self.region, address), self.mac)
        return self._seen[address]


def _ddb(region: str) -> Any:
    return aws.client("dynamodb", region)


def _query(region: str, table: str, key: str, value: str, **extra: Any) -> Iterator[dict[str, Any]]:
    pages = _ddb(region).get_paginator("query").paginate(
        TableName=aws.table_name(table), KeyConditionExpression="#k = :v", ExpressionAttributeNames={"#k": key},
        ExpressionAttributeValues={":v": {"S": value}}, **extra)
    for page in pages:
        yield from page["Items"]


def _scan(region: str, table: str, **extra: Any) -> Iterator[dict[str, Any]]:
    for page in _ddb(region).get_paginator("scan").paginate(TableName=aws.table_name(table), **extra):
        yield from page["Items"]


def _delete(region: str, table: str, key: dict[str, Any]) -> None:
    _ddb(region).delete_item(TableName=aws.table_name(table), Key=key)


def _s(item: dict[str, Any], attr: str) -> str:
    return str(item.get(attr, {}).get("S", ""))


def _groups_of(item: dict[str, Any] | None) -> list[str]:
    return list((item or {}).get("groups", {}).get("SS", []))


def erase_in_workspace(region: str, workspace_id: str, user_id: str, mac: str,
                       email: str | None = None) -> dict[str, int]:
    """Remove the user's personal data from one workspace; returns counts per kind."""
    is_theirs = _Matcher(region, mac, email)
    counts = {"memberships": 0, "chats": 0, "presets": 0, "agent_memory": 0, "agent_runs": 0, "invitations": 0,
              "audit_personal": 0, "idempotency": 0, "lineage_edges": 0, "attributions": 0,
              "scim_users": 0}
    _erase_membership(region, workspace_id, user_id, counts)
    _erase_chats(region, workspace_id, user_id, counts)
    _erase_agent_content(region, workspace_id, user_id, is_theirs, counts)
    _erase_invitations(region, workspace_id, user_id, is_theirs, counts)
    counts["attributions"] += _attributions(region, workspace_id, user_id, is_theirs)
    ws = {"S": workspace_id}
    for record in _query(region, "audit_personal", "workspace_id", workspace_id, ConsistentRead=True):
        if _s(record, "subject") == user_id or is_theirs(_s(record, "email")):
            _delete(region, "audit_personal", {"workspace_id": ws, "ref": record["ref"]})
            counts["audit_personal"] += 1
    # Idempotency-Key records of the user's requests here (references and fingerprints, but theirs)
    counts["idempotency"] = idempotency.erase(region, user_id, f"{workspace_id}#") + idempotency.erase(
        region, user_id, f"{idempotency.ACCOUNT}#")
    return counts


def _erase_membership(region: str, workspace_id: str, user_id: str, counts: dict[str, int]) -> None:
    """The provider's record of the user (and its userName claim), the membership and the group edges."""
    ws = {"S": workspace_id}
    scim = _ddb(region).delete_item(TableName=aws.table_name("directory"), ReturnValues="ALL_OLD",
                                    Key={"workspace_id": ws, "key": {"S": f"user#{user_id}"}})
    if scim.get("Attributes"):
        _delete(region, "directory", {"workspace_id": ws,
                                      "key": {"S": "uname#" + _s(scim["Attributes"], "user_name").strip().casefold()}})
        counts["scim_users"] = 1
    got = _ddb(region).delete_item(TableName=aws.table_name("memberships"),
                                   Key={"workspace_id": ws, "user_id": {"S": user_id}}, ReturnValues="ALL_OLD")
    if got.get("Attributes"):
        counts["memberships"] = 1
        membership_changed(user_id)
        workspaces()(workspace_id).update(actions=[workspaces().member_count.add(-1)])
    # the user's group edges (``platform/models.py`` GroupMemberAttrs: they hold the address as display)
    for group_id in {*_groups_of(scim.get("Attributes")), *_groups_of(got.get("Attributes"))}:
        _delete(region, "directory", {"workspace_id": ws, "key": {"S": f"gmem#{group_id}#{user_id}"}})


def _erase_chats(region: str, workspace_id: str, user_id: str, counts: dict[str, int]) -> None:
    """The user's chats (with their answers' lineage edges), their private presets (kept in the chats table)
    and their answers' event logs."""
    ws = {"S": workspace_id}
    for chat in _query(region, "chats", "workspace_id", workspace_id):
        if _s(chat, "user_id") == user_id:
            for message in json.loads(_s(chat, "messages") or "[]"):
                if message.get("role") == "assistant" and message.get("id"):
                    counts["lineage_edges"] += _delete_edges_into(region, workspace_id, message["id"])
            _delete(region, "chats", {"workspace_id": ws, "id": chat["id"]})
            counts["presets" if _s(chat, "id").startswith("pre_") else "chats"] += 1  # private presets live here
    # the event logs of the user's answers (kept a day; state items name the user, event items their answer)
    answer_items = list(_query(region, "chat_answers", "workspace_id", workspace_id))
    theirs = {_s(i, "key") for i in answer_items if _s(i, "user_id") == user_id}
    for item in answer_items:
        if _s(item, "key").split("#", 1)[0] in theirs:
            _delete(region, "chat_answers", {"workspace_id": ws, "key": item["key"]})


def _erase_agent_content(region: str, workspace_id: str, user_id: str, is_theirs: _Matcher,
                         counts: dict[str, int]) -> None:
    """The user's agent memory and runs (with their logs and lineage edges); their address in others' runs."""
    ws = {"S": workspace_id}
    for item in _scan(region, "agent_memory", FilterExpression="begins_with(#s, :p)",
                      ExpressionAttributeNames={"#s": "scope"}, ExpressionAttributeValues={":p": {"S": workspace_id + "#"}}):
        if _s(item, "scope").rsplit("#", 1)[-1] == user_id:
            _delete(region, "agent_memory", {"scope": item["scope"], "key": item["key"]})
            counts["agent_memory"] += 1
    for run in _query(region, "agent_runs", "workspace_id", workspace_id):
        if _s(run, "user_id") != user_id:
            counts["attributions"] += _forget_editor_in_run(region, run, user_id, is_theirs)
            continue
        run_key = f"{workspace_id}#{_s(run, 'id')}"
        for entry in _query(region, "agent_run_log", "run_key", run_key):
            _delete(region, "agent_run_log", {"run_key": entry["run_key"], "sk": entry["sk"]})
        _delete(region, "agent_runs", {"workspace_id": ws, "id": run["id"]})
        counts["lineage_edges"] += _delete_edges_into(region, workspace_id, _s(run, "id"))
        counts["agent_runs"] += 1


def _erase_invitations(region: str, workspace_id: str, user_id: str, is_theirs: _Matcher,
                       counts: dict[str, int]) -> None:
    """Invitations to the user; their address on invitations they sent."""
    for inv in _query(region, "invitations", "workspace_id", workspace_id):
        inv_id = _s(inv, "id")
        address = inv_id[len("email#"):] if inv_id.startswith("email#") else _s(inv, "email")
        if is_theirs(address) or _s(inv, "accepted_by") == user_id:
            _delete(region, "invitations", {"workspace_id": {"S": workspace_id}, "id": inv["id"]})
            counts["invitations"] += 1
            continue
        counts["attributions"] += _forget_author(region, "invitations", inv, "invited_by", user_id, is_theirs)


def _set(region: str, table: str, item: dict[str, Any], values: dict[str, str | None]) -> None:
    """Set string attributes of one item (None removes the attribute)."""
    sets = {k: v for k, v in values.items() if v is not None}
    removes = [k for k, v in values.items() if v is None]
    names = {f"#a{i}": k for i, k in enumerate(values)}
    alias = {k: a for a, k in names.items()}
    expr = ("SET " + ", ".join(f"{alias[k]} = :v{i}" for i, k in enumerate(sets)) if sets else "") + \
           (" REMOVE " + ", ".join(alias[k] for k in removes) if removes else "")
    key = {k: item[k] for k in _KEYS[table]}
    kw: dict[str, Any] = {"ExpressionAttributeValues": {f":v{i}": {"S": v} for i, v in enumerate(sets.values())}} \
        if sets else {}
    _ddb(region).update_item(TableName=aws.table_name(table), Key=key, UpdateExpression=expr.strip(),
                             ExpressionAttributeNames=names, **kw)


_KEYS = {table: ("workspace_id", "id")  # the key attributes of each table ``_set`` writes
         for table in ("invitations", "agent_runs", "support_grants", "agents", "connectors", "datasets")}


def _forget_author(region: str, table: str, item: dict[str, Any], attr: str, user_id: str,
                   is_theirs: _Matcher) -> int:
    """Blank the e-mail of a JSON ``{id, email}`` attribute naming the user (the id stays); 1 when done."""
    author = json.loads(_s(item, attr) or "{}")
    if not author.get("email") or not (author.get("id") == user_id or is_theirs(author["email"])):
        return 0
    _set(region, table, item, {attr: audit.canonical({**author, "email": ""})})
    return 1


def _forget_editor_in_run(region: str, run: dict[str, Any], user_id: str, is_theirs: _Matcher) -> int:
    """Another member's run keeps a snapshot of its agent: the erased user as its last editor loses the
    address there too."""
    try:
        agent = json.loads(_s(run, "agent") or "{}")
    except ValueError:
        return 0
    editor = agent.get("updated_by") if isinstance(agent, dict) else None
    if not isinstance(editor, dict) or not editor.get("email") or not (
            editor.get("user_id") == user_id or is_theirs(editor["email"])):
        return 0
    agent["updated_by"] = {**editor, "email": None}
    _set(region, "agent_runs", run, {"agent": json.dumps(agent)})
    return 1


def _attributions(region: str, workspace_id: str, user_id: str, is_theirs: _Matcher) -> int:
    """The user's e-mail where it names them as an author or owner of workspace content that stays: the
    last editor of an agent (shown to every member), support grants they made or that name them as the
    support person, connectors and datasets they own (the catalog's ``owner``). Returns how many items
    changed."""
    n = 0
    for agent in _query(region, "agents", "workspace_id", workspace_id):
        editor = _s(agent, "updated_by_email")
        if editor and (_s(agent, "updated_by") == user_id or is_theirs(editor)):
            _set(region, "agents", agent, {"updated_by_email": None})
            n += 1
    for grant in _query(region, "support_grants", "workspace_id", workspace_id):
        n += _forget_author(region, "support_grants", grant, "granted_by", user_id, is_theirs)
        if is_theirs(_s(grant, "support_email")):
            _set(region, "support_grants", grant, {"support_email": ""})
            n += 1
    owned: dict[str, list[str]] = {"connectors": [], "datasets": []}
    for table, blank in (("connectors", None), ("datasets", "")):
        for item in _query(region, table, "workspace_id", workspace_id):
            if is_theirs(_s(item, "owner")):
                _set(region, table, item, {"owner": blank})
                owned[table].append(_s(item, "id"))
    if owned["connectors"] or owned["datasets"]:
        catalog.changed(region, workspace_id, datasets=owned["datasets"], connectors=owned["connectors"])
    return n + len(owned["connectors"]) + len(owned["datasets"])


def _delete_edges_into(region: str, workspace_id: str, target_id: str) -> int:
    """Lineage edges into an erased subject (a chat answer, an agent run) go with it."""
    n = 0
    pages = _ddb(region).get_paginator("query").paginate(
        TableName=aws.table_name("lineage_edges"), IndexName="by_target",
        KeyConditionExpression="workspace_id = :w AND target_id = :t",
        ExpressionAttributeValues={":w": {"S": workspace_id}, ":t": {"S": target_id}})
    for page in pages:
        for edge in page["Items"]:
            _delete(region, "lineage_edges", {"workspace_id": edge["workspace_id"], "edge": edge["edge"]})
            n += 1
    return n


def record(region: str, workspace_id: str, user_id: str, mac: str, request_id: str) -> None:
    erasure_ledger(region)(workspace_id, user_id, email_mac=mac, erased_at=clock.iso(), request_id=request_id).save()


def replay(region: str, workspace_id: str) -> int:
    """Erase again every user the workspace's ledger names (after a restore); returns how many."""
    n = 0
    for entry in erasure_ledger(region).query(workspace_id, consistent_read=True):
        counts = erase_in_workspace(region, workspace_id, entry.user_id, entry.email_mac)
        if any(counts.values()):
            log.info("erasure replayed", extra={"workspace_id": workspace_id, "user_id": entry.user_id,
                                                "counts": counts})
        n += 1
    return n


def erase_identity(user_id: str, email: str | None, mac: str) -> dict[str, int]:
    """Remove the user's global directory entry and everything sign-in keeps about them."""
    region = settings().global_region
    tokens.bump_epoch(user_id)  # every token the user holds is refused from now (docs/security.md)
    counts = {"directory": 0, "sessions": 0, "api_tokens": 0, "webauthn_credentials": 0, "oauth_consents": 0,
              "sign_in_state": 0, "support_staff": 0}
    is_theirs = _Matcher(region, mac, email)
    for item in _scan(region, "users", ConsistentRead=True):
        key = _s(item, "id")
        if key == user_id or _s(item, "user_id") == user_id or (key.startswith("email#") and is_theirs(key[6:])):
            _delete(region, "users", {"id": item["id"]})
            counts["directory"] += 1
    for item in _query(region, "sessions", "user_id", user_id, IndexName="by_user"):
        _delete(region, "sessions", {"sid_hash": item["sid_hash"]})
        counts["sessions"] += 1
    for item in _query(region, "api_tokens", "user_id", user_id, IndexName="by_user"):
        _delete(region, "api_tokens", {"id": item["id"]})
        counts["api_tokens"] += 1
    for item in _query(region, "webauthn_credentials", "user_id", user_id):
        _delete(region, "webauthn_credentials", {"user_id": item["user_id"], "credential_id": item["credential_id"]})
        counts["webauthn_credentials"] += 1
    for item in _query(region, "oauth_consents", "user_id", user_id):  # which apps they allowed
        _delete(region, "oauth_consents", {"user_id": item["user_id"], "key": item["key"]})
        counts["oauth_consents"] += 1
    for item in _scan(region, "auth_state", ConsistentRead=True):
        pk = _s(item, "pk")
        kind, _, rest = pk.partition("#")
        if (kind in _STATE_BY_USER and rest == user_id) or (kind in _STATE_BY_EMAIL and is_theirs(rest)) \
                or _s(item, "user_id") == user_id:
            _delete(region, "auth_state", {"pk": item["pk"]})
            counts["sign_in_state"] += 1
    got = _ddb(region).delete_item(TableName=aws.table_name("support_staff"), Key={"user_id": {"S": user_id}},
                                   ReturnValues="ALL_OLD")
    counts["support_staff"] = 1 if got.get("Attributes") else 0
    return counts


def record_identity(user_id: str, mac: str, request_id: str) -> None:
    erased_users()(user_id, email_mac=mac, erased_at=clock.iso(), request_id=request_id).save()


def replay_identities() -> int:
    """Erase again every identity of the global ledger (after the global store is restored)."""
    n = 0
    for entry in erased_users().scan(consistent_read=True):
        erase_identity(entry.user_id, None, entry.email_mac)
        n += 1
    return n


def is_erased(user_id: str) -> bool:
    try:
        erased_users().get(user_id, consistent_read=True)
        return True
    except erased_users().DoesNotExist:
        return False
