"""How a run step fails: the error code and message recorded on the run."""
from __future__ import annotations


class StepFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message}
