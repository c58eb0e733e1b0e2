"""Routing evaluation: send labelled example messages to the real orchestrator and score where each one was routed.

`agentlab eval routing` loads `evals/routing.jsonl` (one case per line), runs every case as a fresh conversation
(its own in-memory store, set up as the case says: pending proposals shown in the chat, research still running,
active tasks, earlier turns, the message replied to) against the configured Anthropic API, three times each, and
prints a confusion table, the misrouted cases and the cases whose routing flipped between runs. Work tools go to a
`RecordingDesk`: it records the call and answers
with a short fake confirmation, so no worker ever starts and nothing is written to any repository. The workspaces
the orchestrator sees are small throw-away folders (calc, group-therapy, portfolio, and `self`).

A case's predicted label is the orchestrator's FIRST work tool call that the desk accepted: start_research →
research, start_task → its worker (code / frontend / test), approve_proposal → approval, reject_proposal → reject,
cancel_task → cancel; no work tool (text, read-only look-ups, list_tasks, get_task…) → clarify when the reply
ends with a question, else direct. A turn that failed without calling a work tool is `error`. A case may also
expect the workspace, the proposal id (approved, rejected or refined), `background` and the cancelled task; the
label and every expectation set must hold for the case to count as correct.

Why one module over 400 lines: the case format, the stand-in desk and the scorer are one evaluation.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anthropic
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agents.chat.orchestrator import Orchestrator
from agents.chat.replying import ReplyTo
from agents.core.errors import ToolError
from agents.core.models import (
    ChatMessage,
    InputMethod,
    Proposal,
    ProposalStatus,
    Role,
    Task,
    TaskStatus,
    Usage,
    WorkerKind,
    utcnow,
)
from agents.core.settings import Settings
from agents.llm.client import cost_usd, make_client
from agents.store.database import Store
from agents.store.shown import PROPOSAL, remember_shown, shown_as
from agents.tools.new_workspace import workspace_name
from agents.tools.workspaces import Workspaces
from agents.work import crew_texts
from agents.work.crew import task_line

LABELS: tuple[str, ...] = ("direct", "clarify", "research", "code", "frontend", "test", "approval", "reject", "cancel")
Label = Literal["direct", "clarify", "research", "code", "frontend", "test", "approval", "reject", "cancel"]
WORK_TOOLS = {
    "start_research": "research",
    "approve_proposal": "approval",
    "reject_proposal": "reject",
    "cancel_task": "cancel",
}
OTHER = "other"  # a work tool call that fits no label (start_task with an unknown worker)
ERROR = "error"  # the turn failed (API error, crash) before any work tool was called
WORKERS = ("code", "frontend", "test")
DEFAULT_CASES = Path(__file__).resolve().parents[1] / "evals" / "routing.jsonl"
EVAL_CHAT_ID = 4242
SELF_FOLDER = "agentlab-self"


# ------------------------------------------------------------------------------------------------------------ cases


class ActiveTask(BaseModel):
    """A task running when the message arrives."""

    model_config = ConfigDict(extra="forbid")

    workspace: str
    worker: Literal["code", "frontend", "test"] = "code"
    title: str


class Turn(BaseModel):
    """An earlier turn of the conversation."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    text: str = Field(min_length=1)


