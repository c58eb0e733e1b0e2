"""Records kept in the store (pydantic models) and one enum per state machine."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


def utcnow() -> datetime:
    return datetime.now(UTC)


class StoredRecord(BaseModel):
    """A record the store keeps: `id` is None until the store inserts it, and set ever after."""

    id: int | None = None

    @property
    def stored_id(self) -> int:
        """The row's id, for code that handles a record read from or added to the store (asking an unsaved one is a
        bug, said at once rather than passed on as None)."""
        if self.id is None:
            raise LookupError(f"this {type(self).__name__} was never stored: it has no id yet")
        return self.id


class InputMethod(StrEnum):
    TEXT = "text"
    VOICE = "voice"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class ProposalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"


class TaskStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    UNVERIFIED = "unverified"  # ended, but the bot could not tell whether the change is good: needs a look
    FAILED = "failed"
    BLOCKED = "blocked"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def is_active(self) -> bool:
        return self in (TaskStatus.PENDING, TaskStatus.IN_PROGRESS)

    @property
    def is_cancellable(self) -> bool:
        """Active, or interrupted by a restart (cancel then drops it for good)."""
        return self.is_active or self is TaskStatus.INTERRUPTED

    @classmethod
    def active(cls) -> list[TaskStatus]:
        return [s for s in cls if s.is_active]

    @classmethod
    def cancellable(cls) -> list[TaskStatus]:
        return [s for s in cls if s.is_cancellable]

    @property
    def is_final(self) -> bool:
        return self in (
            TaskStatus.COMPLETED,
            TaskStatus.UNVERIFIED,
            TaskStatus.FAILED,
            TaskStatus.BLOCKED,
            TaskStatus.CANCELLED,
        )


class WorkerKind(StrEnum):
    RESEARCH = "research"
    CODE = "code"
    FRONTEND = "frontend"
    TEST = "test"


class AttachmentKind(StrEnum):
    IMAGE = "image"
    PDF = "pdf"
    TEXT = "text"


class Attachment(StoredRecord):
    """A photo or file the user sent with a message; its bytes live in a file under the data folder (`path`)."""

    chat_id: int
    message_id: int | None = None
    kind: AttachmentKind
    name: str
    media_type: str
    path: str  # relative to the attachments folder (agents/inputs/attachments.py)
    size: int
    tokens: int = 0  # what it costs in a request, roughly
    refused: str | None = None  # why the Messages API refused it; then only its name is shown to a model
    created_at: datetime = Field(default_factory=utcnow)


class ChatMessage(StoredRecord):
    """One turn of a chat's conversation with the orchestrator."""

    chat_id: int
    role: Role
    content: str
    input_method: InputMethod = InputMethod.TEXT
    tokens: int = 0
    kind: str = "chat"  # "proposal" / "task" for what the bot showed about one (ref_id names it)
    ref_id: int | None = None
    platform_message_id: int | None = None  # the chat message the user saw (for replies to it)
    created_at: datetime = Field(default_factory=utcnow)
    attachments: list[Attachment] = Field(default_factory=list, exclude=True)  # rows of their own table


class Proposal(StoredRecord):
    """A research worker's Markdown proposal waiting for the user's decision."""

    chat_id: int
    workspace: str
    request: str
    body: str = ""
    status: ProposalStatus = ProposalStatus.PENDING
    user_id: int | None = None  # who asked for it (its research task's starter; None: unknown, an older proposal)
    supersedes: int | None = None  # the proposal its research reworked (replaced by this one)
    task_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    decided_at: datetime | None = None

    @property
    def asker(self) -> int | None:
        """Who asked for it: its user; for an older proposal stored without one, the user of a private chat (whose
        id the chat's is), and nobody known in a group."""
        return self.user_id if self.user_id is not None else (self.chat_id if self.chat_id > 0 else None)


class Caller(BaseModel):
    """Who asks, and where the answer goes: the conversation (a private chat, a group, or one topic of a group, as
    the adapter keys it), the request message (a task's messages reply under it) and the user who sent it.

    `confined_to`: a request that reached the bot from outside the chat (a GitHub mention: its issue text written by
    anyone, its answer posted in public) works in this one workspace and sees nothing else of the conversation (its
    history, other workspaces, its tasks, proposals and schedules); the bot enforces it (agents/work/access.py,
    agents/tools/tool_sets.py, agents/chat/turn_context.py), whatever the model makes of the text."""

    model_config = ConfigDict(frozen=True)

    chat_id: int
    message_id: int | None = None
    user_id: int | None = None
    user_name: str | None = None  # how /tasks names who started a task
    confined_to: str | None = None


