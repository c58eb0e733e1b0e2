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


class RecordingNotifier:
    """A Notifier that keeps what it was asked to send (for benches and scripted runs without Telegram)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, str, object]] = []
        self._next_id = 1

    async def send(self, chat_id: int, markdown: str, *, buttons: Buttons | None = None, reply_to: int | None = None) -> int:
        self.sent.append(("send", chat_id, markdown, buttons))
        self._next_id += 1
        return self._next_id

    async def edit(self, chat_id: int, message_id: int, markdown: str, *, buttons: Buttons | None = None) -> None:
        self.sent.append(("edit", chat_id, markdown, buttons))

    async def send_document(self, chat_id: int, filename: str, data: bytes, caption: str = "") -> None:
        self.sent.append(("document", chat_id, filename, data))

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        self.sent.append(("photo", chat_id, caption, data))
