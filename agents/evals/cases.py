"""The routing eval's cases: the labels, the case file format (`evals/routing.jsonl`), and how a turn's first
work tool call becomes a label."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agents.core.models import (
    InputMethod,
)
from agents.evals.workspaces import CANNED_PROPOSALS

Label = Literal[
    "direct", "clarify", "research", "code", "frontend", "test", "approval", "reject", "cancel", "schedule", "note"
]
LABELS: tuple[str, ...] = (
    "direct",
    "clarify",
    "research",
    "code",
    "frontend",
    "test",
    "approval",
    "reject",
    "cancel",
    "schedule",
    "note",
)


WORK_TOOLS = {
    "start_research": "research",
    "approve_proposal": "approval",
    "reject_proposal": "reject",
    "cancel_task": "cancel",
    "schedule_task": "schedule",
    "remember": "note",
}


OTHER = "other"  # a work tool call that fits no label (start_task with an unknown worker)


ERROR = "error"  # the turn failed (API error, crash) before any work tool was called


WORKERS = ("code", "frontend", "test")


DEFAULT_CASES = Path(__file__).resolve().parents[2] / "evals" / "routing.jsonl"


EVAL_CHAT_ID = 4242


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
