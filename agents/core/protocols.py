"""The protocols that cross layers, in one place: what each layer needs from the one that serves it.

- `Notifier`: how the crew talks back to a chat (the Telegram adapter implements it).
- `WorkDesk`: what the orchestrator's work tools do (the crew implements it).
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
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, runtime_checkable

from agents.core.actions import Buttons
from agents.core.models import Caller, Task

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


@dataclass(frozen=True)
class Arg:
    """A work tool argument's description for the model (in `Annotated[...]`); the type comes from the annotation."""

    description: str


Workspace = Annotated[
    str, Arg("workspace name as listed in the context (loose spelling is resolved); 'self' is the bot's own code")
]
DefaultWorkspace = Annotated[
    str,
    Arg(
        "workspace name as listed in the context (loose spelling is resolved); 'self' is the bot's own code; when "
        "the request names none, the context's 'workspace of this conversation' (an empty string means it too)"
    ),
]
Attachments = Annotated[
    list[int] | None,
    Arg(
        "ids of photos/files the user sent (shown as [attachment #N: …]) that the worker should see, e.g. a "
        "screenshot to match (optional)"
    ),
]
TaskId = Annotated[int, Arg("task number")]
ProposalId = Annotated[int | None, Arg("proposal id (optional)")]
WorkerName = Literal["code", "frontend", "test"]
ScheduleId = Annotated[int, Arg("schedule number (list_schedules shows them)")]