class Case(BaseModel):
    """One labelled message: what the user sent, how, in which situation, and where it should be routed."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1)
    input: InputMethod = InputMethod.TEXT
    label: Label
    pending_proposal: bool = False  # shorthand: one pending proposal, for proposal_workspace
    proposal_workspace: str = "group-therapy"  # which workspace that proposal is for
    pending: list[str] = Field(default_factory=list)  # pending proposals #1, #2… for these workspaces (shown in chat)
    researching: str | None = None  # a research task is still writing a proposal for this workspace
    tasks: list[ActiveTask] = Field(default_factory=list)  # running tasks #1, #2… (the research task comes after)
    history: list[Turn] = Field(default_factory=list)  # earlier turns, oldest first
    reply_to: str | None = None  # "proposal N", "task N", or the text of a bot message the user replies to
    workspace: str | None = None  # expected: the workspace of the work call (as resolved)
    proposal_id: int | None = None  # expected: the proposal approved, rejected or refined
    background: bool | None = None  # expected: start_task's background
    task_id: int | None = None  # expected: the task cancelled
    line: int = 0  # line number in the file (set by load_cases)

    @property
    def pending_workspaces(self) -> list[str]:
        return list(self.pending) or ([self.proposal_workspace] if self.pending_proposal else [])

    @field_validator("pending")
    @classmethod
    def _known_pending(cls, value: list[str]) -> list[str]:
        unknown = [w for w in value if w not in CANNED_PROPOSALS]
        if unknown:
            raise ValueError(f"must be among {', '.join(CANNED_PROPOSALS)} (got {', '.join(unknown)})")
        return value

    @field_validator("reply_to")
    @classmethod
    def _reply_target(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("proposal_workspace")
    @classmethod
    def _known_workspace(cls, value: str) -> str:
        if value not in CANNED_PROPOSALS:
            raise ValueError(f"must be one of {', '.join(CANNED_PROPOSALS)}")
        return value


class CaseFileError(ValueError):
    """A cases file could not be loaded; the message names the file and the line."""


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "line"
        parts.append(f"{where}: {e['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def load_cases(path: Path | str) -> list[Case]:
    """Read a JSON-lines file of cases (blank lines skipped); a bad line raises CaseFileError naming its number."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise CaseFileError(f"{path}: cannot read the cases file ({err.strerror or err})") from None
    cases: list[Case] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as err:
            raise CaseFileError(f"{path}:{number}: not valid JSON ({err.msg}, column {err.colno})") from None
        if not isinstance(data, dict):
            raise CaseFileError(f"{path}:{number}: expected a JSON object, got {type(data).__name__}")
        data.pop("line", None)
        try:
            cases.append(Case(**data, line=number))
        except ValidationError as err:
            raise CaseFileError(f"{path}:{number}: {_describe(err)}") from None
    if not cases:
        raise CaseFileError(f"{path}: no cases in the file")
    return cases


# ------------------------------------------------------------------------------------------------------- classify


def asks(reply: str) -> bool:
    """The reply ends by asking the user something."""
    return reply.strip().rstrip("*_`)\"' ").endswith("?")


def classify(tool_names: Sequence[str], tool_inputs: Sequence[Mapping[str, Any]], reply: str = "") -> str:
    """The label of the first work tool call among `tool_names` (with their inputs, in call order); none → clarify
    when the reply asks a question, else direct."""
    if len(tool_names) != len(tool_inputs):
        raise ValueError(f"{len(tool_names)} tool names but {len(tool_inputs)} inputs")
    for name, arguments in zip(tool_names, tool_inputs):
        if name in WORK_TOOLS:
            return WORK_TOOLS[name]
        if name == "start_task":
            worker = str(arguments.get("worker", "")).strip().lower()
            return worker if worker in WORKERS else OTHER
    return "clarify" if asks(reply) else "direct"


# ---------------------------------------------------------------------------------------------- the recording desk


@dataclass
class ToolCall:
    """A work tool call as the orchestrator made it."""

    name: str
    input: dict[str, Any]
    ok: bool = True  # False when the desk refused it (a wrong name, an id it could not take)


