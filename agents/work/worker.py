"""A worker: a role (system prompt + toolbox) on the shared tool loop, with per-run limits and a report.

The loop itself (model calls, tool calls, stop reasons) is `agents.llm.tool_loop`; this module adds what a
worker's result means: finished, stopped by a limit, or blocked (the model refused, ran out of context,
was cut off, or said `BLOCKED:` because nobody can answer its question mid-task).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import anthropic

from agents.core.models import Usage
from agents.core.protocols import MessageModel
from agents.llm.tool_loop import Ending, Limits, ToolLoop, as_model, describe_step, total_tokens
from agents.tools.toolbox import Toolbox

__all__ = ["BLOCKED_MARK", "Limits", "StopReason", "Worker", "WorkerResult", "describe_step"]

BLOCKED_MARK = "BLOCKED:"  # a report starting so means the worker could not go on without an answer

StepCallback = Callable[[str], Awaitable[None]]
UsageCallback = Callable[[anthropic.types.Message], Awaitable[None]]
Inbox = Callable[[], list[str]]  # notes the user sent while the worker runs (agents/work/steering.py), read once each


class StopReason(StrEnum):
    FINISHED = "finished"
    STEP_LIMIT = "step limit"
    TIME_LIMIT = "time limit"
    TOKEN_LIMIT = "token limit"
    BLOCKED = "blocked"  # report starts with BLOCKED:
    REFUSED = "refusal"
    CONTEXT_FULL = "context window exceeded"
    CUT_OFF = "max_tokens"


_FROM_ENDING = {
    Ending.FINISHED: StopReason.FINISHED,
    Ending.STEP_LIMIT: StopReason.STEP_LIMIT,
    Ending.TIME_LIMIT: StopReason.TIME_LIMIT,
    Ending.TOKEN_LIMIT: StopReason.TOKEN_LIMIT,
    Ending.REFUSED: StopReason.REFUSED,
    Ending.CONTEXT_FULL: StopReason.CONTEXT_FULL,
    Ending.CUT_OFF: StopReason.CUT_OFF,
}


@dataclass
class WorkerResult:
    stop: StopReason
    report: str
    usage: Usage

    @property
    def finished(self) -> bool:
        return self.stop is StopReason.FINISHED

    @property
    def blocked(self) -> bool:
        """The worker could not do the task (asked, refused, ran out of room); a limit stop is not this."""
        return self.stop in (StopReason.BLOCKED, StopReason.REFUSED, StopReason.CONTEXT_FULL, StopReason.CUT_OFF)

    def reason(self, limits: Limits) -> str:
        return {
            StopReason.FINISHED: "finished",
            StopReason.STEP_LIMIT: f"stopped after {limits.max_steps} steps (step limit)",
            StopReason.TIME_LIMIT: f"stopped after {int(limits.max_seconds)} s (time limit)",
            StopReason.TOKEN_LIMIT: f"stopped after using {self.usage_total:,} tokens (token limit)",
            StopReason.BLOCKED: "the worker is blocked: " + self.report[len(BLOCKED_MARK) :].strip()[:300],
            StopReason.REFUSED: "the model refused to continue this task",
            StopReason.CONTEXT_FULL: "the worker's conversation outgrew the model's context window",
            StopReason.CUT_OFF: "the worker's final answer was cut off at the output token limit",
        }[self.stop]

    @property
    def usage_total(self) -> int:
        return total_tokens(self.usage)


@dataclass
class Worker:
    """A role (system prompt + toolbox) and a conversation that correction turns continue."""

    client: MessageModel | anthropic.AsyncAnthropic  # the model seam, or a client whose .messages is one
    model: str
    system: str
    toolbox: Toolbox
    limits: Limits
    max_output_tokens: int = 4096
    request_timeout: float | None = None  # a long non-streaming answer needs more than the client's default
    on_step: StepCallback | None = None
    on_usage: UsageCallback | None = None
    inbox: Inbox | None = None  # notes the user sent while the worker runs, read before each step
    context_window: int | None = (
        200_000  # tokens; near it, older tool results become stubs (agents/llm/context_budget.py)
    )
    loop: ToolLoop = field(init=False)

    def __post_init__(self) -> None:
        self.loop = ToolLoop(
            model=as_model(self.client),
            model_name=self.model,
            system=self.system,
            toolbox=self.toolbox,
            max_output_tokens=self.max_output_tokens,
            request_timeout=self.request_timeout,
            on_step=self.on_step,
            on_response=self.on_usage,
            inbox=self.inbox,
            context_window=self.context_window,
        )

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.loop.messages

    @property
    def usage(self) -> Usage:
        return self.loop.usage

    async def run(self, instruction: str, attachments: list[dict[str, Any]] | None = None) -> WorkerResult:
        """Add a user turn (the task, or a correction carrying test output) and loop until the model ends its turn.

        `attachments`: content blocks (images, documents) shown before the instruction."""
        self.loop.add_user_turn([*(attachments or []), {"type": "text", "text": instruction}])
        result = await self.loop.run(self.limits)
        stop = _FROM_ENDING[result.ending]
        if stop is StopReason.FINISHED and result.text.startswith(BLOCKED_MARK):
            stop = StopReason.BLOCKED
        return WorkerResult(stop=stop, report=result.text, usage=self.loop.usage)
