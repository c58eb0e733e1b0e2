"""The protocols that cross layers, in one place: what each layer needs from the one that serves it.

- `Notifier`: how the crew talks back to a chat (the Telegram adapter implements it).
- `WorkDesk`: what the orchestrator's work tools do (the crew implements it).
- `MessageModel`: "create a message" (and stream one), as `anthropic.AsyncAnthropic().messages` offers it and
  `agents.llm.scripted_model.ScriptedModel` imitates it.
- `AnswerStream`: where a streamed answer goes while it is written (the chat's draft).
- `SpeechToText`: what the voice handler needs from a transcriber (an engine of `agents.inputs`, or a fake).
"""

from __future__ import annotations

import enum
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agents.core.actions import Buttons

if TYPE_CHECKING:
    import anthropic


class Notifier(Protocol):
    """How the crew talks back to a chat without knowing Telegram (telegram_bot/replies.TelegramNotifier)."""

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


class WorkDesk(Protocol):
    """What the orchestrator's work tools do; every method returns text for the model."""

    async def start_research(
        self,
        chat_id: int,
        workspace: str,
        request: str,
        refines: int | None = None,
        attachments: list[int] | None = None,
    ) -> str: ...
    async def start_task(
        self,
        chat_id: int,
        workspace: str,
        worker: str,
        instructions: str,
        background: bool,
        acceptance_criteria: list[str] | None = None,
        attachments: list[int] | None = None,
        save_attachments: bool = False,
    ) -> str: ...
    async def approve_proposal(self, chat_id: int, proposal_id: int | None, notes: str | None = None) -> str: ...
    async def reject_proposal(self, chat_id: int, proposal_id: int | None, reason: str | None) -> str: ...
    async def list_tasks(self, chat_id: int) -> str: ...
    async def cancel_task(self, chat_id: int, task_id: int) -> str: ...
    async def message_task(self, chat_id: int, task_id: int, text: str) -> str: ...
    async def get_proposal(self, chat_id: int, proposal_id: int | None) -> str: ...
    async def get_task(self, chat_id: int, task_id: int) -> str: ...
    async def merge_task(self, chat_id: int, task_id: int) -> str: ...
    async def discard_task(self, chat_id: int, task_id: int) -> str: ...
    async def create_workspace(self, name: str) -> str: ...


class MessageModel(Protocol):
    """'Create a message' (and stream one): what `anthropic.AsyncAnthropic().messages` offers."""

    async def create(self, **params: Any) -> anthropic.types.Message: ...

    def stream(self, **params: Any) -> AbstractAsyncContextManager[Any]: ...


class AnswerStream(Protocol):
    """Where a streamed answer goes while it is written (the chat's draft); Telegram-free."""

    async def text(self, delta: str) -> None:
        """More words of the answer."""

    async def activity(self, description: str) -> None:
        """A tool call is being run ('reading calc.py')."""


class ModelState(str, enum.Enum):
    """Where the resident speech model is in its life."""

    not_loaded = "not_loaded"
    loading = "loading"
    ready = "ready"
    failed = "failed"


@dataclass(frozen=True)
class Transcript:
    """The text of one voice note and what it cost to get it."""

    text: str
    language: str | None
    audio_seconds: float
    decode_seconds: float
    transcribe_seconds: float


@runtime_checkable
class SpeechToText(Protocol):
    """What the Telegram handler needs from a transcriber (`Transcriber`, or a fake in tests)."""

    @property
    def state(self) -> ModelState: ...

    @property
    def load_error(self) -> str | None: ...

    def start_loading(self) -> None: ...

    async def wait_ready(self) -> None: ...

    async def transcribe(self, data: bytes) -> Transcript: ...

    def close(self) -> None: ...
