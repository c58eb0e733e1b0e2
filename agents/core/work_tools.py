"""The orchestrator's work tools, each written once: the method of the crew part that does it, marked `@work_tool`.

The marked method is the tool, the way the anthropic SDK's `beta_tool` makes a tool of a function: its docstring is
the description the model reads, its parameters after `caller` are the tool's input (typed; an `Arg` in
`Annotated[...]` describes one; one without a default is required). `caller` (the conversation, the request message,
the user) is the bot's to set, and so is a keyword-only parameter (after `*`, such as a button's `anywhere`): neither
is in the schema, and a model that sends one is refused (agents/tools/desk_tools.py builds the tools of a turn and
accepts only the arguments the schema names). The routing eval's desk offers the same definitions with answers of
its own, so there is no second copy of a signature to keep in step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Literal, TypeVar, overload

WorkMethod = Callable[..., Awaitable[str]]
MethodT = TypeVar("MethodT", bound=WorkMethod)

_MARK = "__work_tool__"  # the attribute `work_tool` sets on a method: the tool's name


@dataclass(frozen=True)
class Arg:
    """A work tool argument's description for the model (in `Annotated[...]`); the type comes from the annotation."""

    description: str


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
)  # the work tools the model is offered, in this order (after the look-ups: read_file, glob, grep)


@overload
def work_tool(method: MethodT, /) -> MethodT: ...
@overload
def work_tool(*, name: str) -> Callable[[MethodT], MethodT]: ...
def work_tool(method: MethodT | None = None, /, *, name: str | None = None) -> MethodT | Callable[[MethodT], MethodT]:
    """Mark a crew part's method as a work tool, named as the method or `name`."""

    def mark(function: MethodT) -> MethodT:
        setattr(function, _MARK, name or function.__name__)
        return function

    return mark(method) if method is not None else mark


def tool_name(function: object) -> str | None:
    """The work tool `function` is marked as, if any."""
    name = getattr(function, _MARK, None)
    return name if isinstance(name, str) else None


def work_tool_definitions(part: type) -> dict[str, WorkMethod]:
    """tool name → the marked function defining it, of one part's class."""
    found: dict[str, WorkMethod] = {}
    for klass in reversed(part.__mro__):
        for function in vars(klass).values():
            if (name := tool_name(function)) is not None:
                found[name] = function
    return found


@dataclass(frozen=True)
class WorkTool:
    """One work tool of a desk: `definition`, the marked function that says what the model sees, and `call`, what a
    call runs (called with the caller first, then the model's arguments by name)."""

    definition: WorkMethod
    call: WorkMethod

    @property
    def name(self) -> str:
        name = tool_name(self.definition)
        if name is None:
            raise TypeError(f"{self.definition.__qualname__} is not marked with @work_tool")
        return name


def bound_work_tools(*parts: object) -> list[WorkTool]:
    """Every marked method of `parts`, each called on its part."""
    return [
        WorkTool(function, getattr(part, function.__name__))
        for part in parts
        for function in work_tool_definitions(type(part)).values()
    ]