class WorkDesk(Protocol):
    """What the orchestrator's work tools do; every method returns text for the model.

    The one source of the work tools: `agents/tools/desk_tools.py` makes each tool's schema from these signatures
    (argument types and `Arg` descriptions; a parameter without a default is required) and each description from the
    method's docstring. `caller` (the conversation, the request message, the user) is the bot's to set, never the
    model's. The crew (agents/work/crew.py) and the routing eval's desk implement it with the same signatures
    (tests/test_desk_tools.py checks).
    """

    async def start_research(
        self,
        caller: Caller,
        workspace: DefaultWorkspace,
        request: Annotated[str, Arg("what to study and propose, self-contained")],
        refines: Annotated[int | None, Arg("id of the proposal being changed (optional)")] = None,
        attachments: Attachments = None,
    ) -> str:
        """Start the read-only research worker on a workspace; it writes a proposal that is shown to the user with
        Approve/Reject buttons. Use for improvement/refactor/review requests, and to rework a proposal (pass its id
        as refines: the worker then sees that proposal whole and the new one replaces it)."""
        ...

    async def start_task(
        self,
        caller: Caller,
        workspace: DefaultWorkspace,
        worker: Annotated[WorkerName, Arg("code, frontend or test")],
        instructions: Annotated[str, Arg("complete, self-contained instructions for the worker")],
        background: Annotated[bool, Arg("true: run in the background and notify when done; false: wait for it")],
        acceptance_criteria: Annotated[
            list[str] | None,
            Arg("2-5 checkable statements that define done (written from the request); the worker verifies each"),
        ] = None,
        attachments: Attachments = None,
        save_attachments: Annotated[
            bool,
            Arg(
                "also save those files in the worker's checkout (under .agentlab/attachments/, ignored by git), for "
                "work that needs the file itself, e.g. an image to put on a page (default false)"
            ),
        ] = False,
        attempts: Annotated[
            int | None,
            Arg(
                '1-4 (default 1): how many workers try the same task at once, each on its own branch ("try three '
                'ways", "give me 2 versions"); the bot ranks them by their tests and sends one summary with the pick'
            ),
        ] = None,
        first_pass_wins: Annotated[
            bool,
            Arg("with attempts > 1: the first attempt whose tests pass wins and the others are cancelled"),
        ] = False,
    ) -> str:
        """Start a worker that changes code in a workspace (on its own git branch) and reports back."""
        ...

    async def approve_proposal(
        self,
        caller: Caller,
        proposal_id: ProposalId = None,
        notes: Annotated[
            str | None, Arg("small changes to the proposal the user asked for, e.g. 'call it parse_all' (optional)")
        ] = None,
    ) -> str:
        """Approve a pending proposal and start a code worker on it. No id: the chat's only pending proposal (with
        several pending, the tool lists them instead: ask the user which). Small changes the user asked for with the
        approval go in notes; they reach the code worker with the proposal."""
        ...

    async def reject_proposal(
        self,
        caller: Caller,
        proposal_id: ProposalId = None,
        reason: Annotated[str | None, Arg("why (optional)")] = None,
    ) -> str:
        """Reject a pending proposal. No id: the chat's only pending one."""
        ...

    async def list_tasks(self, caller: Caller) -> str:
        """List this chat's recent tasks with their status."""
        ...

    async def cancel_task(self, caller: Caller, task_id: TaskId) -> str:
        """Cancel a running or pending task and kill every process it started."""
        ...

    async def message_task(
        self, caller: Caller, task_id: TaskId, text: Annotated[str, Arg("the note, in the user's words")]
    ) -> str:
        """Pass a note to a running task's worker (it reads it before its next step), e.g. 'also update the
        README'. Only running tasks take notes."""
        ...

    async def get_proposal(self, caller: Caller, proposal_id: ProposalId = None) -> str:
        """Show a proposal whole (no id: the chat's pending one, or the newest)."""
        ...

    async def get_task(self, caller: Caller, task_id: TaskId) -> str:
        """Show one task: status, the worker's report, tests, files changed, branch and commit."""
        ...

    async def merge_task(self, caller: Caller, task_id: TaskId) -> str:
        """Merge a finished task's branch into the branch it started from."""
        ...

    async def discard_task(self, caller: Caller, task_id: TaskId) -> str:
        """Throw a task's work away: stop it if it runs, delete its branch."""
        ...

    async def create_workspace(
        self, caller: Caller, name: Annotated[str, Arg("folder name: letters, digits, - and _ (e.g. portfolio-site)")]
    ) -> str:
        """Create a new, empty project: a git repository under the workspaces folder (for a new project that has no
        folder yet, e.g. 'build me a portfolio site'); then start work in it."""
        ...

    async def schedule_task(
        self,
        caller: Caller,
        workspace: DefaultWorkspace,
        worker: Annotated[Literal["code", "frontend", "test", "research"], Arg("code, frontend, test or research")],
        instructions: Annotated[
            str, Arg("complete, self-contained instructions for each run (research: what to study and propose)")
        ],
        cron: Annotated[
            str | None,
            Arg(
                "5-field cron expression in the owner's time zone: minute hour day-of-month month weekday "
                "(0 = Sunday), e.g. '0 9 * * 1-5' for weekdays at 09:00"
            ),
        ] = None,
        at: Annotated[
            str | None,
            Arg("ISO 8601 time of a single run, e.g. '2026-03-02T07:00' (without an offset: the owner's time zone)"),
        ] = None,
        every_minutes: Annotated[int | None, Arg("run every this many minutes (at least 1)")] = None,
    ) -> str:
        """Make a schedule: the task (or research) starts by itself at the times given, as if this user had just
        asked, and reports in this conversation ("every weekday at 9 run the tests in calc", "tomorrow at 7", "in 2
        hours"). Give exactly one of cron, at and every_minutes. Confirm in one sentence with the next run the tool
        returns."""
        ...

    async def list_schedules(self, caller: Caller) -> str:
        """List this conversation's schedules: when, what, the next run and the last result."""
        ...

    async def cancel_schedule(self, caller: Caller, schedule_id: ScheduleId) -> str:
        """Cancel a schedule for good ("stop the nightly run"); a task it started goes on."""
        ...

    async def pause_schedule(self, caller: Caller, schedule_id: ScheduleId) -> str:
        """Pause a schedule: it does not run until resumed."""
        ...

    async def resume_schedule(self, caller: Caller, schedule_id: ScheduleId) -> str:
        """Resume a paused schedule from its next slot (missed slots are not made up)."""
        ...

    async def remember(
        self,
        caller: Caller,
        text: Annotated[str, Arg("the note, in the user's words, self-contained (e.g. 'in site we use pnpm')")],
        workspace: Annotated[
            str | None, Arg("the workspace it is about (optional; leave it out for a note that holds everywhere)")
        ] = None,
    ) -> str:
        """Keep a standing note of the user's that applies to their later requests (and to every worker started
        for them), for one workspace or all: when the user says 'remember that…', 'from now on…', 'always…'."""
        ...

    async def forget(self, caller: Caller, note_id: Annotated[int, Arg("the note's number (note #N)")]) -> str:
        """Delete a standing note (e.g. 'forget the pnpm note'): its number is in the context's standing notes."""
        ...

    async def open_pull_request(self, caller: Caller, task_id: TaskId) -> str:
        """Push a finished task's branch to the workspace's GitHub repository and open a pull request against its
        default branch (a draft unless the bot's verdict is ✔); a task that has one gets its new commits pushed
        there. Only for workspaces on GitHub; owners only (a member's request goes to the owners)."""
        ...

    # the turn's hooks: not tools; the orchestrator calls them around a chat's turns
    def turn_started(self, chat_id: int) -> None:
        """A turn of the chat begins (it may wait on a foreground task until `stop_waiting`)."""

    def stop_waiting(self, chat_id: int) -> None:
        """A new message arrived in the chat: a turn waiting on a foreground task stops waiting and answers."""

    def turn_ended(self, chat_id: int) -> list[Task]:
        """The chat's turn ended (`turn_started` began it): the tasks stored in its conversation meanwhile, a
        schedule's runs aside. They are the turn's own, as a conversation's turns never overlap; a button pressed
        there while the turn ran would count with it."""
        ...


WORK_TOOLS = (
    "start_research",
    "start_task",
    "approve_proposal",
    "reject_proposal",
    "list_tasks",
    "cancel_task",
    "message_task",
    "get_proposal",
    "get_task",
    "merge_task",
    "discard_task",
    "create_workspace",
    "schedule_task",
    "list_schedules",
    "cancel_schedule",
    "pause_schedule",
    "resume_schedule",
    "remember",
    "forget",
    "open_pull_request",
)  # the WorkDesk methods the orchestrator offers as tools, in this order


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
    ) -> int | None:
        """Show `markdown` in the chat (now or later); the id of the message sent, None when it is not sent yet."""
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
