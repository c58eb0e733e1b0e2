"""ToolError: how a tool call fails, in words meant for the model. Every layer that runs a tool raises it.
SendUnavailable: a chat message that could not go now, through no fault of its own. MessageGone: a message to edit
that is no longer in the chat."""

from __future__ import annotations


class ToolError(Exception):
    """A tool call failed; `message` is meant for the model (what went wrong and what to do instead)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class SendUnavailable(Exception):
    """The chat platform could not take a message now (unreachable, a 5xx, a timeout, a flood wait): the message is
    fine and a later try may succeed. A notifier raises it so that the outbox keeps trying for as long as it takes,
    where a message refused for itself (the chat blocked the bot, a chat that is gone) is given up after a while."""


class MessageGone(Exception):
    """The message to edit is no longer in the chat (its user deleted it): editing it again can only fail again."""
