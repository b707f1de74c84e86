"""The indexed catalog search (``gateway/catalog/index.py``) answers exactly what the linear filter
(``catalog._Criteria.select`` over the caller's readable list) answers: a randomized catalog, many filter
combinations, Admin / role / user-ACL callers, every page walked by cursor, before and after changes
reloaded by version (incremental index updates and the in-memory rebuild)."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest

from chalicelib.core import clock
from chalicelib.core.authz import Principal
from chalicelib.core.ids import new_id
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import models
from chalicelib.gateway.catalog import index as catalog_index
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.catalog import versions as catalog_versions
from tests.functional.conftest import Tenant

WORDS = ["orders", "Orders", "customer", "cust", "tickets", "invoice", "évents", "ßtraße", "a", "0", "x_1", "rde"]
OWNERS = ["ann@example.com", "ANN@example.com", "bob@example.com", "cy@example.com"]
CLASSES = list(catalog.CLASSIFICATIONS)
POLICIES = list(catalog.FIELD_POLICIES)


def _item(rnd: random.Random, ws: str, ds_id: str, connectors: list[str]) -> Any:
    now = clock.now()
    fields = [{"name": f"{rnd.choice(WORDS)}_{rnd.randint(0, 3)}", "type": "STRING",
               "classification": rnd.choice(CLASSES + ["bogus"]), "policy": rnd.choice(POLICIES)}
              for _ in range(rnd.randint(0, 4))]
    acl = rnd.sample([{"type": "role", "id": "member"}, {"type": "role", "id": "viewer"},
                      {"type": "user", "id": "usr_pat"}, {"type": "group", "id": "g1"}], rnd.randint(0, 2))
    name = f"{rnd.choice(WORDS)}{rnd.choice(['', '_', ' '])}{rnd.randint(0, 30)}"  # names repeat: id breaks ties
    return models.datasets("us-east-1")(
        ws, ds_id, name=name, connector_id=rnd.choice(connectors + [None]), owner=rnd.choice(OWNERS),
        description=" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, 4))),
        classification=rnd.choice(CLASSES), schema=json.dumps(fields), acl=json.dumps(acl), data_prefix=None,
        row_count=0, last_synced_at=clock.iso(now - rnd.randint(0, 86400 * 4)) if rnd.random() < 0.8 else None,
        created_at=clock.iso(now - 86400 * 5), updated_at=clock.iso(now))


def _principal(t: Tenant, roles: tuple[str, ...], user_id: str) -> RequestScope:
    return RequestScope(Principal(user_id=user_id, workspace_id=t.workspace_id, roles=roles, email=t.email,
                                  amr=("pwd",), token_id="tok_test"), t.region)


def _filters(rnd: random.Random, connectors: list[str]) -> catalog.SearchFilters:
    pick = rnd.random
    text = " ".join(rnd.choice(WORDS + ["ord", "ers", "_1", "table", "ORD", "zzz"])
                    for _ in range(rnd.randint(1, 3))) if pick() < 0.7 else None
    return catalog.SearchFilters(
        text=text, owner=rnd.choice(OWNERS + ["nobody@example.com"]) if pick() < 0.3 else None,
        connector_id=rnd.choice(connectors + ["conn_unknown"]) if pick() < 0.3 else None,
        classification=rnd.choice(CLASSES).lower() if pick() < 0.3 else None,
        fresher_than=rnd.choice(["PT1H", "P1D", "P3D"]) if pick() < 0.3 else None,
        field_classification=rnd.choice(CLASSES) if pick() < 0.3 else None)


def _walk(scope: RequestScope, filters: catalog.SearchFilters, limit: int) -> tuple[list[str], list[int], bool]:
    """Every id of every page, each page's total_count, and whether has_previous was right throughout."""
    ids: list[str] = []
    totals: list[int] = []
    after, previous_ok = None, True
    while True:
        page = catalog.search(scope, filters, limit=limit, after=after)
        ids += [d["id"] for d in page["items"]]
        totals.append(page["total_count"])
        previous_ok &= page["has_previous"] == (after is not None and len(ids) > len(page["items"]))
        if not page["has_more"]:
            assert page["next_cursor"] is None
            return ids, totals, previous_ok
        after = page["next_cursor"]


def _linear(scope: RequestScope, filters: catalog.SearchFilters) -> list[str]:
    snap = catalog.snapshot_of(scope)
    criteria = catalog._Criteria.of(filters)
    found = criteria.select(catalog.readable(scope, snap), admin=catalog.is_admin(scope.principal), now=clock.now())
    return [r.id for r in found]