class RecordingDesk:
    """A WorkDesk that records every call and answers like the real crew would, without starting any worker.

    Workspace names and proposals are checked as the real desk checks them (a wrong name gets the same
    ToolError), so the model's follow-up behaves as it would in the bot.
    """

    def __init__(self, store: Store, workspaces: Workspaces) -> None:
        self.store = store
        self.workspaces = workspaces
        self.calls: list[ToolCall] = []
        self._task_ids = 0

    def _record(self, name: str, **arguments: Any) -> None:
        self.calls.append(ToolCall(name, {k: v for k, v in arguments.items() if v is not None}))

    def _refused(self) -> None:
        self.calls[-1].ok = False

    def _next_task(self) -> int:
        self._task_ids += 1
        return self._task_ids

    async def _pick(self, chat_id: int, proposal_id: int | None) -> Proposal:
        """As the crew picks: an id, or the only pending proposal; never a guess."""
        try:
            pending = await self.store.pending_proposals(chat_id)
            if proposal_id is None:
                running = [
                    t
                    for t in await self.store.list_tasks(chat_id, statuses=[TaskStatus.IN_PROGRESS])
                    if t.worker is WorkerKind.RESEARCH
                ]
                if running:
                    raise ToolError(crew_texts.still_writing(running, pending))
                if not pending:
                    raise ToolError("there is no pending proposal in this chat")
                if len(pending) > 1:
                    raise ToolError(crew_texts.which_proposal(pending))
                return pending[0]
            for proposal in pending:
                if proposal.id == int(proposal_id):
                    return proposal
            raise ToolError(f"there is no pending proposal #{proposal_id} in this chat")
        except (ToolError, ValueError):
            self._refused()
            raise

    def _resolve(self, workspace: str) -> Any:
        try:
            return self.workspaces.resolve(workspace)
        except ToolError:
            self._refused()
            raise

    async def start_research(
        self,
        chat_id: int,
        workspace: str,
        request: str,
        refines: int | None = None,
        attachments: list[int] | None = None,
    ) -> str:
        self._record("start_research", workspace=workspace, request=request, refines=refines)
        ws = self._resolve(workspace)
        return crew_texts.research_started(self._next_task(), ws.name)

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
    ) -> str:
        self._record(
            "start_task",
            workspace=workspace,
            worker=worker,
            instructions=instructions,
            background=background,
            acceptance_criteria=acceptance_criteria,
        )
        kind = str(worker).strip().lower()
        if kind not in WORKERS:
            self._refused()
            raise ToolError(
                f"worker must be one of code, frontend, test (got {worker!r}); use start_research for research"
            )
        ws = self._resolve(workspace)
        return f"Task #{self._next_task()} ({kind} worker, workspace {ws.name}) started in the background."

    async def approve_proposal(self, chat_id: int, proposal_id: int | None = None, notes: str | None = None) -> str:
        self._record("approve_proposal", proposal_id=proposal_id, notes=notes)
        proposal = await self._pick(chat_id, proposal_id)
        self.calls[-1].input["picked"] = proposal.id
        await self.store.update_proposal(proposal.id, status=ProposalStatus.APPROVED, decided_at=utcnow())
        return (
            f"Proposal #{proposal.id} approved; code task #{self._next_task()} started on {proposal.workspace} "
            "in the background."
        )

    async def reject_proposal(self, chat_id: int, proposal_id: int | None = None, reason: str | None = None) -> str:
        self._record("reject_proposal", proposal_id=proposal_id, reason=reason)
        proposal = await self._pick(chat_id, proposal_id)
        self.calls[-1].input["picked"] = proposal.id
        await self.store.update_proposal(proposal.id, status=ProposalStatus.REJECTED, decided_at=utcnow())
        return f"Proposal #{proposal.id} rejected."

    async def list_tasks(self, chat_id: int) -> str:
        self._record("list_tasks")
        tasks = await self.store.list_tasks(chat_id)
        return "\n".join(task_line(t) for t in tasks) if tasks else "No tasks yet."

    async def _task(self, chat_id: int, task_id: int) -> Task:
        task = await self.store.get_task(int(task_id))
        if task is None or task.chat_id != chat_id:
            self._refused()
            raise ToolError(crew_texts.no_such_task(task_id))
        return task

    async def cancel_task(self, chat_id: int, task_id: int) -> str:
        self._record("cancel_task", task_id=task_id)
        task = await self._task(chat_id, task_id)
        return f"Task #{task.id} cancelled; every process it started was stopped."

    async def get_proposal(self, chat_id: int, proposal_id: int | None = None) -> str:
        self._record("get_proposal", proposal_id=proposal_id)
        pending = await self.store.pending_proposals(chat_id)
        chosen = [p for p in pending if proposal_id is None or p.id == int(proposal_id)]
        if not chosen:
            raise ToolError(f"there is no proposal #{proposal_id} in this chat")
        return "\n\n".join(crew_texts.proposal_text(p) for p in chosen)

    async def get_task(self, chat_id: int, task_id: int) -> str:
        self._record("get_task", task_id=task_id)
        return crew_texts.task_text(await self._task(chat_id, task_id), [], [], None)

    async def merge_task(self, chat_id: int, task_id: int) -> str:
        self._record("merge_task", task_id=task_id)
        raise ToolError(f"task #{task_id} is still running; merge it when it has ended")

    async def discard_task(self, chat_id: int, task_id: int) -> str:
        self._record("discard_task", task_id=task_id)
        task = await self._task(chat_id, task_id)
        return f"Task #{task.id} was discarded."

    async def create_workspace(self, chat_id: int, name: str) -> str:
        self._record("create_workspace", name=name)
        return f"Created workspace {workspace_name(name)} (a new git repository); start work in it by that name."

    async def message_task(self, chat_id: int, task_id: int, text: str) -> str:
        self._record("message_task", task_id=task_id, text=text)
        raise ToolError(crew_texts.no_such_task(task_id))

    def turn_started(self, chat_id: int) -> None:
        """No foreground task ever runs here: nothing to wait on."""

    def stop_waiting(self, chat_id: int) -> None:
        """No foreground task ever runs here: nothing to stop."""


