"""What travels between the bot, the Temporal cluster and the runners: plain dataclasses, no side effects.

Temporal stores every payload in the workflow's history, so nothing secret is in them: no API key, bot token,
`.env` value or credential (each machine keeps its own). What is in them:
- TaskStart: the task's number, chat, workspace *name*, worker kind, title, instructions, acceptance criteria, its
  branch and notes when it resumes, and the timeouts.
- NotifyCall: what the task shows in the chat, as it would be shown (progress lines, network questions with their
  command, screenshots and files the worker sends), already passed through the output filter of secrets.
- Poke: a steering note, a network answer (allow once / for the task / deny), or a cancel.
- TaskReport: the outcome (status, the worker's report, error, commit, branch names), the task's events, criteria,
  token usage, its tool calls (name, summarised arguments, sizes, errors: the audit) and the summary to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.core.actions import Button, Buttons

WORKFLOW = "AgentTask"
EXECUTE = "agentlab.execute_task"  # on the shared queue: the runner that picks it up runs the task
POKE = "agentlab.poke_task"  # on that runner's own queue: a note, an answer or a cancel for a running task
NOTIFY = "agentlab.notify_chat"  # on the bot's queue: show something in the chat, return the message id


@dataclass
class TaskStart:
    task_id: int
    chat_id: int
    workspace: str
    worker: str
    title: str
    instructions: str
    criteria: list[str] = field(default_factory=list)
    branch: str | None = None  # a resumed task's branch (fetched from the shared remote when the runner lacks it)
    notes: str | None = None  # what was done before an interruption
    reply_to_message_id: int | None = None
    shared_queue: str = "agentlab"
    bot_queue: str = "agentlab.bot"
    heartbeat_seconds: float = 30.0
    claim_seconds: float = 600.0
    run_seconds: float = 6 * 3600.0
    takeovers: int = 1


@dataclass
class Claim:
    """A runner took the task: where it runs, and where pokes for it go."""

    runner: str
    queue: str


@dataclass
class Poke:
    task_id: int
    kind: str  # "note" | "network" | "cancel"
    text: str = ""
    chat_id: int = 0
    request_id: int = 0
    choice: str = ""


@dataclass
class NotifyCall:
    task_id: int
    chat_id: int
    method: str  # "send" | "edit" | "send_document" | "send_photo"
    text: str = ""
    buttons: list[list[list[str]]] | None = None  # [[label, callback data], …] rows
    reply_to: int | None = None
    message_id: int | None = None
    filename: str = ""
    data_b64: str = ""
    literal: bool = False  # a question to the owner: shown without the output filter (Notifier's `literal`)


@dataclass
class ShownMessage:
    """A summary the task shows at its end; the bot delivers it through its outbox and keeps it in the chat history."""

    text: str
    kind: str = "summary"
    buttons: list[list[list[str]]] | None = None
    reply_to: int | None = None


@dataclass
class TaskReport:
    task_id: int
    status: str  # a TaskStatus value
    runner: str = ""
    result: str | None = None
    error: str | None = None
    commit_sha: str | None = None
    branch: str | None = None
    base_branch: str | None = None
    base_commit: str | None = None
    pushed: bool = False
    push_error: str | None = None
    events: list[list[str]] = field(default_factory=list)  # [kind, detail]
    verified: list[list[str]] = field(default_factory=list)  # [criterion number, evidence]
    usage: list[str] = field(default_factory=list)  # UsageRecord JSON
    tool_calls: list[str] = field(default_factory=list)  # ToolCallRecord JSON (the audit; arguments summarised)
    shown: list[ShownMessage] = field(default_factory=list)


def encode_buttons(buttons: Buttons | None) -> list[list[list[str]]] | None:
    return [[[b.label, b.data] for b in row] for row in buttons] if buttons else None


def decode_buttons(rows: list[list[list[str]]] | None) -> Buttons | None:
    return [[Button(label, data) for label, data in row] for row in rows] if rows else None
