"""The inverted index of one workspace's catalog snapshot, so a search never scans the catalog.

Built when ``gateway/catalog.py`` loads a snapshot in full and updated copy-on-write when it reloads
changed datasets by version. Every dataset holds a *slot*; a set of datasets is a Python ``int`` used as a
bitmap over slots, so intersections, counts and paging are a few big-integer operations in C:

- slots ``[0, base)`` are in paging order ``(name, id)``, as of the last full build; a dataset added or
  changed since gets a new slot after ``base`` (its old slot is freed), and the index is rebuilt in memory
  when that tail grows past ``max(TAIL_MIN, base // TAIL_DIVISOR)``;
- postings per filter value: classification, connector, lower-cased owner, ACL key (``role:<id>`` /
  ``user:<id>``), field classification (any field, and non-``DENY`` fields);
- text: each whitespace-separated token of a dataset's search text (``DatasetRecord._haystack``, already
  lower-cased) -> the slots holding it (a list, or a bitmap once a token is common enough that the bitmap is
  smaller). Search matches a term as a *substring* of that text; a term has no whitespace, so it is a
  substring of the text exactly when it is a substring of one of its tokens: the term's datasets are the
  union over the vocabulary tokens containing it. The vocabulary is also kept as one newline-joined string,
  so a rare term is found by C-speed ``str.find``; a common one by one pass over the token list. A term's
  bitmap is memoised (``TERM_MEMO`` terms per index) and carried across incremental updates.

Matching is exactly ``catalog._Criteria.select`` (the linear definition, kept as the tests' oracle and the
benchmark's reference). See docs/architecture.md, "Catalog", for memory per 10k datasets.
"""
from __future__ import annotations

import bisect
import heapq
import threading
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

TAIL_MIN = 256  # out-of-order slots tolerated before an in-memory rebuild ...
TAIL_DIVISOR = 16  # ... or this fraction of the ordered slots, whichever is larger
TERM_MEMO = 512  # search terms whose bitmaps are remembered per index
DENSE_MIN = 32  # a token in at least this many datasets (and 1 in 256) keeps a bitmap instead of a list


def _key(rec: Any) -> tuple[str, str]:
    return rec.name, rec.id


def _bits(slots: Iterable[int] | np.ndarray, size: int) -> int:
    """The bitmap with the given slots set."""
    flags = np.zeros(size, dtype=bool)
    at = slots if isinstance(slots, np.ndarray) else np.fromiter(slots, dtype=np.int64)
    if len(at):
        flags[at] = True
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _mask_bits(flags: np.ndarray) -> int:
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _postings(rec: Any) -> list[tuple[str, str | None]]:
    """Every (family, value) posting a dataset belongs to, text tokens excluded."""
    out: list[tuple[str, str | None]] = [("classification", rec.classification), ("connector", rec.connector_id),
                                         ("owner", rec.owner.lower())]
    out += [("acl", k) for k in rec.acl_keys]
    visible: dict[str, bool] = {}  # field classification -> held by a non-DENY field
    for f in rec.fields:
        visible[f["classification"]] = visible.get(f["classification"], False) or f["policy"] != "DENY"
    for cls, seen in visible.items():
        out.append(("field_any", cls))
        if seen:
            out.append(("field_visible", cls))
    return out


