"""Make the embedded emulator's DynamoDB writes atomic, as DynamoDB's are.

moto (5.x) checks a write's condition and then stores the item as two separate steps with no lock
(``moto/dynamodb/models/table.py``, ``Table.put_item``: ``get_item`` ... ``condition_op.expr(current)``
... ``self.items[...] = item``). Two threads (two requests to ``make run``'s emulator, or two threads of
one test process) can both pass ``attribute_not_exists`` and both "succeed": the second write silently
replaces the first. ``transact_write_items`` restores a deep copy of the table when a transaction fails,
which can erase a concurrent write the same way. DynamoDB itself evaluates a condition and writes
atomically, so product code that relies on conditional writes (the audit chain, lockout counters,
leases) is correct on AWS and was wrong only on the emulator.

``serialise_writes()`` wraps every write operation of moto's DynamoDB backend in one process-wide
lock, so a conditional write is atomic against every other write. It is applied by the local runner
(``infra/local_run.py``) and by the test fixtures; it is never packaged into the Lambda functions.
"""
from __future__ import annotations

import functools
import threading
from typing import Any

WRITE_OPERATIONS = ("put_item", "update_item", "delete_item", "transact_write_items", "execute_statement",
                    "execute_transaction", "batch_execute_statement")
_LOCK = threading.RLock()
_MARK = "_aiplat_serialised"


def serialise_writes() -> None:
    """Idempotently wrap moto's DynamoDB write operations in one lock."""
    from moto.dynamodb.models import DynamoDBBackend

    for name in WRITE_OPERATIONS:
        original = getattr(DynamoDBBackend, name, None)
        if original is None or getattr(original, _MARK, False):
            continue
        setattr(DynamoDBBackend, name, _locked(original))


def _locked(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return method(*args, **kwargs)

    setattr(wrapper, _MARK, True)
    return wrapper
