"""ToolError: how a tool call fails, in words meant for the model. Every layer that runs a tool raises it; NotAllowed:
the caller's role does not allow it (a member reaching for an owner's power or another's task), which a chat says in
one sentence and acts on no further.
SendUnavailable: a chat message that could not go now, through no fault of its own (SendTimedOut: its answer did not
come in time, so it may have gone; ChatUnreachable: because of the chat, which cannot be written to until it is heard
from again). MessageGone: a message to edit
that is no longer in the chat."""

from __future__ import annotations


class ToolError(Exception):
    """A tool call failed; `message` is meant for the model (what went wrong and what to do instead)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class NotAllowed(ToolError):
    """The caller may not do this (a role check): one sentence to them, and nothing else happens."""


class SendUnavailable(Exception):
    """The chat platform could not take a message now (unreachable, a 5xx, a timeout, a flood wait): the message is
    fine and a later try may succeed. A notifier raises it so that the outbox keeps trying for as long as it takes,
    where a message refused for itself is given up after a while. `retry_after`: seconds the platform asked the
    chat to wait (a flood wait), when it said."""

    def __init__(self, message: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SendTimedOut(SendUnavailable):
    """No answer came in time: the platform may well have taken the message (its answer was late, not lost), so a try
    again at once would most likely show it twice. The chat platform offers no way to send a message only once
    (Telegram's Bot API has no idempotency key), so a later try can still show it twice: it only comes late enough
    for a slow platform to have answered or recovered."""


class ChatUnreachable(SendUnavailable):
    """The chat itself cannot be written to now (its user blocked the bot, the bot was removed from the group, the
    chat is not found): any message to it would be refused alike, so none is to blame or to be given up. It lasts
    until the chat is heard from again (the user unblocks the bot and writes, the bot is added back). `chat_id`: the
    platform's chat (a forum topic's conversation names its group) that refused."""

    def __init__(self, message: str, chat_id: int) -> None:
        super().__init__(message)
        self.chat_id = chat_id


class MessageGone(Exception):
    """The message to edit is no longer in the chat (its user deleted it): editing it again can only fail again."""
