"""What a chat answer may show: its links and images checked (``knowledge/answer_links``), then grounded.

A link to an outside host keeps its URL when it is on the workspace's allow-list or stands in a source the
answer cites. Which sources are cited is known only after grounding, so ``ground`` checks the links against
every passage retrieved for the answer, grounds, and when a kept URL stands only in passages the answer does
not cite, checks again against the cited ones and grounds again (the set only shrinks, so this ends; it is
one round for almost every answer). The model's text is checked before grounding, so a sentence that lost a
link or an image is never counted as grounded, and ``unverified_answer`` holds the checked text too.

``passages`` is what the stored answer keeps of each retrieved passage (its chunk, dataset, document and
fields, never its text) so that a later read can tell which sources the reader may no longer read
(``chat/redaction.py``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chalicelib.core.tenancy import RequestScope
from chalicelib.core.workspace_settings import answer_link_hosts
from chalicelib.knowledge import answer_links

if TYPE_CHECKING:
    from chalicelib.knowledge.citations import Verified
    from chalicelib.knowledge.entailment_model import Checker
    from chalicelib.knowledge.service import Hit


def rules(scope: RequestScope, hits: list[Hit]) -> answer_links.Rules:
    return answer_links.rules(answer_link_hosts(scope), [h.chunk.text for h in hits])


def guard(scope: RequestScope, hits: list[Hit]) -> answer_links.Guard:
    """The sanitiser of a streamed answer's deltas."""
    return answer_links.Guard(rules(scope, hits))


def ground(text: str, hits: list[Hit], scope: RequestScope, region: str, *, generative: bool,
           question: str, checker: Checker | None = None) -> Verified:
    """The model's text with its links checked, grounded (``knowledge/grounding.ground``)."""
    from chalicelib.knowledge import grounding  # noqa: PLC0415 - knowledge loads NumPy and bm25s: at first use, not at cold start

    allowed = answer_link_hosts(scope)
    pool = list(hits)
    while True:
        clean = answer_links.sanitise(text, answer_links.rules(allowed, [h.chunk.text for h in pool]))
        checked = grounding.ground(clean.text, hits, region, generative=generative, question=question,
                                   checker=checker)
        cited = {c.get("chunk_id") for c in checked.citations}
        narrowed = [h for h in pool if h.chunk.id in cited]
        if len(narrowed) == len(pool):
            return checked
        again = answer_links.sanitise(text, answer_links.rules(allowed, [h.chunk.text for h in narrowed]))
        if again.text == clean.text:
            return checked
        pool = narrowed


def passages(hits: list[Hit]) -> list[dict[str, Any]]:
    """What a stored answer keeps of its retrieved passages (in their order: ``ref`` n is item n-1)."""
    return [{"chunk_id": h.chunk.id, "kind": h.chunk.kind, "dataset_id": h.chunk.dataset_id, "doc": h.chunk.doc,
             "fields": list(h.chunk.fields)} for h in hits]
