"""Counting AWS calls made by a request (botocore level: boto3 and PynamoDB alike), for the round-trip tests."""
from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from botocore.client import BaseClient


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    """Every AWS call made inside the block, as ``'<service> <operation> <table or bucket>'``."""
    seen: Counter[str] = Counter()
    real = BaseClient._make_api_call

    def count(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        target = params.get("TableName") or params.get("Bucket") or ""
        if not target and operation in ("BatchGetItem", "BatchWriteItem"):
            target = ",".join(sorted(params.get("RequestItems", {})))
        seen[f"{self.meta.service_model.service_name} {operation} {str(target).rsplit('-', 1)[-1]}"] += 1
        return real(self, operation, params)

    BaseClient._make_api_call = count  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        BaseClient._make_api_call = real  # type: ignore[method-assign]


LIMITER = "dynamodb UpdateItem request_counters"


def route_calls(seen: Counter[str]) -> Counter[str]:
    """A request's own calls: ``seen`` less the request limiter's one conditional write
    (``core/http/rate_limits.py``, counted on its own in ``tests/functional/core/test_rate_limits.py``), which
    must be there exactly once."""
    assert seen[LIMITER] == 1, dict(seen)
    rest = Counter(seen)
    del rest[LIMITER]
    return rest
