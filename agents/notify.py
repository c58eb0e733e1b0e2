"""How agents talk back to a chat without knowing Telegram: a Notifier protocol the adapter implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Button:
    """An inline button: what it says, and the callback data it sends back (e.g. `proposal:approve:3`)."""

    label: str
    data: str


Buttons = list[list[Button]]


class Notifier(Protocol):
    async def send(
        self, chat_id: int, markdown: str, *, buttons: Buttons | None = None, reply_to: int | None = None
    ) -> int | None:
        """Send Markdown (rendered by the adapter); returns the id of the last message sent, if any."""
        ...

    async def edit(self, chat_id: int, message_id: int, markdown: str, *, buttons: Buttons | None = None) -> None:
        """Replace the text of a message sent earlier (progress messages)."""
        ...

    async def send_document(self, chat_id: int, filename: str, data: bytes, caption: str = "") -> None: ...

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None: ...