# ------------------------------------------------------------------------------------------- the eval workspaces

EVAL_WORKSPACES: dict[str, dict[str, str]] = {
    "calc": {
        "README.md": "# calc\nA tiny calculator library.\n",
        "calc.py": "def add(a, b):\n    return a - b\n\n\ndef divide(a, b):\n    return a / b\n",
        "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    },
    "group-therapy": {
        "README.md": "# Group therapy\nBooking and reminders for group therapy sessions (Flask).\n",
        "app.py": (
            "from flask import Flask, render_template\n\nfrom scheduler import upcoming_sessions\n\n"
            "app = Flask(__name__)\n\n\n@app.route('/')\ndef index():\n"
            "    return render_template('index.html', sessions=upcoming_sessions())\n"
        ),
        "scheduler.py": (
            "from datetime import datetime, timedelta\n\nSESSIONS = []\n\n\n"
            "def schedule_session(group, when: datetime):\n    SESSIONS.append((group, when))\n\n\n"
            "def upcoming_sessions(now=None):\n    now = now or datetime.now()\n"
            "    return [s for s in SESSIONS if s[1] >= now and s[1] - now < timedelta(days=7)]\n"
        ),
        "reminders.py": "def send_reminder(email, session):\n    raise NotImplementedError\n",
        "templates/index.html": (
            "<!doctype html>\n<h1>Upcoming sessions</h1>\n"
            "<ul>{% for s in sessions %}<li>{{ s }}</li>{% endfor %}</ul>\n"
        ),
        "static/style.css": "body { font-family: sans-serif; background: #fff; }\n",
    },
    "portfolio": {
        "README.md": "# portfolio\nMy personal site (plain HTML/CSS).\n",
        "index.html": (
            '<!doctype html>\n<html><head><link rel="stylesheet" href="style.css"></head>\n'
            '<body><header>Jane Dev</header><main><section id="projects"></section>'
            '<form id="contact"></form></main></body></html>\n'
        ),
        "style.css": "header { padding: 1rem; }\n#contact { width: 600px; }\n",
    },
    SELF_FOLDER: {
        "README.md": "# agentlab\nA Telegram bot that drives Claude agents.\n",
        "telegram_bot/handlers.py": "# /start /help /status and text messages\n",
        "telegram_bot/commands.py": "# /tasks /task /cancel /usage /log /new /history\n",
        "telegram_bot/render.py": "# Markdown to Telegram HTML\n",
        "agents/chat/orchestrator.py": "# one chat turn\n",
    },
}

CANNED_PROPOSALS: dict[str, tuple[str, str]] = {  # workspace → (the request, the proposal body)
    "group-therapy": (
        "make the session scheduling better",
        "## Summary\nStore sessions in SQLite instead of a list and add e-mail reminders.\n"
        "## Plan\n1. Add a sessions table and move scheduler.py onto it.\n2. Implement reminders.send_reminder "
        "with smtplib.\n3. Add a /sessions JSON endpoint.\n## Effort\nmedium",
    ),
    "calc": (
        "review calc and suggest improvements",
        "## Summary\nFix add(), guard divide() against zero, add type hints.\n"
        "## Plan\n1. Fix add to return a + b.\n2. Raise ValueError on division by zero.\n3. Add type hints.\n"
        "## Effort\nsmall",
    ),
    "portfolio": (
        "redesign the portfolio",
        "## Summary\nA responsive one-page layout with a projects grid and a dark theme.\n"
        "## Plan\n1. Rewrite style.css mobile-first.\n2. Add a projects grid.\n3. Make the contact form fluid.\n"
        "## Effort\nmedium",
    ),
    "self": (
        "clean up your command handlers",
        "## Summary\nSplit telegram_bot/commands.py into account and task commands.\n"
        "## Plan\n1. Move /usage and /log to account.py.\n2. Keep task commands in commands.py.\n## Effort\nsmall",
    ),
}


def make_eval_workspaces(folder: Path) -> Workspaces:
    """Write the eval's project folders under `folder`; returns them as Workspaces (`self` = the agentlab-self copy)."""
    root = folder / "workspaces"
    for name, files in EVAL_WORKSPACES.items():
        base = folder / name if name == SELF_FOLDER else root / name
        for relative, content in files.items():
            target = base / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
    return Workspaces(root, folder / SELF_FOLDER)


# ---------------------------------------------------------------------------------------------------------- running


@dataclass
class CaseResult:
    """What one run of one case produced."""

    case: Case
    predicted: str
    reply: str = ""
    calls: list[ToolCall] = field(default_factory=list)  # work tool calls, in order
    tools_used: list[str] = field(default_factory=list)  # every tool the orchestrator called, in order
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    seconds: float = 0.0
    error: str | None = None
    run: int = 0  # which of the repeated runs of the case
    wrong_details: list[str] = field(default_factory=list)  # expectations beyond the label that did not hold

    @property
    def expected(self) -> str:
        return self.case.label

    @property
    def label_correct(self) -> bool:
        return self.predicted == self.case.label

    @property
    def correct(self) -> bool:
        return self.label_correct and not self.wrong_details


@dataclass
class EvalResult:
    """Every run of every case (case order, then run order), and the totals."""

    results: list[CaseResult]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for r in self.results:
            total = total + r.usage
        return total

    @property
    def api_calls(self) -> int:
        return sum(r.api_calls for r in self.results)


def _resolved(workspaces: Workspaces, name: Any) -> str:
    try:
        return workspaces.resolve(str(name)).name
    except ToolError:
        return f"?{name}"


def check_details(case: Case, calls: list[ToolCall], workspaces: Workspaces) -> list[str]:
    """The case's expectations beyond the label, against the first accepted work call."""
    work = next((c for c in calls if c.ok and (c.name in WORK_TOOLS or c.name == "start_task")), None)
    if work is None:
        return []
    wrong = []
    if case.workspace is not None and work.name in ("start_task", "start_research"):
        got = _resolved(workspaces, work.input.get("workspace", ""))
        if got != case.workspace:
            wrong.append(f"workspace {got} (expected {case.workspace})")
    if case.proposal_id is not None:
        got = work.input.get("picked", work.input.get("proposal_id", work.input.get("refines")))
        if got is None or int(got) != case.proposal_id:
            wrong.append(f"proposal {got} (expected #{case.proposal_id})")
    if case.background is not None and work.name == "start_task":
        got = work.input.get("background")
        if got is not case.background:
            wrong.append(f"background={got} (expected {case.background})")
    if case.task_id is not None and work.name == "cancel_task":
        got = work.input.get("task_id")
        if got is None or int(got) != case.task_id:
            wrong.append(f"task {got} (expected #{case.task_id})")
    return wrong


def _reply_target(case: Case) -> tuple[str, int] | None:
    match = re.fullmatch(r"\s*(proposal|task)\s*#?(\d+)\s*", case.reply_to or "")
    return (match.group(1), int(match.group(2))) if match else None


async def set_up(store: Store, case: Case) -> ReplyTo | None:
    """Put the case's situation into a fresh store; returns the message the user replies to, if any."""
    for workspace in case.pending_workspaces:  # each shown in the chat, as the bot shows proposals
        request, body = CANNED_PROPOSALS[workspace]
        await store.add_message(ChatMessage(chat_id=EVAL_CHAT_ID, role=Role.USER, content=request))
        proposal = await store.add_proposal(
            Proposal(chat_id=EVAL_CHAT_ID, workspace=workspace, request=request, body=body)
        )
        text = f"📋 **Proposal #{proposal.id}** for `{workspace}`.\n\n{body}"
        record = await remember_shown(store, EVAL_CHAT_ID, PROPOSAL, proposal.id, text, 20_000)
        await shown_as(store, record, 900 + proposal.id)
    for active in case.tasks:
        task = await store.add_task(
            Task(
                chat_id=EVAL_CHAT_ID,
                workspace=active.workspace,
                worker=WorkerKind(active.worker),
                title=active.title,
                instructions=active.title,
                status=TaskStatus.IN_PROGRESS,
            )
        )
        await store.update_task(task.id, progress_message_id=800 + task.id)
    if case.researching:
        await store.add_task(
            Task(
                chat_id=EVAL_CHAT_ID,
                workspace=case.researching,
                worker=WorkerKind.RESEARCH,
                title=f"research: improve {case.researching}",
                instructions="improve it",
                status=TaskStatus.IN_PROGRESS,
            )
        )
    for turn in case.history:
        await store.add_message(ChatMessage(chat_id=EVAL_CHAT_ID, role=Role(turn.role), content=turn.text))
    target = _reply_target(case)
    if target is not None:
        kind, number = target
        return ReplyTo(message_id=(900 if kind == "proposal" else 800) + number, text="", from_bot=True)
    return ReplyTo(message_id=700, text=case.reply_to, from_bot=True) if case.reply_to else None


async def run_case(
    settings: Settings, client: anthropic.AsyncAnthropic, workspaces: Workspaces, case: Case, run: int = 0
) -> CaseResult:
    """One case as a fresh conversation: its own in-memory store set up as the case says, one orchestrator turn."""
    started = time.monotonic()
    store = await Store.open(":memory:")
    desk = RecordingDesk(store, workspaces)
    try:
        reply_to = await set_up(store, case)
        orchestrator = Orchestrator(settings, store, client, workspaces, desk)
        try:
            reply = await orchestrator.handle(EVAL_CHAT_ID, case.text, InputMethod(case.input), reply_to)
        except Exception as err:  # a crash in one case is that case's result, not the end of the eval
            accepted = [c for c in desk.calls if c.ok]
            predicted = classify([c.name for c in accepted], [c.input for c in accepted]) if accepted else ERROR
            return CaseResult(
                case,
                predicted,
                calls=list(desk.calls),
                seconds=time.monotonic() - started,
                error=f"{type(err).__name__}: {err}",
                run=run,
            )
    finally:
        await store.close()
    accepted = [c for c in desk.calls if c.ok]
    if accepted or reply.ok:
        predicted = classify([c.name for c in accepted], [c.input for c in accepted], reply.text if reply.ok else "")
    else:
        predicted = ERROR
    return CaseResult(
        case,
        predicted,
        reply=reply.text,
        calls=list(desk.calls),
        tools_used=list(reply.tools_used),
        usage=reply.usage,
        api_calls=reply.api_calls,
        seconds=time.monotonic() - started,
        error=None if reply.ok else reply.text,
        run=run,
        wrong_details=check_details(case, desk.calls, workspaces),
    )


def progress_line(result: CaseResult, done: int, total: int) -> str:
    """`[ 3/48] ok    research ← research  (voice) "make group therapy better"` and, when wrong, what it did."""
    mark = "ok  " if result.correct else "MISS"
    text = " ".join(result.case.text.split())
    text = text if len(text) <= 70 else text[:69] + "…"
    width = len(str(total))
    line = (
        f"[{done:>{width}}/{total}] {mark} {result.expected:>8} ← {result.predicted:<8} "
        f'{"(voice) " if result.case.input is InputMethod.VOICE else ""}"{text}"'
    )
    if result.error:
        line += f"  [{result.error[:120]}]"
    elif result.wrong_details:
        line += f"  [{'; '.join(result.wrong_details)}]"
    elif not result.correct:
        line += f"  [tools: {', '.join(result.tools_used) or 'none'}]"
    return line


async def run_eval(
    settings: Settings,
    cases: Sequence[Case],
    concurrency: int = 4,
    *,
    progress: Callable[[str], None] | None = None,
    client: anthropic.AsyncAnthropic | None = None,
    repeats: int = 1,
) -> EvalResult:
    """Run every case `repeats` times against the configured API, at most `concurrency` at once; `progress` gets
    one line per run."""
    own_client = client is None
    client = client or make_client(settings)
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="agentlab-routing-eval-"))
    semaphore = asyncio.Semaphore(max(1, concurrency))
    done = 0

    runs = [(case, run) for case in cases for run in range(max(1, repeats))]

    async def one(case: Case, run: int) -> CaseResult:
        nonlocal done
        async with semaphore:
            result = await run_case(settings, client, workspaces, case, run)
        done += 1
        if progress is not None:
            progress(progress_line(result, done, len(runs)))
        return result

    try:
        workspaces = await asyncio.to_thread(make_eval_workspaces, folder)
        results = await asyncio.gather(*(one(case, run) for case, run in runs))
    finally:
        if own_client:
            await client.close()
        await asyncio.to_thread(shutil.rmtree, folder, True)
    return EvalResult(list(results))