class Task(StoredRecord):
    """A unit of worker execution (code, frontend, test or research)."""

    chat_id: int
    workspace: str
    worker: WorkerKind
    title: str
    instructions: str
    status: TaskStatus = TaskStatus.PENDING
    priority: int = 0
    background: bool = True
    proposal_id: int | None = None  # the proposal a code task implements
    reworks: int | None = None  # the proposal a research task reworks (its new proposal replaces that one)
    branch: str | None = None
    base_branch: str | None = None
    base_commit: str | None = None
    worktree: str | None = None
    commit_sha: str | None = None
    result: str | None = None
    error: str | None = None
    reply_to_message_id: int | None = None
    progress_message_id: int | None = None
    user_id: int | None = None  # who started it (None: an older task); members act on their own tasks only
    user_name: str | None = None
    schedule_id: int | None = None  # the schedule whose run started it (its summary says so)
    attempt_group: int | None = None  # one of N attempts racing on the same request (agents/work/attempts.py)
    attempt: int | None = None  # its number K in "attempt K of N"
    attempt_of: int | None = None  # N
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class AttemptState(StrEnum):
    RACING = "racing"  # attempts still running (or waiting to)
    SUMMARISED = "summarised"  # all ended, the one summary sent with its pick
    MERGING = "merging"  # an owner's Merge under way: the chosen attempt merging, then the others discarded
    MERGED = "merged"  # the chosen attempt merged, the others discarded
    DISCARDED = "discarded"  # all discarded


class AttemptGroup(StoredRecord):
    """N tasks on the same request and base commit, each an ordinary task; the group adds one progress message,
    one summary when all have ended, and the pick the bot ranks by the tests."""

    chat_id: int
    size: int
    title: str
    state: AttemptState = AttemptState.RACING
    first_pass_wins: bool = False  # the first ✔ ends the race: the others are cancelled
    progress_message_id: int | None = None
    pick_task_id: int | None = None
    merging_task_id: int | None = None  # the attempt a Merge chose (the pick or the one named), set with MERGING
    why: str | None = None  # the one line saying why the pick (kept: a comparison by the model is asked once)
    stopped: str | None = None  # why the race was stopped early (a budget reached, the first ✔)
    created_at: datetime = Field(default_factory=utcnow)
    summarised_at: datetime | None = None


class TaskEvent(BaseModel):
    """A status change or a worker step of a task."""

    id: int | None = None
    task_id: int
    kind: str
    detail: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class ToolCallRecord(BaseModel):
    """Audit row: one tool call made by an agent."""

    id: int | None = None
    chat_id: int | None = None
    task_id: int | None = None
    agent: str
    tool: str
    arguments: str
    result_chars: int = 0
    duration_ms: int = 0
    error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class Usage(BaseModel):
    """Token usage of one Messages API call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
        )


class UsageRecord(Usage):
    """Usage of one API call, attributed to a chat and/or task."""

    id: int | None = None
    chat_id: int | None = None
    task_id: int | None = None
    user_id: int | None = None  # who asked: the turn's user, or the task's starter
    agent: str
    model: str
    created_at: datetime = Field(default_factory=utcnow)


class Criterion(BaseModel):
    """One acceptance criterion of a task, verified by the worker with evidence."""

    task_id: int
    idx: int
    text: str
    verified: bool = False
    evidence: str | None = None


class ConversationNote(BaseModel):
    """A model-written summary of the older turns of a long conversation (the turns themselves stay stored)."""

    id: int | None = None
    chat_id: int
    up_to_message_id: int
    summary: str
    created_at: datetime = Field(default_factory=utcnow)


class Delivery(BaseModel):
    """A message the bot owes a chat (summary, proposal, answer), kept until Telegram accepted it."""

    id: int | None = None
    chat_id: int
    kind: str  # "summary" | "proposal" | "answer" | "notice"
    task_id: int | None = None
    text: str
    buttons: str | None = None  # JSON [[label, callback data], ...]
    reply_to: int | None = None
    attempts: int = 0
    last_error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    delivered_at: datetime | None = None
    shown_record: int | None = None  # the chat history's record of what it shows: its chat message id is set once sent


class ScheduleStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"  # by its maker or an owner, or by the bot (its workspace is gone, its maker no longer allowed)
    DONE = "done"  # a one-off (`at`) that ran
    CANCELLED = "cancelled"

    @property
    def is_live(self) -> bool:
        """Counted against SCHEDULES_MAX and listed by /schedules."""
        return self in (ScheduleStatus.ACTIVE, ScheduleStatus.PAUSED)


class Schedule(StoredRecord):
    """Work that starts by itself: a task or research of one conversation, run as the user who made it.

    Exactly one of `cron` (5 fields, in TIMEZONE), `at` (one run) and `every_minutes` says when."""

    chat_id: int  # the conversation it belongs to: runs report there
    user_id: int | None = None  # its maker: each run acts as them (their role)
    user_name: str | None = None
    workspace: str
    worker: WorkerKind
    instructions: str
    cron: str | None = None
    at: datetime | None = None
    every_minutes: int | None = None
    status: ScheduleStatus = ScheduleStatus.ACTIVE
    note: str | None = None  # why it is paused, or what its last run did when it started no task
    next_run_at: datetime | None = None  # the slot it waits for (a slot missed while the bot was down runs at start)
    last_run_at: datetime | None = None
    last_task_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
