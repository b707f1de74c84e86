"""Model storage (regional): the per-role model allow-list, the model connections and the monthly token
budget an Admin sets for a workspace (one item per workspace)."""
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
