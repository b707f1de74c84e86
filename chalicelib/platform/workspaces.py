"""Workspace creation: the global directory entry, a unique slug, and the creator as Admin in-region.

Slug rule: the name folded to ASCII, lower-cased, every run of other characters turned into one ``-``,
trimmed to 40 characters (``workspace`` if nothing is left); when taken, ``-2``, ``-3``, ... is added.
A slug is claimed by an item ``slug#<slug>`` in the same transaction as the workspace, so two
workspaces can never share one.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Any

from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.core import audit, clock
from chalicelib.core.authz import Role
from chalicelib.core.config import settings
from chalicelib.core.ids import new_id
from chalicelib.core.models import BaseModel, connection, global_model
from chalicelib.core.regions import region_for
from chalicelib.core.tenancy import WorkspaceAttrs, memberships, workspaces

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
    """Create the workspace in its region with its creator as Admin; audited in that region."""
    region = region_for(residency)
    base = slugify(name)
    ws_id = new_id("ws")
    now = clock.iso()
    for attempt in range(1, MAX_SLUG_ATTEMPTS + 1):
        suffix = "" if attempt == 1 else f"-{attempt}"
        slug = base[: SLUG_MAX - len(suffix)].rstrip("-") + suffix
        ws = workspaces()(ws_id, name=name, slug=slug, residency=residency, region=region,
                          enforce_mfa=enforce_mfa, replication=default_replication(residency),
                          created_at=now, created_by=owner_id, member_count=1)
        claim = global_model(SlugClaimAttrs)(f"slug#{slug}", workspace_id=ws_id)
        try:
            with TransactWrite(connection=connection(settings().global_region)) as tx:
                tx.save(claim, condition=SlugClaimAttrs.id.does_not_exist())
                tx.save(ws, condition=WorkspaceAttrs.id.does_not_exist())
            break
        except TransactWriteError:
            continue
    else:
        raise RuntimeError("could not find a free slug")
    memberships(region)(ws_id, owner_id, role=Role.ADMIN.value, email=owner_email, joined_at=now,
                        joined_via=joined_via).save()
    audit.append(region, ws_id, "workspace.created",
                 actor=audit.Actor("user", owner_id, owner_email),
                 target={"type": "workspace", "id": ws_id},
                 details={"name": name, "slug": ws.slug, "residency": residency, "enforce_mfa": enforce_mfa},
                 caller=caller)
    return ws
