"""One DynamoDB ``TransactWriteItems`` whose items carry tags, so a refusal says whose condition failed.

A request's effect, its audit event (with the chain head), its idempotency record and its run events
are committed together (``core/audit.append``): all or nothing. DynamoDB reports a cancelled
transaction with one reason per item, in the order PynamoDB sends them (condition checks, deletes,
puts, updates); ``Tx`` keeps the tag of each item in that same order. ``Refused`` names the tags whose
condition failed; a transaction cancelled only by a conflict with a concurrent transaction raises
``Conflict`` (nothing was written; retry).
"""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.core.store.conditions import cancellation_codes
from chalicelib.core.store.tables import connection

_KINDS = ("condition_check", "delete", "put", "update")
_METHODS = {"condition_check": "condition_check", "delete": "delete", "put": "save", "update": "update"}
MAX_ITEMS = 100  # DynamoDB's limit per transaction


class Refused(Exception):
    """A condition of the transaction failed; nothing was written."""

    def __init__(self, tags: set[str]) -> None:
        super().__init__("transaction refused by the condition of: " + ", ".join(sorted(tags)))
        self.tags = tags


class Conflict(Exception):
    """The transaction collided with another one (or was throttled); nothing was written."""


class Tx:
    """Items of one transaction in one region, each with a tag (``effect`` unless told)."""

    def __init__(self, region: str) -> None:
        self.region = region
        self._ops: dict[str, list[tuple[str, tuple[Any, ...], dict[str, Any]]]] = {k: [] for k in _KINDS}

    def __len__(self) -> int:
        return sum(len(v) for v in self._ops.values())

    def save(self, model: Any, condition: Any = None, *, tag: str = "effect") -> None:
        self._ops["put"].append((tag, (model,), {"condition": condition}))

    def update(self, model: Any, actions: list[Any], condition: Any = None, *, tag: str = "effect") -> None:
        self._ops["update"].append((tag, (model,), {"actions": actions, "condition": condition}))

    def delete(self, model: Any, condition: Any = None, *, tag: str = "effect") -> None:
        self._ops["delete"].append((tag, (model,), {"condition": condition}))

    def condition_check(self, model_cls: Any, hash_key: Any, range_key: Any = None, condition: Any = None, *,
                        tag: str = "effect") -> None:
        self._ops["condition_check"].append((tag, (model_cls, hash_key, range_key), {"condition": condition}))

    def tags(self) -> list[str]:
        """The tag of every item, in the order DynamoDB reports cancellation reasons."""
        return [tag for kind in _KINDS for tag, _, _ in self._ops[kind]]

    def commit(self) -> None:
        if not len(self):
            return
        if len(self) > MAX_ITEMS:
            raise ValueError(f"a transaction holds at most {MAX_ITEMS} items")
        try:
            with TransactWrite(connection=connection(self.region)) as tw:
                for kind in _KINDS:
                    for _, args, kwargs in self._ops[kind]:
                        getattr(tw, _METHODS[kind])(*args, **kwargs)
        except TransactWriteError as err:
            codes = cancellation_codes(err)
            tags = self.tags()
            failed = {tags[i] for i, code in enumerate(codes) if code == "ConditionalCheckFailed" and i < len(tags)}
            if failed:
                raise Refused(failed) from err
            raise Conflict(str(err)) from err