# ---------------------------------------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class LabelScore:
    """Precision and recall of one label (None when there is nothing to divide by)."""

    label: str
    expected: int  # cases with this label
    predicted: int  # cases routed to this label
    correct: int

    @property
    def precision(self) -> float | None:
        return self.correct / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.correct / self.expected if self.expected else None


@dataclass(frozen=True)
class Score:
    total: int
    correct: int
    labels: dict[str, LabelScore]
    confusion: dict[tuple[str, str], int]  # (expected, predicted) → count

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


def score(results: Iterable[CaseResult]) -> Score:
    """Confusion counts, per-label precision/recall and overall accuracy."""
    results = list(results)
    confusion = Counter((r.expected, r.predicted) for r in results)
    expected = Counter(r.expected for r in results)
    predicted = Counter(r.predicted for r in results)
    labels = {
        label: LabelScore(label, expected[label], predicted[label], confusion[(label, label)]) for label in LABELS
    }
    return Score(total=len(results), correct=sum(r.correct for r in results), labels=labels, confusion=dict(confusion))


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def confusion_table(results: Iterable[CaseResult]) -> str:
    """Rows = expected label, columns = predicted label, with recall per row, precision per column, and accuracy."""
    s = score(results)
    extra = [p for p in (OTHER, ERROR) if any(pred == p for (_, pred) in s.confusion)]
    columns = [*LABELS, *extra]
    head = "expected \\ predicted"
    first = max(len(head), len("precision"))
    width = max(len(c) for c in columns)
    lines = [f"{head:<{first}} " + " ".join(f"{c:>{width}}" for c in columns) + " │ recall     n"]
    for label in LABELS:
        counts = " ".join(f"{s.confusion.get((label, c), 0):>{width}}" for c in columns)
        ls = s.labels[label]
        lines.append(f"{label:<{first}} {counts} │ {_percent(ls.recall):>6} {ls.expected:>5}")
    precision = " ".join(f"{_percent(s.labels[c].precision) if c in s.labels else '':>{width}}" for c in columns)
    lines.append(f"{'precision':<{first}} {precision} │")
    lines.append(f"accuracy: {s.correct}/{s.total} = {s.accuracy:.1%}")
    return "\n".join(lines)


