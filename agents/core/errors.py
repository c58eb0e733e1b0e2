"""ToolError: how a tool call fails, in words meant for the model. Every layer that runs a tool raises it."""

from __future__ import annotations


class ToolError(Exception):
    """A tool call failed; `message` is meant for the model (what went wrong and what to do instead)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message
