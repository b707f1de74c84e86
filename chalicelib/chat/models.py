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
    answering = UnicodeAttribute(null=True)  # msg_... of the answer being generated (chat/answers.py)
    mode = UnicodeAttribute(null=True)  # knowledge (absent) or general_allowed (chat/modes.py)
    instructions = UnicodeAttribute(null=True)  # the system instructions of the preset it started from
    preset_id = UnicodeAttribute(null=True)


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


class AnswerAttrs(BaseModel):
    """An answer being generated (``chat/answers.py``): ``key`` = ``<msg id>`` holds its state (the
    request, status, stop flag), ``<msg id>#<8-digit seq>`` each of its events in order."""

    TABLE = "chat_answers"
    workspace_id = UnicodeAttribute(hash_key=True)
    key = UnicodeAttribute(range_key=True)
    chat_id = UnicodeAttribute(null=True)
    user_id = UnicodeAttribute(null=True)
    status = UnicodeAttribute(null=True)  # queued, running, done, failed (state item)
    request = UnicodeAttribute(null=True)  # JSON: body, email, caller, created_at (state item)
    stop = NumberAttribute(null=True)  # 1 once Stop was asked (state item)
    started = NumberAttribute(null=True)  # epoch seconds a worker took it (state item)
    seq = NumberAttribute(null=True)  # event item
    type = UnicodeAttribute(null=True)  # event item: the SSE event name
    data = UnicodeAttribute(null=True)  # event item: JSON
    expires_at = NumberAttribute(null=True)


def answers(region: str) -> type[AnswerAttrs]:
    return regional(AnswerAttrs, region)


def chats(region: str) -> type[ChatAttrs]:
    return regional(ChatAttrs, region)


def usage() -> type[UsageAttrs]:
    return global_model(UsageAttrs)