def misses(results: Iterable[CaseResult]) -> list[str]:
    """One line per misrouted case: its line in the file, expected → predicted, the message and the tools used."""
    out = []
    for r in results:
        if not r.correct:
            what = r.error or "; ".join(r.wrong_details) or f"tools: {', '.join(r.tools_used) or 'none'}"
            out.append(f"line {r.case.line}: {r.expected} → {r.predicted}: {r.case.text!r} ({what[:160]})")
    return out


def flips(results: Iterable[CaseResult]) -> list[str]:
    """One line per case whose runs did not all route the same way (or not all correctly)."""
    runs: dict[int, list[CaseResult]] = {}
    for r in results:
        runs.setdefault(id(r.case), []).append(r)
    out = []
    for group in runs.values():
        outcomes = [f"{r.predicted}{'' if r.correct else '✗'}" for r in group]
        if len(group) > 1 and len(set(outcomes)) > 1:
            case = group[0].case
            out.append(f"line {case.line}: {case.label}: {' / '.join(outcomes)}: {case.text!r}")
    return out


def usage_line(usage: Usage, settings: Settings, api_calls: int) -> str:
    """The tokens spent and their estimated cost from the price table in settings."""
    return (
        f"{api_calls} API calls · tokens: input {usage.input_tokens:,}, output {usage.output_tokens:,}, "
        f"cache write {usage.cache_creation_input_tokens:,}, cache read {usage.cache_read_input_tokens:,} "
        f"· ≈ ${cost_usd(usage, settings):.2f}"
    )


