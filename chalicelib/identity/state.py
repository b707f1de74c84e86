"""Small helpers for the ``auth_state`` table (sign-in state items, one ``pk`` prefix per kind)."""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import PynamoDBException


def condition_failed(err: PynamoDBException) -> bool:
    """True when a write was refused by its condition (the expected outcome of a lost race)."""
    cause: Any = getattr(err, "cause_response_code", None)
    return cause in ("ConditionalCheckFailedException", "TransactionCanceledException")
