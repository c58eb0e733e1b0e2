"""A worker: a role (system prompt + toolbox) on the shared tool loop, with per-run limits and a report.

The loop itself (model calls, tool calls, stop reasons) is `agents.llm.tool_loop`; this module adds what a
worker's result means: finished, stopped by a limit, or blocked (the model refused, ran out of context,
was cut off, or said `BLOCKED:` because nobody can answer its question mid-task).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic

from agents.core.models import Usage
from agents.core.protocols import MessageModel
from agents.llm.reasoning import Reasoning
from agents.llm.tool_loop import (
    Ending,
    Limits,
    RunClock,
    SpendingCheck,
    ToolLoop,
    as_model,
    describe_step,
    total_tokens,
)
from agents.tools.toolbox import Toolbox

__all__ = ["BLOCKED_MARK", "Ending", "Limits", "Worker", "WorkerResult", "describe_step"]

BLOCKED_MARK = "BLOCKED:"  # a report starting so means the worker could not go on without an answer

StepCallback = Callable[[str], Awaitable[None]]
UsageCallback = Callable[[anthropic.types.Message], Awaitable[None]]
Inbox = Callable[[], list[str]]  # notes the user sent while the worker runs (agents/work/steering.py), read once each


@dataclass
class WorkerResult:
    stop: Ending
    report: str
    usage: Usage

    @property
    def finished(self) -> bool:
        return self.stop is Ending.FINISHED

    @property
    def blocked(self) -> bool:
        """The worker could not do the task (asked, refused, ran out of room); a limit stop is not this."""
        return self.stop in (Ending.BLOCKED, Ending.REFUSED, Ending.CONTEXT_FULL, Ending.CUT_OFF)

    def reason(self, limits: Limits) -> str:
        return {
            Ending.FINISHED: "finished",
            Ending.STEP_LIMIT: f"stopped after {limits.max_steps} steps (step limit)",
            Ending.TIME_LIMIT: f"stopped after {int(limits.max_seconds)} s (time limit)",
            Ending.TOKEN_LIMIT: f"stopped after using {self.usage_total:,} tokens (token limit)",
            Ending.BLOCKED: "the worker is blocked: " + self.report[len(BLOCKED_MARK) :].strip()[:300],
            Ending.REFUSED: "the model refused to continue this task",
            Ending.CONTEXT_FULL: "the worker's conversation outgrew the model's context window",
            Ending.CUT_OFF: "the worker's final answer was cut off at the output token limit",
            Ending.SPENT: "the daily budget (DAILY_BUDGET_USD) was spent while it ran",
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
    request_timeout: float | None = None  # per read of the streamed answer (the client's default when None)
    on_step: StepCallback | None = None
    on_usage: UsageCallback | None = None
    inbox: Inbox | None = None  # notes the user sent while the worker runs, read before each step
    context_window: int | None = (
        200_000  # tokens; near it, older tool results become stubs (agents/llm/context_budget.py)
    )
    reasoning: Reasoning | None = None  # thinking and effort of each request (agents/llm/reasoning.py)
    warn_steps: int = 0  # told this many steps before the step limit to wrap up
    clock: RunClock = field(default_factory=RunClock)  # the run's time limit, for tools that wait (ask_user)
    spending: SpendingCheck | None = None  # before each request: a reason stops the run (the daily budget spent)
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
            reasoning=self.reasoning,
            streamed=True,  # a worker's answer may be long (a whole file, thinking): never capped by a request timeout
            warn_steps=self.warn_steps,
            clock=self.clock,
            spending=self.spending,
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
        stop = result.ending
        if stop is Ending.FINISHED and result.text.startswith(BLOCKED_MARK):
            stop = Ending.BLOCKED
        return WorkerResult(stop=stop, report=result.text, usage=self.loop.usage)

    async def wrap_up(self, stopped: WorkerResult) -> WorkerResult:
        """After the step limit: one last request without tools for the worker's report (the limit stays the
        ending). A run stopped by another limit, or one that ended, is returned as it is."""
        if stopped.stop is not Ending.STEP_LIMIT:
            return stopped
        report = await self.loop.wrap_up()
        return WorkerResult(stop=stopped.stop, report=report or stopped.report, usage=self.loop.usage)
