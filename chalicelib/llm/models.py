"""Model storage (regional): the per-role model allow-list, the model connections and the monthly token
budget an Admin sets for a workspace (one item per workspace), and the presets people start chats and
agents from."""
from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from chalicelib.core.store.tables import BaseModel, regional


class ModelAccessAttrs(BaseModel):
    """One item per workspace. ``allow`` is JSON ``{role: [model id, ...]}``; a role not named may use
    every model its workspace's region offers."""

    TABLE = "model_access"
    workspace_id = UnicodeAttribute(hash_key=True)
    allow = UnicodeAttribute(default="{}")
    connections = UnicodeAttribute(null=True)  # JSON list (llm/connections.py); keys only as KMS ciphertext
    version = NumberAttribute(null=True)  # bumped by every connection change (conditional writes)
    monthly_token_budget = NumberAttribute(null=True)  # tokens per calendar month (llm/budget.py); None: none
    updated_at = UnicodeAttribute()
    updated_by = UnicodeAttribute()


def model_access(region: str) -> type[ModelAccessAttrs]:
    return regional(ModelAccessAttrs, region)


class PresetAttrs(BaseModel):
    """Saved instructions (``llm/presets.py``), kept in the chats table of the workspace's region under
    ids ``pre_...`` (chats are ``chat_...``): ``owner`` is a user id (private) or ``workspace`` (shared)."""

    TABLE = "chats"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)  # pre_...
    owner = UnicodeAttribute()
    user_id = UnicodeAttribute(null=True)  # the owner of a private preset (erased and exported with them)
    name = UnicodeAttribute()
    instructions = UnicodeAttribute()
    created_by = UnicodeAttribute()
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()


def presets(region: str) -> type[PresetAttrs]:
    return regional(PresetAttrs, region)
