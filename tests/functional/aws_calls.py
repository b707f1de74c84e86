"""Counting the AWS round trips a piece of work makes: every botocore API call (boto3 clients and
PynamoDB alike go through ``BaseClient._make_api_call``), with its service and operation."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import botocore.client


@dataclass
class Calls:
    made: list[tuple[str, str, str]] = field(default_factory=list)  # service, operation, table (when one)

    def __len__(self) -> int:
        return len(self.made)

    def by_operation(self) -> Counter[str]:
        return Counter(f"{service}.{op}" + (f"({table})" if table else "") for service, op, table in self.made)

    def report(self) -> str:
        return ", ".join(f"{k} x{v}" for k, v in sorted(self.by_operation().items()))


@contextmanager
def counted() -> Iterator[Calls]:
    """Count every AWS API call made inside the block (this thread and every other)."""
    calls = Calls()
    original = botocore.client.BaseClient._make_api_call

    def counting(self: Any, operation: str, params: dict[str, Any]) -> Any:
        table = params.get("TableName") or ""
        if operation == "TransactWriteItems":
            table = "+".join(sorted({next(iter(i.values()))["TableName"].rsplit("-", 1)[-1]
                                     for i in params["TransactItems"]}))
        calls.made.append((self.meta.service_model.service_name, operation, str(table).rsplit("-", 1)[-1]))
        return original(self, operation, params)

    botocore.client.BaseClient._make_api_call = counting  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]
