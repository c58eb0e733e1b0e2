"""The one worker loop: query the model, run the tools it asked for, repeat until it ends its turn or hits a limit."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Awaitable, Callable

import anthropic

from agents.context_budget import create_within_window
from agents.llm import usage_of
from agents.models import Usage
from agents.toolbox import Toolbox

EPHEMERAL = {"type": "ephemeral"}
TRUNCATED = ("not run: your output hit the max_tokens limit and this call was cut off. Write large files in smaller "
             "pieces (write_file a skeleton, then edit_file), or keep each call shorter.")

StepCallback = Callable[[str], Awaitable[None]]
UsageCallback = Callable[[anthropic.types.Message], Awaitable[None]]
Inbox = Callable[[], list[str]]  # notes the user sent while the worker runs (agents/steering.py), read once each


class StopReason(StrEnum):
    FINISHED = "finished"
    STEP_LIMIT = "step limit"
    TIME_LIMIT = "time limit"
    TOKEN_LIMIT = "token limit"


@dataclass
class Limits:
    max_steps: int = 60
    max_seconds: float = 1800.0
    max_tokens: int = 3_000_000


@dataclass
class WorkerResult:
    stop: StopReason
    report: str
    steps: int
    usage: Usage

    @property
    def finished(self) -> bool:
        return self.stop is StopReason.FINISHED

    def reason(self, limits: Limits) -> str:
        return {
            StopReason.FINISHED: "finished",
            StopReason.STEP_LIMIT: f"stopped after {limits.max_steps} steps (step limit)",
            StopReason.TIME_LIMIT: f"stopped after {int(limits.max_seconds)} s (time limit)",
            StopReason.TOKEN_LIMIT: f"stopped after using {self.usage_total:,} tokens (token limit)",
        }[self.stop]

    @property
    def usage_total(self) -> int:
        u = self.usage
        return u.input_tokens + u.output_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens


class _LimitReached(Exception):
    def __init__(self, stop: StopReason) -> None:
        self.stop = stop


def describe_step(name: str, arguments: dict[str, Any]) -> str:
    """A short phrase for the progress message: 'editing calc.py', 'running: pytest -q'."""
    target = arguments.get("path") or arguments.get("pattern") or arguments.get("target") or ""
    verbs = {"read_file": "reading", "write_file": "writing", "edit_file": "editing", "glob": "listing",
             "grep": "searching", "screenshot": "screenshot of"}
    if name == "run_command":
        return f"running: {str(arguments.get('command', ''))[:60]}"
    return f"{verbs.get(name, name)} {target}".strip()


@dataclass
class Worker:
    """A role (system prompt + toolbox) and a conversation that correction turns continue."""

    client: anthropic.AsyncAnthropic
    model: str
    system: str
    toolbox: Toolbox
    limits: Limits
    max_output_tokens: int = 4096
    request_timeout: float | None = None  # a long non-streaming answer needs more than the client's default
    on_step: StepCallback | None = None
    on_usage: UsageCallback | None = None
    inbox: Inbox | None = None
    context_window: int = 200_000  # tokens; near it, older tool results become stubs (agents/context_budget.py)
    messages: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    run_steps: int = 0
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.monotonic)

    async def run(self, instruction: str, attachments: list[dict[str, Any]] | None = None) -> WorkerResult:
        """Add a user turn (the task, or a correction carrying test output) and loop until the model ends its turn.

        `attachments`: content blocks (images, documents) shown before the instruction.
        """
        turn = [*(attachments or []), {"type": "text", "text": instruction}]
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages[-1]["content"].extend(turn)  # after a cut-short turn: keep roles alternating
        else:
            self.messages.append({"role": "user", "content": turn})
        self.started, self.run_steps = time.monotonic(), 0  # each run (task or correction) gets the full limits
        try:
            async with asyncio.timeout(self.limits.max_seconds):
                while True:
                    report = await self.step()
                    if report is not None:
                        return self._result(StopReason.FINISHED, report)
        except _LimitReached as limit:
            return self._result(limit.stop, self._last_text())
        except TimeoutError:
            return self._result(StopReason.TIME_LIMIT, self._last_text())

    async def step(self) -> str | None:
        """One model call and its tool calls; returns the final report when the model ends its turn."""
        if self.run_steps >= self.limits.max_steps:
            raise _LimitReached(StopReason.STEP_LIMIT)
        total = self.usage.input_tokens + self.usage.output_tokens + self.usage.cache_read_input_tokens \
            + self.usage.cache_creation_input_tokens
        if total >= self.limits.max_tokens:
            raise _LimitReached(StopReason.TOKEN_LIMIT)
        self.steps += 1
        self.run_steps += 1
        for note in self.inbox() if self.inbox else []:  # the last message is the user's: the task or tool results
            self.messages[-1]["content"].append({"type": "text", "text": note})
        response = await create_within_window(self, lambda: self.client.messages.create(
            model=self.model,
            max_tokens=self.max_output_tokens,
            system=[{"type": "text", "text": self.system, "cache_control": EPHEMERAL}],
            tools=self._tool_specs(),
            messages=self._cached_messages(),
            **({"timeout": self.request_timeout} if self.request_timeout else {}),
        ))
        self.usage = self.usage + usage_of(response)
        if self.on_usage:
            await self.on_usage(response)
        content = [b.model_dump(exclude_none=True) for b in response.content]
        self.messages.append({"role": "assistant", "content": content})
        if response.stop_reason == "max_tokens" and any(b.type == "tool_use" for b in response.content):
            # A tool call cut off mid-way must not run; say so and let the model do it in smaller pieces.
            self.messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b.id, "is_error": True, "content": TRUNCATED}
                for b in response.content if b.type == "tool_use"]})
            return None
        if response.stop_reason != "tool_use":
            return "".join(b.text for b in response.content if b.type == "text").strip()
        results = []
        for block in response.content:
            if block.type != "tool_use":
                continue
            arguments = dict(block.input or {})
            if self.on_step:
                await self.on_step(describe_step(block.name, arguments))
            result = await self.toolbox.call(block.name, arguments)
            results.append(result.block(block.id))
        self.messages.append({"role": "user", "content": results})
        return None

    def _tool_specs(self) -> list[dict[str, Any]]:
        specs = self.toolbox.specs()
        if specs:
            specs[-1]["cache_control"] = EPHEMERAL
        return specs

    def _cached_messages(self) -> list[dict[str, Any]]:
        """The conversation with one moving cache breakpoint on its last block (incremental prompt caching)."""
        messages = [{"role": m["role"], "content": [dict(b) for b in m["content"]]} for m in self.messages]
        for m in messages:
            for b in m["content"]:
                b.pop("cache_control", None)
        messages[-1]["content"][-1]["cache_control"] = EPHEMERAL
        return messages

    def _last_text(self) -> str:
        for m in reversed(self.messages):
            if m["role"] == "assistant":
                texts = [b.get("text", "") for b in m["content"] if b.get("type") == "text"]
                if any(texts):
                    return "\n".join(texts).strip()
        return ""

    def _result(self, stop: StopReason, report: str) -> WorkerResult:
        # A turn cut short may end on an assistant tool_use; answer it so a correction turn stays valid.
        if self.messages and self.messages[-1]["role"] == "assistant":
            pending = [b for b in self.messages[-1]["content"] if b.get("type") == "tool_use"]
            if pending:
                self.messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": b["id"], "content": "not run: the worker was stopped",
                     "is_error": True} for b in pending]})
        return WorkerResult(stop=stop, report=report, steps=self.steps, usage=self.usage)