def _check(t: Tenant, rnd: random.Random, connectors: list[str], rounds: int) -> int:
    callers = [_principal(t, ("admin",), t.user_id), _principal(t, ("member",), "usr_someone"),
               _principal(t, ("member",), "usr_pat")]  # ACLs naming the viewer role or a group match none
    nonempty = 0
    for _ in range(rounds):
        filters, caller = _filters(rnd, connectors), rnd.choice(callers)
        expected = _linear(caller, filters)
        ids, totals, previous_ok = _walk(caller, filters, rnd.choice([1, 3, 7, 25, 100]))
        assert ids == expected, filters
        assert set(totals) == {len(expected)}
        assert previous_ok
        nonempty += bool(expected)
    return nonempty


def _change(t: Tenant, rnd: random.Random, ids: list[str], connectors: list[str], n: int) -> None:
    """As another container: rewrite, add or delete ``n`` datasets, then record the change."""
    touched = []
    for _ in range(n):
        roll = rnd.random()
        if roll < 0.2:
            ds_id = new_id("ds")
            ids.append(ds_id)
        elif roll < 0.3 and len(ids) > 10:
            ds_id = ids.pop(rnd.randrange(len(ids)))
            models.datasets("us-east-1").get(t.workspace_id, ds_id).delete()
            touched.append(ds_id)
            continue
        else:
            ds_id = rnd.choice(ids)
        _item(rnd, t.workspace_id, ds_id, connectors).save()
        touched.append(ds_id)
    catalog_versions.record_change("us-east-1", t.workspace_id, datasets=touched)


@pytest.mark.parametrize("seed", [1, 2])
def test_indexed_search_equals_the_linear_filter(tenant: Tenant, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog_index, "TAIL_MIN", 12)  # so the in-memory rebuild also happens here
    builds = []
    real_build = catalog_index.CatalogIndex.build.__func__

    def counting_build(cls: type[catalog_index.CatalogIndex], ordered: list[Any]) -> catalog_index.CatalogIndex:
        builds.append(len(ordered))
        return real_build(cls, ordered)

    monkeypatch.setattr(catalog_index.CatalogIndex, "build", classmethod(counting_build))
    rnd = random.Random(seed)
    connectors = [new_id("conn") for _ in range(3)]
    ids = [new_id("ds") for _ in range(160)]
    with models.datasets("us-east-1").batch_write() as batch:
        for ds_id in ids:
            batch.save(_item(rnd, tenant.workspace_id, ds_id, connectors))
    catalog.invalidate()
    assert _check(tenant, rnd, connectors, 120) > 40  # most combinations find something
    full, partial = catalog.stats.full_loads, catalog.stats.partial_loads
    builds.clear()
    appended = 0
    for _ in range(6):
        _change(tenant, rnd, ids, connectors, rnd.randint(3, 8))
        _check(tenant, rnd, connectors, 30)
        index = catalog.snapshot(tenant.region, tenant.workspace_id).index
        appended += len(index.records) > index.base
    assert builds and appended  # both the in-memory rebuild and appended slots were searched
    assert catalog.stats.full_loads == full  # every change above went through the incremental path
    assert catalog.stats.partial_loads == partial + 6
    assert len(catalog.snapshot(tenant.region, tenant.workspace_id).index.slot_of) == len(ids)


def test_a_term_is_matched_inside_words_as_before(tenant: Tenant) -> None:
    """Substring semantics (not whole tokens): 'rde' finds 'orders', across names, descriptions and
    non-DENY field names only."""
    cls = models.datasets("us-east-1")
    now = clock.iso()

    def put(name: str, description: str, fields: list[dict[str, str]]) -> None:
        cls(tenant.workspace_id, new_id("ds"), name=name, connector_id=None, owner="o@example.com",
            description=description, classification="INTERNAL", schema=json.dumps(fields),
            acl=json.dumps([{"type": "role", "id": "member"}]), data_prefix=None, row_count=0,
            last_synced_at=None, created_at=now, updated_at=now).save()

    put("orders", "", [])
    put("x", "Big ORDERS table", [])
    put("y", "", [{"name": "border_id", "policy": "ALLOW"}])
    put("z", "", [{"name": "border_id", "policy": "DENY"}])
    catalog.invalidate()
    admin = _principal(tenant, ("admin",), tenant.user_id)
    names = [d["name"] for d in catalog.search(admin, catalog.SearchFilters(text="RDE"))["items"]]
    assert names == ["orders", "x", "y"]
    assert catalog.search(admin, catalog.SearchFilters(text="rde big"))["total_count"] == 1


class _Rec:
    """The fields of a catalog record the index reads (``catalog.DatasetRecord`` has more)."""

    def __init__(self, rnd: random.Random, words: list[str]) -> None:
        self.id = new_id("ds")
        self.name = rnd.choice(words) + str(rnd.randint(0, 9))
        self.classification, self.connector_id, self.owner = "INTERNAL", None, "o@example.com"
        self.acl_keys, self.fields, self.fresh_since = frozenset({"role:member"}), [], 0.0
        text = [self.name] + [rnd.choice(words) for _ in range(rnd.randint(0, 5))]
        self._haystack = rnd.choice([" ", "\t", "\n", " \u00a0"]).join(text).lower()


