"""The inverted index of one workspace's catalog snapshot, so a search never scans the catalog.

Built when ``gateway/catalog/snapshot_cache.py`` loads a snapshot in full and updated copy-on-write when it reloads
changed datasets by version. Every dataset holds a *slot*; a set of datasets is a Python ``int`` used as a
bitmap over slots, so intersections, counts and paging are a few big-integer operations in C:

- slots ``[0, base)`` are in paging order ``(name, id)``, as of the last full build; a dataset added or
  changed since gets a new slot after ``base`` (its old slot is freed), and the index is rebuilt in memory
  when that tail grows past ``max(TAIL_MIN, base // TAIL_DIVISOR)``;
- postings per filter value: classification, connector, lower-cased owner, ACL key (``role:<id>`` /
  ``user:<id>``), field classification (any field, and non-``DENY`` fields);
- text: each whitespace-separated token of a dataset's search text (``DatasetRecord._haystack``, already
  lower-cased) as of the last build -> its slots (a bitmap once a token is common enough that the bitmap is
  smaller, else a run of one flat NumPy array). Search matches a term as a *substring* of that text; a term
  has no whitespace, so it is a substring of the text exactly when it is a substring of one of its tokens:
  the term's datasets are the union over the vocabulary tokens containing it;
- n-grams, so a term seen for the first time never scans the vocabulary: ``_Trigrams`` maps each trigram of
  the vocabulary to the sorted ids of the tokens holding it (built vectorised); a term of 3 or more
  characters intersects its trigrams' token ids, confirms each candidate with a substring test and ORs
  those tokens' slots. Slots appended by incremental updates (at most the rebuild tail) are tested against
  their text directly, so token postings are never updated. A term of 1 or 2 characters is answered from
  ``short``: each character and character pair of the tokens -> its datasets (a bitmap, or sorted slots
  while rare), updated with appended slots. A term's bitmap is memoised (``TERM_MEMO`` terms per index)
  and carried across incremental updates.

Matching is exactly ``catalog._Criteria.select`` (the linear definition, kept as the tests' oracle and the
benchmark's reference). See docs/architecture.md, "Catalog", for memory per 10k datasets.
"""
from __future__ import annotations

import bisect
import heapq
import threading
from collections import defaultdict
from collections.abc import Iterable
from itertools import chain
from typing import Any

import numpy as np

TAIL_MIN = 256  # out-of-order slots tolerated before an in-memory rebuild ...
TAIL_DIVISOR = 16  # ... or this fraction of the ordered slots, whichever is larger
TERM_MEMO = 512  # search terms whose bitmaps are remembered per index
DENSE_MIN = 32  # a token in at least this many datasets (and 1 in 256) keeps a bitmap instead of a list
SHORT = 2  # terms up to this many characters are answered from the precomputed 1- and 2-gram sets
_BITS = 21  # a Unicode code point fits in 21 bits, so a trigram's code fits in a uint64
_GAPS = (10, 32)  # "\n" separates tokens/texts, " " separates tokens: no n-gram spans them


def _key(rec: Any) -> tuple[str, str]:
    return rec.name, rec.id


def _bits(slots: Iterable[int] | np.ndarray, size: int) -> int:
    """The bitmap with the given slots set."""
    flags = np.zeros(size, dtype=bool)
    at = slots if isinstance(slots, np.ndarray) else np.fromiter(slots, dtype=np.int64)
    if len(at):
        flags[at] = True
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _compact(slots: np.ndarray, size: int) -> int | np.ndarray:
    """Sorted slots as they are kept: a bitmap once that is smaller (more than 1 slot in 32)."""
    return _bits(slots, size) if len(slots) * 32 > size else slots


def _short_of(text: str) -> set[str]:
    """The 1- and 2-grams of ``text`` that span no whitespace (what ``_short_grams`` indexes)."""
    out: set[str] = set()
    for tok in text.split():
        out.update(tok)
        out.update(tok[i:i + 2] for i in range(len(tok) - 1))
    return out


def _mask_bits(flags: np.ndarray) -> int:
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _codes(text: str) -> np.ndarray:
    """The code points of ``text``, one uint64 each."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)


def _gram_code(gram: str) -> int:
    code = 0
    for ch in gram:
        code = (code << _BITS) | ord(ch)
    return code


def _grams(codes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The codes of the ``n``-grams starting at each position that span no gap, and those positions."""
    size = len(codes) - n + 1
    if size <= 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    gap = np.isin(codes, _GAPS)
    ok = ~gap[:size]
    code = codes[:size].copy()
    for k in range(1, n):
        ok &= ~gap[k:size + k]
        code = (code << np.uint64(_BITS)) | codes[k:size + k]
    at = np.flatnonzero(ok)
    return code[at], at