def report(result: EvalResult, settings: Settings) -> str:
    """The whole summary printed at the end: the table, the misses, the usage."""
    parts = [confusion_table(result.results)]
    wrong = misses(result.results)
    if wrong:
        parts.append("misrouted:\n" + "\n".join(f"  {line}" for line in wrong))
    flipped = flips(result.results)
    runs = len({r.run for r in result.results})
    if runs > 1:
        parts.append(
            f"flips ({len(flipped)} of {len({id(r.case) for r in result.results})} cases changed between "
            f"{runs} runs)" + (":\n" + "\n".join(f"  {line}" for line in flipped) if flipped else "")
        )
    parts.append(usage_line(result.usage, settings, result.api_calls))
    return "\n\n".join(parts)


async def main(
    settings: Settings,
    path: Path | str = DEFAULT_CASES,
    limit: int | None = None,
    concurrency: int = 4,
    out: Callable[[str], None] = print,
    repeats: int = 3,
) -> int:
    """`agentlab eval routing`: load, run, print progress and the report; 0 when it ran (whatever the accuracy)."""
    cases = load_cases(path)
    if limit is not None:
        cases = cases[: max(0, limit)]
    plural = "" if len(cases) == 1 else "s"
    out(
        f"Routing eval: {len(cases)} case{plural} from {path}, model {settings.orchestrator_model}, "
        f"{max(1, repeats)} run{'s' if repeats != 1 else ''} each, {max(1, concurrency)} at a time."
    )
    result = await run_eval(settings, cases, concurrency, progress=out, repeats=repeats)
    out("")
    out(report(result, settings))
    return 0
