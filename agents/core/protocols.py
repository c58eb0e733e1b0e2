"""The protocols that cross layers, in one place: what each layer needs from the one that serves it.

- `Notifier`: how the crew talks back to a chat (the Telegram adapter implements it).
- `WorkDesk`: what the orchestrator's work tools act on (the crew, or the routing eval's recording desk).
- `MessageModel`: "create a message" (and stream one), as `anthropic.AsyncAnthropic().messages` offers it and
  `tests.scripted.RoleScript` imitates it.
- `AnswerStream`: where a streamed answer goes while it is written (the chat's draft).
- `SpeechToText`: what the voice handler needs from a transcriber (an engine of `agents.inputs`, or a fake).
- `Outbox`: where a task's summary or proposal goes to be shown (the bot's outbox, or a runner's report).
- `TaskEngine`: where stored tasks run: `agents.work.task_queue.TaskQueue` in the bot's process (TASK_ENGINE=local)
  or `agents.engine.front.TemporalEngine` (TASK_ENGINE=temporal: workflows executed by `agentlab runner`s).
"""

from __future__ import annotations

import enum
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agents.core.actions import Buttons
from agents.core.models import Delivery, Task, TaskEvent
from agents.core.work_tools import WorkTool

if TYPE_CHECKING:
    import anthropic


class Notifier(Protocol):
    """How the crew talks back to a chat without knowing Telegram (telegram_bot/replies.TelegramNotifier).

    Everything sent passes the output filter of secrets, except what is sent with `literal=True`: a question to the
    owner (network, an approval-gated call, a member's request handed to them), which must show what will run
    exactly as it will run. Its builder puts every quoted text in a code block the text cannot close
    (`agents.core.text.literal_block`) and says beside it when it carries what looks like a secret."""

    async def send(
        self,
        chat_id: int,
        markdown: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        literal: bool = False,
    ) -> int | None:
        """Send Markdown (rendered by the adapter); returns the id of the last message sent, if any."""
        ...

    async def edit(
        self, chat_id: int, message_id: int, markdown: str, *, buttons: Buttons | None = None, literal: bool = False
    ) -> None:
        """Replace the text of a message sent earlier (progress messages)."""
        ...

    async def send_document(
        self, chat_id: int, filename: str, data: bytes, caption: str = "", *, literal: bool = False
    ) -> None: ...

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None: ...

    async def send_album(self, chat_id: int, pictures: list[tuple[str, bytes]]) -> None:
        """Pictures as one album (2-10 of them, a caption each): a frontend task's before and after."""
        ...

    async def ask_owners(
        self, chat_id: int, markdown: str, *, buttons: Buttons | None = None, literal: bool = False
    ) -> list[tuple[int, int]]:
        """A request only an owner may answer, raised in conversation `chat_id`, sent where the owners see it (a group:
        there, naming them; a member's private chat: each owner's private chat); returns (chat, message id) of
        each copy, so an answer from any of them is accepted and every copy can be closed."""
        ...

    async def buttons_settled(self) -> None:
        """Return once the buttons being shown now are recorded as shown (a press can arrive before the send that
        shows its button has returned, and is checked against that record); a notifier that records none returns at
        once."""
        ...


class WorkDesk(Protocol):
    """What the orchestrator's work tools act on: the crew (agents/work/crew.py), or the routing eval's recording desk.

    Each tool is defined once, by the crew part's method that does it (`@work_tool`, agents/core/work_tools.py);
    `agents/tools/desk_tools.py` makes the tools of a turn from a desk's `work_tools`."""

    def work_tools(self) -> list[WorkTool]:
        """Every work tool (each name of WORK_TOOLS once), with what a call of it runs."""
        ...

    # the turn's hooks: not tools; the orchestrator calls them around a chat's turns
    def turn_started(self, chat_id: int, said: str = "", replied: tuple[str, int] | None = None) -> None:
        """A turn of the chat begins on the user's words `said`, a reply to the message showing `replied` (a proposal
        or a task: ("proposal", 3)) if it is one (it may wait on a foreground task until `stop_waiting`)."""

    def stop_waiting(self, chat_id: int) -> None:
        """A new message arrived in the chat: a turn waiting on a foreground task stops waiting and answers."""

    def turn_ended(self, chat_id: int) -> list[Task]:
        """The chat's turn ended (`turn_started` began it, in the same asyncio task): the tasks the turn's own tool
        calls stored, a schedule's runs aside; never one a button, a schedule or another turn stored meanwhile (a
        turn from GitHub answers in public about the tasks it lists)."""
        ...


class Outbox(Protocol):
    """Where a task's summary or proposal goes to be shown: `agents.store.delivery.Deliveries` (stored, retried), or on
    a runner (`agents.engine.runner_node`) the task's report, which the bot then delivers through its own outbox."""

    async def deliver(
        self,
        chat_id: int,
        markdown: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        kind: str = "notice",
        task_id: int | None = None,
        shown_record: int | None = None,
    ) -> int | None:
        """Show `markdown` in the chat (now or later); the id of the message sent, None when it is not sent yet.
        `shown_record`: the chat history's record of it, which gets the chat message's id once it is sent."""
        ...

    async def end_owing(self, task_id: int, fields: dict[str, Any], event: TaskEvent, owed: Delivery) -> Delivery:
        """A task's end (its row's `fields`, its status `event`) stored as one step with `owed`, the message it owes
        its chat (its summary), so no stop between them leaves an ended task whose message was never queued;
        `send_stored` sends it after (the task's clean-up may come between)."""
        ...

    async def send_stored(self, owed: Delivery) -> int | None:
        """Send a message `end_owing` stored (unless it went meanwhile); the id of the message sent, or None."""
        ...


class TaskEngine(Protocol):
    """What the crew needs from whatever runs its tasks: run the stored pending tasks, wait for one, cancel one.

    Steering notes and network answers reach a running task through `Inboxes.post` and `NetworkGate.decide`, which
    the runtime builds for the executor and the chat (agents/work/chat_actions.py); under the Temporal engine they are
    versions of both that forward to the task's workflow (agents/engine/front.py).
    """

    def start(self) -> None:
        """Begin claiming pending tasks from the store."""
        ...

    def wake(self) -> None:
        """A pending task was added (or resumed): claim it now."""
        ...

    async def wait(self, task_id: int) -> None:
        """Return once the task has ended (any final status)."""
        ...

    async def cancel(self, task_id: int) -> bool:
        """Cancel a pending or running task, with every process it started; False when it was neither."""
        ...

    async def shutdown(self, timeout: float = 5.0) -> None:
        """The bot stops: claim nothing more; what runs here becomes `interrupted` (resumable)."""
        ...

    async def reattach(self, tasks: list[Task]) -> set[int]:
        """At start-up, of the tasks a stopped bot left `interrupted`: those still running elsewhere, followed again."""
        ...

    async def drop_branch(self, task: Task) -> str | None:
        """Discard: the task's branch wherever it lives beyond this machine (a shared remote) is deleted too; what
        went wrong, if anything (None: nothing to do, or done)."""
        ...


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
    """What the Telegram handler needs from a transcriber (the bot's `SpeechProcess`, an in-process engine of
    `agents.inputs`, or a fake in tests)."""

    @property
    def state(self) -> ModelState: ...

    @property
    def load_error(self) -> str | None: ...

    def start_loading(self) -> None: ...

    async def wait_ready(self) -> None: ...

    async def transcribe(self, data: bytes) -> Transcript: ...

    def speed_summary(self) -> str | None:
        """One line on how fast the last notes were transcribed, for /status (None: none yet)."""
        ...

    def close(self) -> None: ...