class CatalogIndex:
    """Postings over slots for one snapshot's datasets (treat as immutable: ``updated`` makes a new one)."""

    def __init__(self) -> None:
        self.records: list[Any] = []  # slot -> record, None once freed
        self.slot_of: dict[str, int] = {}  # dataset id -> live slot
        self.base = 0  # slots below are in paging order
        self.base_keys: list[tuple[str, str]] = []  # (name, id) of slots below base, as built
        self.alive = 0
        self.postings: dict[tuple[str, str | None], int] = {}
        self.fresh = np.zeros(0, dtype=np.float64)  # slot -> fresh_since (-inf once freed)
        self.tokens: dict[str, list[int] | int] = {}  # token -> slots or bitmap (freed slots stay until a rebuild)
        self.vocab: list[str] = []  # every token, for the substring scan
        self.joined = "\n"  # the vocabulary as "\n" + "\n".join(vocab) + "\n"
        self.terms: dict[str, int] = {}  # memo: search term -> bitmap of slots whose text contains it
        self._memo_lock = threading.Lock()  # readers of one snapshot may share it across threads

    # --- building ---------------------------------------------------------------------------------

    @classmethod
    def build(cls, ordered: list[Any]) -> CatalogIndex:
        """The index of ``ordered`` (records already in paging order)."""
        idx = cls()
        n = len(ordered)
        idx.records = list(ordered)
        idx.slot_of = {r.id: s for s, r in enumerate(ordered)}
        idx.base = n
        idx.base_keys = [_key(r) for r in ordered]
        idx.alive = (1 << n) - 1
        lists: defaultdict[tuple[str, str | None], list[int]] = defaultdict(list)
        tokens: defaultdict[str, list[int]] = defaultdict(list)
        for slot, rec in enumerate(ordered):
            for p in _postings(rec):
                lists[p].append(slot)
            for tok in set(rec._haystack.split()):
                tokens[tok].append(slot)
        idx.postings = {p: _bits(s, n) for p, s in lists.items()}
        idx.fresh = np.fromiter((r.fresh_since for r in ordered), dtype=np.float64, count=n)
        dense = max(DENSE_MIN, n // 256)
        idx.tokens = {t: (_bits(s, n) if len(s) >= dense else s) for t, s in tokens.items()}
        idx.vocab = list(tokens)
        idx.joined = "\n" + "\n".join(idx.vocab) + "\n"
        return idx

    def updated(self, removed: Iterable[Any], added: Iterable[Any]) -> CatalogIndex:
        """A new index without the ``removed`` records and with the ``added`` ones (this one is unchanged)."""
        removed, added = list(removed), list(added)
        live_after = len(self.slot_of) - len(removed) + len(added)
        tail_after = len(self.records) - self.base + len(added)
        if tail_after > max(TAIL_MIN, self.base // TAIL_DIVISOR):
            gone = {r.id for r in removed}
            keep = [r for r in self.records if r is not None and r.id not in gone] + added
            assert len(keep) == live_after
            return CatalogIndex.build(sorted(keep, key=_key))
        idx = CatalogIndex()
        idx.records, idx.slot_of = list(self.records), dict(self.slot_of)
        idx.base, idx.base_keys = self.base, self.base_keys
        idx.postings, idx.tokens = dict(self.postings), dict(self.tokens)
        idx.vocab, idx.joined = self.vocab, self.joined
        idx.fresh, idx.alive = self.fresh, self.alive
        freed, freed_slots = 0, []
        for rec in removed:
            slot = idx.slot_of.pop(rec.id)
            idx.records[slot] = None
            freed |= 1 << slot
            freed_slots.append(slot)
            for p in _postings(rec):
                idx.postings[p] &= ~(1 << slot)
        idx.alive &= ~freed
        fresh = np.concatenate([self.fresh, np.fromiter((r.fresh_since for r in added), dtype=np.float64)])
        fresh[freed_slots] = -np.inf
        new_vocab: list[str] = []
        gained: list[tuple[int, str]] = []  # (slot bit, text) of the added records, for the term memo
        for rec in added:
            slot = len(idx.records)
            idx.records.append(rec)
            idx.slot_of[rec.id] = slot
            bit = 1 << slot
            idx.alive |= bit
            for p in _postings(rec):
                idx.postings[p] = idx.postings.get(p, 0) | bit
            for tok in set(rec._haystack.split()):
                held = idx.tokens.get(tok)
                if held is None:
                    new_vocab.append(tok)
                    idx.tokens[tok] = [slot]
                elif isinstance(held, int):
                    idx.tokens[tok] = held | bit
                else:
                    idx.tokens[tok] = [*held, slot]
            gained.append((bit, rec._haystack))
        if new_vocab:
            idx.vocab = self.vocab + new_vocab
            idx.joined = self.joined + "\n".join(new_vocab) + "\n"
        idx.fresh = fresh
        keep_mask = ~freed
        with self._memo_lock:
            memo = list(self.terms.items())
        for term, bits in memo:
            bits &= keep_mask
            for bit, text in gained:
                if term in text:
                    bits |= bit
            idx.terms[term] = bits
        return idx

    # --- matching ---------------------------------------------------------------------------------

    def readable(self, keys: frozenset[str] | None) -> int:
        """The datasets an ACL key set may read (``None``: an Admin, who reads every dataset)."""
        if keys is None:
            return self.alive
        bits = 0
        for k in keys:
            bits |= self.postings.get(("acl", k), 0)
        return bits & self.alive

    def term(self, term: str) -> int:
        """The datasets whose search text contains ``term`` (lower-case, no whitespace)."""
        found = self.terms.get(term)
        if found is None:
            found, sparse = 0, []
            for tok in self._tokens_containing(term):
                held = self.tokens[tok]
                if isinstance(held, int):
                    found |= held
                else:
                    sparse += held
            if sparse:
                found |= _bits(sparse, len(self.records))
            with self._memo_lock:
                if len(self.terms) >= TERM_MEMO:
                    del self.terms[next(iter(self.terms))]
                self.terms[term] = found
        return found

    def _tokens_containing(self, term: str) -> list[str]:
        """The vocabulary tokens of which ``term`` is a substring."""
        joined = self.joined
        if joined.count(term) > len(self.vocab) // 64:  # common: one pass over the tokens is cheaper
            return [tok for tok in self.vocab if term in tok]
        out, at, find = [], 0, joined.find
        while (at := find(term, at)) >= 0:
            start, end = joined.rfind("\n", 0, at) + 1, find("\n", at)
            out.append(joined[start:end])
            at = end
        return out

    def select(self, *, keys: frozenset[str] | None, terms: tuple[str, ...], classification: str | None,
               connector_id: str | None, owner: str | None, oldest: float | None,
               field_classification: str | None) -> int:
        """The bitmap of readable datasets matching every given criterion (smallest posting first)."""
        parts = [self.readable(keys)]
        if classification:
            parts.append(self.postings.get(("classification", classification), 0))
        if connector_id:
            parts.append(self.postings.get(("connector", connector_id), 0))
        if owner:
            parts.append(self.postings.get(("owner", owner), 0))
        if field_classification:
            family = "field_any" if keys is None else "field_visible"
            parts.append(self.postings.get((family, field_classification), 0))
        parts.sort(key=int.bit_count)
        bits = parts[0]
        for p in parts[1:]:
            if not bits:
                return 0
            bits &= p
        for t in sorted(set(terms), key=len, reverse=True):  # longer terms are usually rarer
            if not bits:
                return 0
            bits &= self.term(t)
        if oldest is not None and bits:
            bits &= _mask_bits(self.fresh >= oldest)
        return bits

    def page(self, bits: int, after: tuple[str, str] | None, limit: int) -> tuple[list[Any], int]:
        """The first ``limit`` matching records after the keyset cursor, in paging order, and how many
        matches follow the cursor in all."""
        start = bisect.bisect_right(self.base_keys, after) if after is not None else 0
        ordered = bits & ((1 << self.base) - 1)
        ordered = ordered >> start << start
        tail = []
        rest = bits >> self.base
        while rest:
            low = rest & -rest
            rec = self.records[self.base + low.bit_length() - 1]
            if after is None or _key(rec) > after:
                tail.append(rec)
            rest ^= low
        tail.sort(key=_key)
        first = []
        scan = ordered
        while scan and len(first) < limit:
            low = scan & -scan
            first.append(self.records[low.bit_length() - 1])
            scan ^= low
        page = list(heapq.merge(first, tail, key=_key))[:limit]
        return page, ordered.bit_count() + len(tail)