class _Trigrams:
    """Trigram -> sorted ids of the vocabulary tokens holding it, for ``vocab[:size]`` (immutable)."""

    def __init__(self, vocab: list[str]) -> None:
        self.size = len(vocab)
        codes = _codes("\n".join(vocab))
        owner = np.cumsum(codes == 10, dtype=np.int32)  # token id of each position
        gram, at = _grams(codes, 3)
        tok = owner[at]
        order = np.argsort(gram, kind="stable")  # stable: token ids stay ascending within a trigram
        gram, tok = gram[order], tok[order]
        keep = np.ones(len(gram), dtype=bool)
        keep[1:] = (gram[1:] != gram[:-1]) | (tok[1:] != tok[:-1])
        gram, tok = gram[keep], tok[keep]
        starts = np.flatnonzero(np.r_[True, gram[1:] != gram[:-1]]) if len(gram) else np.zeros(0, dtype=np.int64)
        self.keys = gram[starts]
        self.starts = np.r_[starts, len(gram)]
        self.tokens = tok

    def candidates(self, term: str) -> np.ndarray:
        """Ids of the tokens holding every trigram of ``term`` (3 characters or more): a superset of the
        tokens containing it."""
        lists = []
        for code in {_gram_code(term[i:i + 3]) for i in range(len(term) - 2)}:
            at = int(np.searchsorted(self.keys, np.uint64(code)))
            if at == len(self.keys) or int(self.keys[at]) != code:
                return self.tokens[:0]
            lists.append(self.tokens[self.starts[at]:self.starts[at + 1]])
        lists.sort(key=len)
        found = lists[0]
        for other in lists[1:]:
            if len(found) <= 8:  # few enough to confirm directly
                break
            hit = np.searchsorted(other, found)
            hit[hit == len(other)] = 0
            found = found[other[hit] == found]
        return found

    def nbytes(self) -> int:
        return self.keys.nbytes + self.starts.nbytes + self.tokens.nbytes


