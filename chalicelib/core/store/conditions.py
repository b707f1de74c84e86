"""Conditional-write outcomes, detected one way: a write (or a transaction) refused by its condition is
the expected result of a lost race, not an error. PynamoDB wraps botocore's error; its
``cause_response_code`` names DynamoDB's code, and a cancelled transaction lists one reason per item."""
from __future__ import annotations

from typing import Any

CONDITION_FAILED = "ConditionalCheckFailedException"
TRANSACTION_CANCELED = "TransactionCanceledException"


def condition_failed(err: BaseException) -> bool:
    """True when a write or transaction was refused by a condition."""
    return getattr(err, "cause_response_code", None) in (CONDITION_FAILED, TRANSACTION_CANCELED)


def cancellation_codes(err: BaseException) -> list[str | None]:
    """The per-item reason codes of a cancelled transaction, in the order of its items
    (``"ConditionalCheckFailed"`` for an item whose condition failed, ``None`` or ``"None"`` for the others)."""
    reasons: list[Any] = getattr(err, "cancellation_reasons", None) or []
    return [r.get("Code") if isinstance(r, dict) else getattr(r, "code", None) for r in reasons]


def item_condition_failed(err: BaseException, index: int) -> bool:
    """True when item ``index`` of a cancelled transaction failed its condition."""
    codes = cancellation_codes(err)
    return index < len(codes) and codes[index] == "ConditionalCheckFailed"
