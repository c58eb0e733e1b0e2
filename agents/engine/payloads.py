"""What travels between the bot, the Temporal cluster and the runners: plain dataclasses, no side effects.

Temporal stores every payload in the workflow's history, so nothing secret is in them: no API key, bot token,
`.env` value or credential (each machine keeps its own). What is in them:
- TaskStart: the task's number, chat, who started it (their Telegram id and name, and whether they are an owner:
  a member's network question goes to the owners, as on the bot), workspace *name*, worker kind, title, instructions,
  acceptance criteria, its branch and notes when it resumes, the files handed to it (names and sizes: their bytes
  are fetched in parts, `FilePart`), the timeouts, and the bot's per-task bounds (`TaskPolicy`: its network mode and
  domains, step, token and time limits, sandbox limits, commit sizes, MCP approval gates), which the runner applies
  where they are stricter than its own (agents/engine/task_policy.py).
- NotifyCall: what the task shows in the chat, as it would be shown (progress lines, network questions with their
  command, screenshots and files the worker sends), already passed through the output filter of secrets.
- Poke: a steering note, a network answer (allow once / for the task / deny), or a cancel.
- FilePart: one part (at most PART_BYTES) of a file the user handed to the task, fetched by its runner from the bot
  (Temporal refuses payloads over 2 MB; a PDF may be 10 MB). The parts stay in the workflow's history, as every
  payload does: a task's files count towards its history (Temporal warns at 10 MB, refuses at 50 MB); a runner
  fetches them once per run, and not again when its attachments folder already holds the same path at the same size.
- UsageCall: the usage rows a task's model calls recorded on its runner, sent as they are recorded (the bot stores
  them as the task's own at once: its daily budget counts a running task's spend, whichever runner it runs on). Each
  row carries its key (`usage_key`), unique within the task's workflow across takeovers: the workflow leaves the rows
  the bot stored out of the report (`without_stored`), so none is counted twice.
- DaySpending: the bot's daily budget, its spend today and what its calls under way may cost, asked by a runner's
  task before each model call.
- TaskReport: the outcome (status, the worker's report, error, commit, branch names), the task's events, criteria,
  token usage, its tool calls (name, summarised arguments, sizes, errors: the audit), the summary to show, and a
  research task's proposal (the bot stores it under a number of its own).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from agents.core.actions import Button, Buttons, button_fields

WORKFLOW = "AgentTask"
EXECUTE = "agentlab.execute_task"  # on the shared queue: the runner that picks it up runs the task
POKE = "agentlab.poke_task"  # on that runner's own queue: a note, an answer or a cancel for a running task
NOTIFY = "agentlab.notify_chat"  # on the bot's queue: show something in the chat, return the message id
FETCH = "agentlab.fetch_file_part"  # on the bot's queue: a part of a file handed to the task
USAGE = "agentlab.record_usage"  # on the bot's queue: a running task's usage rows, stored at once
SPENDING = "agentlab.day_spending"  # on the bot's queue: the day's budget and spend, before a runner's model call
PART_BYTES = 1 << 20  # well under Temporal's 2 MB payload limit, base64 and the envelope included


@dataclass
class HandedFile:
    """A file the user handed to the task: what a runner needs to fetch it and show it as the bot would."""

    id: int  # the bot's attachment id
    kind: str
    name: str
    media_type: str
    path: str  # relative to the attachments folder, as on the bot
    size: int
    tokens: int = 0
    save_as_file: bool = False


@dataclass
class TaskPolicy:
    """The bot's own per-task bounds, as its settings say when it offers the task: the runner applies, for each, the
    stricter of these and its own (agents/engine/task_policy.py). None (an older bot's payload, or a bound the bot
    leaves at its machine's default): the runner's own value."""

    sandbox: str | None = None  # SANDBOX: bwrap, or off
    sandbox_network: str | None = None  # SANDBOX_NETWORK: off, ask or on
    sandbox_network_domains: list[str] | None = None  # [] = any public address
    sandbox_network_private: list[str] | None = None  # [] = no private address
    sandbox_network_answer_seconds: float | None = None
    worker_max_steps: int | None = None
    worker_max_tokens: int | None = None
    worker_max_seconds: float | None = None
    max_corrections: int | None = None
    command_timeout_seconds: float | None = None
    test_timeout_seconds: float | None = None
    ask_max_per_task: int | None = None
    sandbox_max_processes: int | None = None
    sandbox_max_memory_mb: int | None = None
    sandbox_max_file_mb: int | None = None
    sandbox_max_disk_mb: int | None = None  # None on the bot: its own default (a share of its free space)
    sandbox_tmp_mb: int | None = None
    sandbox_max_services: int | None = None
    max_commit_file_bytes: int | None = None
    max_commit_task_bytes: int | None = None
    # MCP_CONFIG: per server name, the tools its `approve` gates ("*": all), and the servers run without network
    mcp_approve: dict[str, list[str]] = field(default_factory=dict)
    mcp_offline: list[str] = field(default_factory=list)


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
    standing_notes: list[str] = field(default_factory=list)  # the user's standing notes for the workspace (bot's store)
    reply_to_message_id: int | None = None
    schedule_id: int | None = None  # a schedule's run: its summary names the schedule
    attempt_group: int | None = None  # one of N attempts (agents/work/attempts.py): no summary or progress of its own
    attempt: int | None = None  # "attempt K of N" in its first turn
    attempt_of: int | None = None
    user_id: int | None = None  # who started it (None: the bot itself, e.g. a restart)
    user_name: str | None = None
    starter_is_owner: bool = True  # as the bot's OWNER_USER_IDS says, when the task started
    # the bot's DAILY_BUDGET_USD and what it had spent today when it offered the run: a runner's store holds only
    # its own usage, so its task stops at the budget counting from the bot's figure
    daily_budget_usd: float | None = None
    spent_today_usd: float = 0.0
    files: list[HandedFile] = field(default_factory=list)
    shared_queue: str = "agentlab"
    bot_queue: str = "agentlab.bot"
    heartbeat_seconds: float = 30.0
    claim_seconds: float = 600.0
    run_seconds: float = 6 * 3600.0
    takeovers: int = 1
    policy: TaskPolicy | None = None  # the bot's per-task bounds (None: an older bot's payload)


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
class FilePart:
    task_id: int
    file_id: int
    offset: int


@dataclass
class NotifyCall:
    task_id: int
    chat_id: int
    method: str  # "send" | "edit" | "send_document" | "send_photo" | "ask_owners"
    text: str = ""
    buttons: list[list[list[str]]] | None = None  # [[label, callback data (, review URL, start parameter)], …] rows
    reply_to: int | None = None
    message_id: int | None = None
    filename: str = ""
    data_b64: str = ""
    literal: bool = False  # a question to the owner: shown without the output filter (Notifier's `literal`)


@dataclass
class Shown:
    """What the bot showed for a NotifyCall: the message id (of a send), and for `ask_owners` (chat, message) of each
    copy it sent to the owners."""

    message_id: int | None = None
    copies: list[list[int]] = field(default_factory=list)


@dataclass
class ShownMessage:
    """A summary the task shows at its end; the bot delivers it through its outbox and keeps it in the chat history."""

    text: str
    kind: str = "summary"
    buttons: list[list[list[str]]] | None = None
    reply_to: int | None = None


@dataclass
class UsageRow:
    key: str  # `usage_key`: the runner's name and the row's id in its store
    record: str  # UsageRecord JSON


@dataclass
class UsageCall:
    task_id: int
    chat_id: int
    rows: list[UsageRow] = field(default_factory=list)


@dataclass
class DaySpending:
    """The bot's DAILY_BUDGET_USD (None: none), what today's usage rows say, and what its own model calls under way
    may still cost (agents/llm/calls_in_flight.py)."""

    budget_usd: float | None
    spent_usd: float
    held_usd: float = 0.0


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
    proposal: str | None = None  # a research task's proposal (its body)
    review: str | None = None  # the review page's record of the outcome (agents/work/task_review.py), JSON


def usage_key(runner: str, record: str) -> str:
    """A usage row's key within its task's workflow: the runner's name (a runner's own queue is named by it, so two
    runners never share one) and the row's id in that runner's store ("" for a row that names none, or is no JSON).
    The same key whether the row is sent while the task runs or carried in its report."""
    try:
        row_id = json.loads(record).get("id")
    except (ValueError, AttributeError):
        return ""
    return f"{runner}/{row_id}" if isinstance(row_id, int) else ""


def without_stored(report: TaskReport, stored: set[str]) -> TaskReport:
    """The report less the usage rows the bot already stored while the task ran (their keys in `stored`)."""
    if not stored:
        return report
    usage = [row for row in report.usage if usage_key(report.runner, row) not in stored]
    return dataclasses.replace(report, usage=usage)


def encode_buttons(buttons: Buttons | None) -> list[list[list[str]]] | None:
    return [[button_fields(b) for b in row] for row in buttons] if buttons else None


def decode_buttons(rows: list[list[list[str]]] | None) -> Buttons | None:
    return [[Button(*fields) for fields in row] for row in rows] if rows else None