def _short_sets(vocab: list[str], held: list[list[int]], kept: list[int | list[int]],
                size: int) -> dict[str, int | np.ndarray]:
    """Each character and character pair of the tokens -> the datasets holding it (``held[i]``: the
    sorted slots of ``vocab[i]``, ``kept[i]``: as the index keeps them), kept as ``_compact`` keeps them.
    Vectorised: (gram, token) pairs from the joined vocabulary, grouped by gram; a common token (kept as
    a bitmap) adds its bitmap, the others' slots are gathered from one flat array."""
    codes = _codes("\n".join(vocab))
    owner = np.cumsum(codes == 10, dtype=np.int64)
    grams, toks = [], []
    for n in range(1, SHORT + 1):
        gram, at = _grams(codes, n)
        grams.append(gram | np.uint64((n - 1) << 62))  # tag pairs: (0, c) must not collide with c
        toks.append(owner[at])
    gram, tok = np.concatenate(grams), np.concatenate(toks)
    order = np.argsort(gram, kind="stable")
    gram, tok = gram[order], tok[order]
    if not len(gram):
        return {}
    starts = np.flatnonzero(np.r_[True, gram[1:] != gram[:-1]])
    bounds = np.r_[starts, len(gram)]
    lens = np.fromiter(map(len, held), dtype=np.int64, count=len(held))
    common = np.fromiter((isinstance(k, int) for k in kept), dtype=bool, count=len(kept))
    offsets = np.r_[0, np.cumsum(lens)]
    flat = np.fromiter(chain.from_iterable(held), dtype=np.int32, count=int(offsets[-1]))
    rare = np.flatnonzero(~common[tok])  # pairs whose token's slots are gathered
    counts = lens[tok[rare]]
    ends = np.cumsum(counts)
    slots = flat[np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(offsets[tok[rare]] - (ends - counts), counts)]
    cut = np.r_[0, ends][np.searchsorted(rare, bounds)]  # where each gram's gathered slots start
    heavy_at = np.flatnonzero(common[tok])
    heavy_cut = np.searchsorted(heavy_at, bounds)  # where each gram's common tokens start in heavy_at
    mask = (1 << _BITS) - 1
    out: dict[str, int | np.ndarray] = {}
    for g, first in enumerate(starts.tolist()):
        code = int(gram[first])
        text = chr(code & mask) if code < 1 << 62 else chr((code >> _BITS) & mask) + chr(code & mask)
        mine = slots[cut[g]:cut[g + 1]]
        heavy = np.unique(tok[heavy_at[heavy_cut[g]:heavy_cut[g + 1]]]).tolist()
        if not heavy:
            out[text] = _compact(np.unique(mine), size)
            continue
        bits = _bits(mine, size)
        for t in heavy:
            bits |= kept[t]  # type: ignore[operator]
        out[text] = bits
    return out


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
        # text tokens of the slots below base, as built (freed slots stay until a rebuild); token id = position
        self.vocab: list[str] = []
        self.common = np.zeros(0, dtype=bool)  # token id -> kept as a bitmap in ``bitmaps``
        self.bitmaps: dict[int, int] = {}  # common token id -> its datasets
        self.offsets = np.zeros(1, dtype=np.int64)  # rare token id i -> flat[offsets[i]:offsets[i + 1]]
        self.flat = np.zeros(0, dtype=np.int32)  # the rare tokens' slots, one after another
        self.trigrams = _Trigrams([])
        self.short: dict[str, int | np.ndarray] = {}  # 1- and 2-grams -> bitmap, or sorted slots while rare
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
        held = list(tokens.values())
        kept: list[int | list[int]] = [(_bits(s, n) if len(s) >= dense else s) for s in held]
        idx.vocab = list(tokens)
        idx.common = np.fromiter((isinstance(k, int) for k in kept), dtype=bool, count=len(kept))
        idx.bitmaps = {i: k for i, k in enumerate(kept) if isinstance(k, int)}
        rare = [s if isinstance(k, list) else [] for s, k in zip(held, kept, strict=True)]
        idx.offsets = np.r_[0, np.cumsum(np.fromiter(map(len, rare), dtype=np.int64, count=len(rare)))]
        idx.flat = np.fromiter(chain.from_iterable(rare), dtype=np.int32, count=int(idx.offsets[-1]))
        idx.trigrams = _Trigrams(idx.vocab)
        idx.short = _short_sets(idx.vocab, held, kept, n)
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
        idx.postings, idx.short = dict(self.postings), dict(self.short)
        idx.vocab, idx.common, idx.bitmaps = self.vocab, self.common, self.bitmaps
        idx.offsets, idx.flat, idx.trigrams = self.offsets, self.flat, self.trigrams
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
        gained: list[tuple[int, str]] = []  # (slot bit, text) of the added records, for the term memo
        short_gained: defaultdict[str, list[int]] = defaultdict(list)  # 1-/2-gram -> added slots
        for rec in added:
            slot = len(idx.records)
            idx.records.append(rec)
            idx.slot_of[rec.id] = slot
            bit = 1 << slot
            idx.alive |= bit
            for p in _postings(rec):
                idx.postings[p] = idx.postings.get(p, 0) | bit
            gained.append((bit, rec._haystack))
            for gram in _short_of(rec._haystack):
                short_gained[gram].append(slot)
        size = len(idx.records)
        for gram, slots in short_gained.items():
            held = idx.short.get(gram)
            if held is None:
                idx.short[gram] = _compact(np.array(slots, dtype=np.int32), size)
            elif isinstance(held, int):
                idx.short[gram] = held | _bits(slots, size)
            else:
                idx.short[gram] = _compact(np.concatenate([held, np.array(slots, dtype=np.int32)]), size)
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

    def of_ids(self, ids: Iterable[str]) -> int:
        """The live datasets among ``ids`` (a principal's dataset scope; unknown ids are ignored)."""
        bits = 0
        for i in ids:
            slot = self.slot_of.get(i)
            if slot is not None:
                bits |= 1 << slot
        return bits & self.alive

    def term(self, term: str) -> int:
        """The datasets whose search text contains ``term`` (lower-case, no whitespace); freed slots may be
        set (callers intersect with readable datasets, which are alive)."""
        found = self.terms.get(term)
        if found is None:
            if len(term) <= SHORT:
                held = self.short.get(term, 0)
                found = held if isinstance(held, int) else _bits(held, len(self.records))
            else:
                found = self._built_containing(term)
                tail = [s for s in range(self.base, len(self.records))
                        if (rec := self.records[s]) is not None and term in rec._haystack]
                if tail:
                    found |= _bits(tail, len(self.records))
            with self._memo_lock:
                if len(self.terms) >= TERM_MEMO:
                    del self.terms[next(iter(self.terms))]
                self.terms[term] = found
        return found

    def _built_containing(self, term: str) -> int:
        """The slots below ``base`` whose text holds ``term`` (3 characters or more): the union over the
        tokens containing it, found through the trigram table."""
        ids = self.trigrams.candidates(term)
        if len(term) > 3:  # one trigram (3 characters) needs no confirmation
            vocab = self.vocab
            ids = np.array([i for i in ids.tolist() if term in vocab[i]], dtype=np.int64)
        found = 0
        common = self.common[ids]
        for i in ids[common].tolist():
            found |= self.bitmaps[i]
        rare = ids[~common]
        if len(rare):
            first, counts = self.offsets[rare], self.offsets[rare + 1] - self.offsets[rare]
            ends = np.cumsum(counts)
            slots = self.flat[np.arange(int(ends[-1])) + np.repeat(first - (ends - counts), counts)]
            found |= _bits(slots, len(self.records))
        return found

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