UNICODE = ["straße", "ß", "évents", "naïve", "İstanbul", "ǅemal", "日本語データ", "😀emoji", "x\u0301y", "ſs"]


def _terms_of(rnd: random.Random, records: list[_Rec]) -> list[str]:
    """Every 1- and 2-character substring of some texts, longer ones, misses and non-ASCII terms."""
    out = {"zz", "q", "qqq", "ß", "ss", "é", "i̇", "😀", "語デ", "本語デー", "\u0301", "a\ud800"}
    for rec in rnd.sample(records, 12):
        for tok in rec._haystack.split():
            for i in range(len(tok)):
                out.update(tok[i:i + n] for n in (1, 2, 3, 4, 7) if i + n <= len(tok))
    return sorted(out)


def _ids(index: catalog_index.CatalogIndex, bits: int) -> set[str]:
    return {index.records[s].id for s in range(len(index.records)) if bits >> s & 1}


def _agrees(index: catalog_index.CatalogIndex, records: list[_Rec], terms: list[str]) -> None:
    index.terms.clear()  # every term is looked up for the first time
    for term in terms:
        assert _ids(index, index.term(term) & index.alive) == {r.id for r in records if term in r._haystack}, term


def test_a_new_term_of_any_length_finds_what_the_linear_scan_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """First lookups (memo empty) through the trigram table, the 1- and 2-gram sets and the datasets added
    after the last build, before and after incremental updates and a rebuild; updates leave the old index
    as it was."""
    monkeypatch.setattr(catalog_index, "TAIL_MIN", 40)
    rnd = random.Random(7)
    words = WORDS + UNICODE + ["customers", "tickets_2024", "rde", "orderly"]
    records = [_Rec(rnd, words) for _ in range(300)]
    index = catalog_index.CatalogIndex.build(sorted(records, key=lambda r: (r.name, r.id)))
    terms = _terms_of(rnd, records)
    assert len(terms) > 150 and any(len(t) <= 2 for t in terms) and any(not t.isascii() for t in terms)
    _agrees(index, records, terms)
    rebuilt = tails = 0
    for round_ in range(6):
        fresh_words = [f"neu{round_}wort", f"ü{round_}", "qqq" * (round_ + 1)]  # tokens the trigrams lack
        removed = rnd.sample(records, 10)
        changed = [_Rec(rnd, words + fresh_words) for _ in range(15)]
        before = {t: _ids(index, index.term(t) & index.alive) for t in terms[:40]}
        newer = index.updated(removed, changed)
        assert {t: _ids(index, index.term(t) & index.alive) for t in terms[:40]} == before  # old unchanged
        records = [r for r in records if r not in removed] + changed
        index = newer
        rebuilt += len(index.records) == index.base
        tails += len(index.records) > index.base
        _agrees(index, records, terms + fresh_words + [w[1:4] for w in fresh_words] + [w[:2] for w in fresh_words])
    assert rebuilt and tails  # both datasets past the last build and a rebuilt table were searched


def test_a_word_added_in_another_container_is_found_by_its_first_search(tenant: Tenant) -> None:
    """A dataset written elsewhere with a word the catalog never held: after the reload by version, a
    first search for the word, an inner part of it and its first two letters and letter finds it."""
    cls = models.datasets("us-east-1")
    now = clock.iso()

    def put(name: str, description: str) -> str:
        ds_id = new_id("ds")
        cls(tenant.workspace_id, ds_id, name=name, connector_id=None, owner="o@example.com",
            description=description, classification="INTERNAL", schema="[]",
            acl=json.dumps([{"type": "role", "id": "member"}]), data_prefix=None, row_count=0,
            last_synced_at=None, created_at=now, updated_at=now).save()
        return ds_id

    for i in range(20):
        put(f"orders_{i}", "daily table")
    catalog.invalidate()
    member = _principal(tenant, ("member",), "usr_someone")
    assert catalog.search(member, catalog.SearchFilters(text="wxy"))["total_count"] == 0
    new = put("Kwxyzä_ledger", "Überweisungen")
    catalog_versions.record_change("us-east-1", tenant.workspace_id, datasets=[new])
    for text in ["kwxyzä_ledger", "WXYZ", "kw", "ä", "zä_l", "überw", "üb", "ü"]:
        page = catalog.search(member, catalog.SearchFilters(text=text))
        assert [d["id"] for d in page["items"]] == [new], text
    index = catalog.snapshot(tenant.region, tenant.workspace_id).index
    assert index.slot_of[new] >= index.base and "kwxyzä_ledger" not in index.vocab  # found past the build
    assert catalog.search(member, catalog.SearchFilters(text="d"))["total_count"] == 21  # orders_*, ledger
