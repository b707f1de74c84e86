"""Make the embedded emulator's DynamoDB writes atomic, as DynamoDB's are, and its transactions as cheap
as the items they touch.

moto (5.x) checks a write's condition and then stores the item as two separate steps with no lock
(``moto/dynamodb/models/table.py``, ``Table.put_item``: ``get_item`` ... ``condition_op.expr(current)``
... ``self.items[...] = item``). Two threads (two requests to ``make run``'s emulator, or two threads of
one test process) can both pass ``attribute_not_exists`` and both "succeed": the second write silently
replaces the first. DynamoDB itself evaluates a condition and writes atomically, so product code that
relies on conditional writes (the audit chain, lockout counters, leases) is correct on AWS and was wrong
only on the emulator.

``serialise_writes()`` replaces moto's ``transact_write_items`` by one that undoes a failed transaction
item by item (``transactions.py``; moto copies every table it names), then wraps every write operation
of moto's DynamoDB backend in one process-wide lock, so a conditional write or a transaction is atomic
against every other write. The read handlers (``GetItem``, ``BatchGetItem``, ``Query``, ``Scan``,
``TransactGetItems``) take the same lock while they read and serialise items: an update changes moto's
item in place, and a read serialising it at the same moment failed ("dictionary changed size during
iteration", a 500), where DynamoDB returns the item as it was before or after the write. It also answers
the item operations (``ITEM_OPERATIONS``) with their result written as JSON directly (``plain_items.py``):
moto's generic response serialiser walks the output shape for every attribute value and took most of a
read's time (a 50-item page of the audit list: about 0.1 s). It is applied by the local runner
(``infra/local_run.py``), the test fixtures and the benchmarks; it is never packaged into the Lambda
functions. ``snapshot.py`` and ``server.py`` keep the
emulator's state across restarts of ``make run``.
"""
from __future__ import annotations

import functools
import threading
from typing import Any

from infra.emulator import plain_items, transactions

WRITE_OPERATIONS = ("put_item", "update_item", "delete_item", "transact_write_items", "execute_statement",
                    "execute_transaction", "batch_execute_statement")
READ_HANDLERS = ("get_item", "batch_get_item", "query", "scan", "transact_get_items")
_LOCK = threading.RLock()
_MARK = "_aiplat_serialised"


def write_lock() -> threading.RLock:
    """The lock every emulated DynamoDB write holds (a snapshot holds it too: no half-applied transaction)."""
    return _LOCK


def serialise_writes() -> None:
    """Idempotently install the item-level transaction, wrap moto's DynamoDB write operations and read
    handlers in one lock, and answer the item operations with plain JSON (``plain_items``)."""
    from moto.dynamodb.models import DynamoDBBackend

    current = DynamoDBBackend.transact_write_items
    if not getattr(current, _MARK, False) and current is not transactions.transact_write_items:
        DynamoDBBackend.transact_write_items = transactions.transact_write_items  # type: ignore[method-assign]
    from moto.dynamodb.responses import DynamoHandler

    for cls, names in ((DynamoDBBackend, WRITE_OPERATIONS), (DynamoHandler, READ_HANDLERS)):
        for name in names:
            original = getattr(cls, name, None)
            if original is None or getattr(original, _MARK, False):
                continue
            setattr(cls, name, _locked(original))
    plain_items.install()


def _locked(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return method(*args, **kwargs)

    setattr(wrapper, _MARK, True)
    return wrapper
