"""How a run step fails: the error code and message recorded on the run."""
from __future__ import annotations


class StepFailed(Exception):
    """``error`` goes on the run (and its events and audit); ``for_model`` is what the model loop tells the
    model, which may be more (a tool's own message, kept off the run once the run is tainted)."""

    def __init__(self, code: str, message: str, *, for_model: str | None = None) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message}
        self.for_model = {"code": code, "message": for_model if for_model is not None else message}
