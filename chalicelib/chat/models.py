"""Chat storage. Chats are workspace content and live in the workspace's region; usage counters are
aggregate figures without content and live in the global store ("global by design")."""
from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from chalicelib.core.store.tables import BaseModel, global_model, regional


class ChatAttrs(BaseModel):
    """One chat: its messages as JSON ``[{id, role, content, created_at, ...}]`` (assistant messages also
    carry model, provider, region, routing, usage, citations and grounding)."""

    TABLE = "chats"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)  # chat_...
    user_id = UnicodeAttribute()
    title = UnicodeAttribute()
    messages = UnicodeAttribute(default="[]")
    message_count = NumberAttribute(default=0)
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    expires_at = NumberAttribute(null=True)  # epoch seconds (auto-expiry); the sweep deletes after it


class UsageAttrs(BaseModel):
    """Tokens in and out per workspace, day and model: ``key`` = ``<YYYY-MM-DD>#<model id>``."""

    TABLE = "usage_counters"
    workspace_id = UnicodeAttribute(hash_key=True)
    key = UnicodeAttribute(range_key=True)
    day = UnicodeAttribute()
    model = UnicodeAttribute()
    input_tokens = NumberAttribute(default=0)
    output_tokens = NumberAttribute(default=0)
    requests = NumberAttribute(default=0)


def chats(region: str) -> type[ChatAttrs]:
    return regional(ChatAttrs, region)


def usage() -> type[UsageAttrs]:
    return global_model(UsageAttrs)
