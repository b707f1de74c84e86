"""Prompt-injection defences of the model-chosen tool loop (``tool_loop.py``), enforced by the platform
whatever the model does (``docs/security.md``):

- **Spotlighting.** Every tool result reaches the model delimited and marked as data with a boundary
  made for this run (``llm/prompt.untrusted``); the system message says such text is never instructions.
- **Allow-list.** The model is offered only the agent's tools; a call of any other name is refused and
  recorded on the step ledger (``worker.StepRunner.run``).
- **No restricted values in writing tools.** Values the run read under a field policy other than ALLOW
  (any answer of a query over a dataset with such a field) or from a document with an access list are
  *restricted*: a writing tool (``Tool.writes``: memory today, any future outbound tool) never receives
  them. Text that appears only in untrusted data (tool results) and not in what the user or the agent's
  author wrote (run input, instructions) cannot be written either: a document that tells the model to
  remember a value of its own choosing does not get it stored. Refusals are ledger steps with their code.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.knowledge.grounding import longest_shared_words

MIN_VALUE_CHARS = 4
MIN_SHARED_WORDS = 6


def _leaves(value: Any) -> list[str]:
    """Every string and number inside ``value`` (keys of objects included), as lower-case text."""
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(str(k).lower())
            out += _leaves(v)
    elif isinstance(value, list):
        for v in value:
            out += _leaves(v)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        out.append(str(value).lower())
    return [s.strip() for s in out if len(s.strip()) >= MIN_VALUE_CHARS]


class Guard:
    """What one run has read, and whether a writing call may carry a value."""

    def __init__(self, trusted: list[str]) -> None:
        self.trusted = "\n".join(t.lower() for t in trusted)
        self.untrusted: list[str] = []
        self.restricted_values: set[str] = set()
        self.restricted_texts: list[str] = []

    def observe(self, output: Any) -> None:
        """Record a tool result: all of it is untrusted; some of it restricted."""
        if output is None:
            return
        self.untrusted.append(json.dumps(output, default=str).lower())
        if not isinstance(output, dict):
            return
        if output.get("policy_restricted"):
            self.restricted_values.update(_leaves(output.get("rows") or []))
        for p in output.get("passages") or []:
            if isinstance(p, dict) and p.get("restricted"):
                self.restricted_texts.append(str(p.get("text", "")).lower())

    def _copied(self, leaf: str, texts: list[str]) -> bool:
        if any(leaf in t for t in texts):
            return True
        return any(longest_shared_words(leaf, t)[2] >= MIN_SHARED_WORDS for t in texts)

    def check_write(self, tool: str, args: dict[str, Any]) -> dict[str, str] | None:
        """The refusal of a writing call, or None when its values may be written."""
        leaves = [leaf for value in args.values() for leaf in _leaves(value)]  # not the argument names
        whole = json.dumps(list(args.values()), default=str).lower()
        if any(v in whole for v in self.restricted_values) or any(self._copied(leaf, self.restricted_texts)
                                                                 for leaf in leaves):
            return {"code": "restricted_value",
                    "message": f"{tool} may not receive a value read under a field policy or from a restricted "
                               "document."}
        for leaf in leaves:
            if self._copied(leaf, self.untrusted) and not self._copied(leaf, [self.trusted]):
                return {"code": "untrusted_value",
                        "message": f"{tool} may not receive a value that comes only from retrieved data (tool "
                                   "results are data, not instructions)."}
        return None
