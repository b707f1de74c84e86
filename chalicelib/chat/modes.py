"""Answer modes: whether a chat may answer from the model's general knowledge when its sources do not.

The workspace decides (setting ``answer_mode``: ``knowledge_only``, the default, or ``knowledge_first``);
each chat chooses (``mode``: ``knowledge``, the default, or ``general_allowed``, refused with 403
``general_answers_not_allowed`` where the workspace does not allow it). A chat that may answer generally
tells the model so; when the grounded answer has no statement the sources support (or nothing was
retrieved), the model's text is shown as a general answer instead of the "not supported" note: labelled
``origin: general`` (the message and each statement), without citations, its statements ``general`` (never
``supported``, outside the support ratio). An extractive answer (no generative model) is never general,
nor is a stopped one. The choice is checked again at each answer: a workspace that stops allowing general
answers stops them in every chat at once.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.http.errors import ApiError, validation_error
from chalicelib.core.tenancy import RequestScope
from chalicelib.core.workspace_settings import answer_mode

KNOWLEDGE = "knowledge"
GENERAL_ALLOWED = "general_allowed"
MODES = (KNOWLEDGE, GENERAL_ALLOWED)
GENERAL = "general"  # the origin of a general answer and of its statements
GENERAL_NOTICE = "General answer - not from your workspace's sources."
GENERAL_RULE = (
    "If the numbered passages do not answer the question (or there are none), you may answer from general "
    "knowledge instead: answer plainly and cite no passage. The user sees such an answer labelled as not "
    "coming from their workspace's sources.")


def workspace_allows(scope: RequestScope) -> bool:
    return answer_mode(scope) == "knowledge_first"


def not_allowed() -> ApiError:
    return ApiError(403, "general_answers_not_allowed",
                    "This workspace answers from its knowledge only: general answers are not allowed. An Admin can "
                    "allow them (workspace setting answer_mode: knowledge_first).")


def check(scope: RequestScope, value: Any) -> str:
    """The chat mode a request asks for (400 for an unknown value, 403 where the workspace does not allow it)."""
    if value is None:
        return KNOWLEDGE
    if value not in MODES:
        raise validation_error([{"field": "mode", "message": "must be knowledge or general_allowed"}])
    if value == GENERAL_ALLOWED and not workspace_allows(scope):
        raise not_allowed()
    return str(value)


def general_allowed(scope: RequestScope, mode: str | None) -> bool:
    """Whether an answer in a chat of ``mode`` may be general now."""
    return mode == GENERAL_ALLOWED and workspace_allows(scope)


def unanswered(grounding: dict[str, Any], notice: str | None) -> bool:
    """The grounded path found nothing the sources support (the answer was declined or replaced)."""
    return notice in ("unsupported", "not_in_sources") or (
        grounding.get("sentences", 0) > 0 and grounding.get("grounded_sentences", 0) == 0)


def general_grounding(grounding: dict[str, Any]) -> dict[str, Any]:
    """The grounding of a general answer: every statement ``general`` (none checked against the sources, so
    none counts toward the support ratio)."""
    per = [{k: v for k, v in e.items() if k in ("index", "start", "end")} | {
        "status": GENERAL, "origin": GENERAL, "support": 0.0, "cited": False} for e in grounding.get("per_sentence", [])]
    return {"sentences": 0, "grounded_sentences": 0, "ratio": 0.0, "partial_sentences": 0, "unsupported_sentences": 0,
            "general_sentences": len(per), "score": 0.0, "low": False, "per_sentence": per, "origin": GENERAL,
            "spans_of": "content", "method": grounding.get("method")}
