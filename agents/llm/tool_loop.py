"""The one tool-use loop of every agent: ask the model, run the tools it called, repeat until it ends or a limit is hit.

The orchestrator and every worker run this loop; they differ only in configuration (tool set, limits,
whether the last round may call tools, whether the answer streams). All stop-reason handling lives here:
a tool call cut off at `max_tokens` is answered with an error and retried, never taken as the answer;
`refusal`, `model_context_window_exceeded` and a text-only `max_tokens` end the loop with their own ending; an
answer with no stop reason at all (its stream cut short) is raised as a lost connection, never taken as finished.
The model is reached through `MessageModel`, the seam that `SdkModel` (the SDK's client) fills and
`tests.scripted.RoleScript` plays in unit tests.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, cast

import anthropic
import httpx2 as httpx

from agents.core.models import Usage
from agents.core.protocols import AnswerStream, MessageModel
from agents.llm.calls_in_flight import IN_FLIGHT
from agents.llm.client import usage_of
from agents.llm.context_budget import create_within_window, fixed_tokens
from agents.llm.raw_stream import stream_message
from agents.llm.reasoning import Reasoning
from agents.tools.toolbox import Toolbox, ToolResult, masked

EPHEMERAL = {"type": "ephemeral"}
TRUNCATED = (
    "not run: your output hit the max_tokens limit and this call was cut off. Write large files in smaller "
    "pieces (write_file a skeleton, then edit_file), or keep each call shorter."
)
STOPPED = "not run: the agent was stopped"
# what the error raised for an answer without a stop reason names as its request (the model seam has none to give)
CUT = httpx.Request("POST", "https://api.anthropic.com/v1/messages")
WRAP_UP = (
    "Note from the bot: you have reached your step limit, so no more tool calls can run. Write your final report "
    "now: what you changed and why, the files touched, what you checked and how, and what is left to do."
)


def steps_left_note(left: int, limit: int) -> str:
    """The warning a few steps before the step limit."""
    return (
        f"Note from the bot: {left} steps left before your step limit ({limit}). Finish the change you are making, "
        "run the test command the bot judges by, and write your final report; leave the rest as next steps."
    )


class SdkModel:
    """`MessageModel` over the SDK's client: its `messages.create` and `messages.stream` (whose overloads name each
    parameter, where the seam passes them on as keywords)."""

    def __init__(self, client: anthropic.AsyncAnthropic) -> None:
        self.client = client

    async def create(self, **params: Any) -> anthropic.types.Message:
        message: anthropic.types.Message = await self.client.messages.create(**params)
        return message

    def stream(self, **params: Any) -> AbstractAsyncContextManager[Any]:
        return self.client.messages.stream(**params)


def as_model(client: MessageModel | anthropic.AsyncAnthropic) -> MessageModel:
    """The seam from a client (`SdkModel`) or a model given as is (the tests' scripted model)."""
    return SdkModel(client) if isinstance(client, anthropic.AsyncAnthropic) else client


class Ending(StrEnum):
    """Why a loop stopped."""

    FINISHED = "finished"
    STEP_LIMIT = "step limit"
    TIME_LIMIT = "time limit"
    TOKEN_LIMIT = "token limit"
    REFUSED = "refusal"
    CONTEXT_FULL = "context window exceeded"
    CUT_OFF = "max_tokens"  # a text-only answer cut off at the output limit
    SPENT = "budget spent"  # `spending` said no more may be spent (the daily budget), before a request
    BLOCKED = "blocked"  # set by a worker, not the loop: it finished with a report starting BLOCKED:


@dataclass
class Limits:
    max_steps: int = 60
    max_seconds: float = 1800.0
    max_tokens: int = 3_000_000


@dataclass
class LoopResult:
    ending: Ending
    text: str
    steps: int


StepCallback = Callable[[str], Awaitable[None]]
SpendingCheck = Callable[[], Awaitable[str | None]]  # why no more may be spent now (None: go on)
ResponseCallback = Callable[[anthropic.types.Message], Awaitable[None]]


def describe_step(name: str, arguments: dict[str, Any]) -> str:
    """A short phrase for the chat: 'editing calc.py', 'running: pytest -q'."""
    target = arguments.get("path") or arguments.get("pattern") or arguments.get("target") or ""
    verbs = {
        "read_file": "reading",
        "write_file": "writing",
        "edit_file": "editing",
        "glob": "listing",
        "grep": "searching",
        "screenshot": "screenshot of",
    }
    if name == "run_command":
        return f"running: {str(arguments.get('command', ''))[:60]}"
    return f"{verbs.get(name, name)} {target}".strip()


def total_tokens(u: Usage) -> int:
    return u.input_tokens + u.output_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens


async def _ignore(_text: str) -> None:
    """The answer's text of a streamed request nobody watches (a worker's): gathered into its message only."""


class _LimitReached(Exception):
    def __init__(self, ending: Ending) -> None:
        self.ending = ending


class RunClock:
    """The time limit of a loop's running run, read from outside it: a question to the user waits no longer than the
    run has left. Whoever builds the loop and the tools that wait makes one and gives it to both."""

    def __init__(self) -> None:
        self._deadline: asyncio.Timeout | None = None

    def start(self, deadline: asyncio.Timeout | None) -> None:
        """A run began, bounded by `deadline` (None: ended)."""
        self._deadline = deadline

    def seconds_left(self) -> float | None:
        """What is left of the running run's time limit (None: no run, or no limit); a wait inside a tool (a question
        to the user) counts against it like any other work."""
        when = self._deadline.when() if self._deadline is not None else None
        return None if when is None else max(0.0, when - asyncio.get_running_loop().time())


@dataclass
class ToolLoop:
    """One agent's conversation with the model and its tools; `run` continues it with the next user turn."""

    model: MessageModel
    model_name: str
    system: str
    toolbox: Toolbox
    max_output_tokens: int = 4096
    request_timeout: float | None = None
    tools_on_last_step: bool = True  # False: the step at the limit is asked to answer without tools
    moving_cache: bool = True  # one cache breakpoint on the newest block (False: the caller marked the messages)
    on_step: StepCallback | None = None
    on_response: ResponseCallback | None = None
    answer: AnswerStream | None = None  # set: each request streams, its text and tool activity go here
    inbox: Callable[[], list[str]] | None = None  # steering: notes for the model, read before each request
    context_window: int | None = None  # set: older tool results are stubbed near it (agents/llm/context_budget.py)
    reasoning: Reasoning | None = None  # thinking and effort parameters of each request (agents/llm/reasoning.py)
    streamed: bool = False  # stream each request even without an answer stream: max_tokens may pass ~21k then
    warn_steps: int = 0  # this many steps before the step limit the model is told so (0: never)
    cache_ttl: Literal["5m", "1h"] = "5m"  # "1h": the cache outlives a long wait (a test run) before the next request
    spending: SpendingCheck | None = None  # asked before each request: the run ends SPENT when it gives a reason
    messages: list[dict[str, Any]] = field(default_factory=list)
    # the API's own count of the last request: (how many messages it had, its input tokens, cached ones included)
    measured: tuple[int, int] | None = None
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    tools_used: list[str] = field(default_factory=list)
    clock: RunClock = field(default_factory=RunClock)  # the running run's time limit, for the tools that wait
    _release: Callable[[], None] | None = field(default=None, repr=False)  # the next request's hold on the budget

    def keep_cache_for(self, ttl: Literal["5m", "1h"]) -> None:
        """The cache lifetime the next requests ask for: "1h" when a long wait (a test run) comes before the next."""
        self.cache_ttl = ttl

    def seconds_left(self) -> float | None:
        """What is left of the running run's time limit (`RunClock.seconds_left`)."""
        return self.clock.seconds_left()

    def add_user_turn(self, blocks: list[dict[str, Any]]) -> None:
        """A new user turn of content blocks (text, images, documents), kept alternating after a turn that ended on
        tool results (the blocks join that user turn). Text is masked by the one output filter:
        a test run's output or a note quoting a command reaches the model without known secrets."""
        blocks = masked(self.toolbox.secrets, blocks)
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages[-1]["content"].extend(blocks)
        else:
            self.messages.append({"role": "user", "content": list(blocks)})

    async def run(self, limits: Limits) -> LoopResult:
        """Step until the model ends its turn or a limit is hit; each run gets the full limits."""
        steps = 0
        started = time.monotonic()
        timeout = None if math.isinf(limits.max_seconds) else limits.max_seconds
        try:
            async with asyncio.timeout(timeout) as deadline:
                self.clock.start(deadline)
                while True:
                    # the limits on spending first: a run ended by its steps gets one more request, for its report
                    if total_tokens(self.usage) >= limits.max_tokens:
                        raise _LimitReached(Ending.TOKEN_LIMIT)
                    if await self._spending_refused():
                        raise _LimitReached(Ending.SPENT)
                    if steps >= limits.max_steps:
                        self._let_go()
                        raise _LimitReached(Ending.STEP_LIMIT)
                    if self._warn_now(limits, steps):
                        self.messages[-1]["content"].append(
                            {"type": "text", "text": steps_left_note(self.warn_steps, limits.max_steps)}
                        )
                    steps += 1
                    last = steps == limits.max_steps and not self.tools_on_last_step
                    ended = await self.step(without_tools=last)
                    if ended is not None:
                        return LoopResult(ended[0], ended[1], steps)
        except _LimitReached as limit:
            return self._stopped(limit.ending, steps)
        except TimeoutError:
            if time.monotonic() - started < limits.max_seconds * 0.99:
                raise  # not our deadline: a timeout from inside (an SDK or tool timeout)
            return self._stopped(Ending.TIME_LIMIT, steps)
        finally:
            self._let_go()
            self.clock.start(None)

    async def _spending_refused(self) -> bool:
        """Whether `spending` refuses the next request; when it lets it go, the request's largest cost is held
        against the budget (agents/llm/calls_in_flight.py) until its usage is recorded (`_let_go`)."""
        if self.spending is None:
            return False
        self._let_go()
        most = Usage(input_tokens=self.measured[1] if self.measured else 0, output_tokens=self.max_output_tokens)
        refusal, self._release = await IN_FLIGHT.admit(most, self.spending)
        return refusal is not None

    def _let_go(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    def _warn_now(self, limits: Limits, steps: int) -> bool:
        """Whether the step about to start is the one to warn before (the newest turn is the user's to add to)."""
        due = self.warn_steps and steps and limits.max_steps - steps == self.warn_steps
        return bool(due and self.messages and self.messages[-1]["role"] == "user")

    def request_messages(self) -> list[dict[str, Any]]:
        """The messages of the next request. The one place they are assembled (a steering note goes in here)."""
        if not self.moving_cache:
            return self.messages
        messages = [{"role": m["role"], "content": [dict(b) for b in m["content"]]} for m in self.messages]
        for m in messages:
            for b in m["content"]:
                b.pop("cache_control", None)
        messages[-1]["content"][-1]["cache_control"] = self._cache_control()
        return messages

    def _cache_control(self) -> dict[str, str]:
        """Every breakpoint of a request with the same lifetime (the API wants longer ones first)."""
        return EPHEMERAL if self.cache_ttl == "5m" else {**EPHEMERAL, "ttl": self.cache_ttl}

    def _request(self, without_tools: bool) -> dict[str, Any]:
        tools = self.toolbox.specs()  # no breakpoint of their own: the system's breakpoint caches them too
        params: dict[str, Any] = dict(
            model=self.model_name,
            max_tokens=self.max_output_tokens,
            system=[{"type": "text", "text": self.system, "cache_control": self._cache_control()}],
            messages=self.request_messages(),
        )
        if tools:
            params["tools"] = tools
            params["tool_choice"] = {"type": "none"} if without_tools else {"type": "auto"}
        if self.reasoning is not None:
            params.update(self.reasoning.params(self.model_name, self.max_output_tokens))
        if self.request_timeout:
            params["timeout"] = self.request_timeout
        return params

    async def _call(self, params: dict[str, Any]) -> anthropic.types.Message:
        if self.answer is None and not self.streamed:
            return await self.model.create(**params)
        on_text = self.answer.text if self.answer is not None else _ignore
        if isinstance(self.model, SdkModel):  # the real SDK: read raw (agents/llm/raw_stream.py says why)
            return await stream_message(self.model.client, params, on_text)
        async with self.model.stream(**params) as stream:
            async for event in stream:
                if event.type == "text" and event.text:
                    await on_text(event.text)
            final = await stream.get_final_message()  # typed Any: `model` is a protocol the test doubles meet too
            return cast(anthropic.types.Message, final)

    async def _send(self, without_tools: bool) -> anthropic.types.Message:
        """One request; the conversation fitted to the context window first (when there is one), and the API's
        count of its input kept for the next estimate."""
        if self.context_window:
            fixed = fixed_tokens(self.system, self.toolbox.specs())
            response = await create_within_window(
                self, self.context_window, lambda: self._call(self._request(without_tools)), fixed
            )
        else:
            response = await self._call(self._request(without_tools))
        u = usage_of(response)
        sent = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
        self.measured = (len(self.messages), sent) if sent > 0 else None
        return response

    async def wrap_up(self, note: str = WRAP_UP) -> str:
        """One last request without tools after a limit stopped the run: the model's report, '' if it gave none (or
        when `spending` says no more may be spent: the daily budget may have run out since the run stopped)."""
        if await self._spending_refused():
            return ""
        self.add_user_turn([{"type": "text", "text": note}])
        try:
            response = await self._send(without_tools=True)
            self.api_calls += 1
            self.usage = self.usage + usage_of(response)
            if self.on_response:
                await self.on_response(response)
        finally:
            self._let_go()
        if response.content:
            self.messages.append(
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]}
            )
        self._answer_pending()
        return "".join(b.text for b in response.content if b.type == "text").strip()

    async def step(self, without_tools: bool = False) -> tuple[Ending, str] | None:
        """One model call and its tool calls; returns (ending, text) when the loop is over."""
        for note in self.inbox() if self.inbox else []:  # the last message is the user's: a turn or tool results
            self.messages[-1]["content"].append({"type": "text", "text": self.toolbox.secrets.mask(note)})
        response = await self._send(without_tools)
        self.api_calls += 1
        self.usage = self.usage + usage_of(response)
        if self.on_response:
            await self.on_response(response)
        self._let_go()  # its usage is recorded: the hold on the budget is not needed any more
        stop = response.stop_reason
        if stop is None:  # an answer that never ended (its stream cut short): never the finished answer, nor run
            raise anthropic.APIConnectionError(message="the model's answer ended without a stop reason", request=CUT)
        calls = [b for b in response.content if b.type == "tool_use"]
        text = "".join(b.text for b in response.content if b.type == "text").strip()
        if response.content:
            self.messages.append(
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]}
            )
        if stop == "max_tokens" and calls:
            # A tool call cut off mid-way must not run, nor count as the answer; say so, let the model retry.
            self.messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": b.id, "is_error": True, "content": TRUNCATED}
                        for b in calls
                    ],
                }
            )
            return None
        if stop == "tool_use" and calls:
            results = await self._run_tools(calls)
            self.messages.append({"role": "user", "content": results})
            return None
        if stop == "pause_turn":  # the API paused a long turn; sending it back continues it
            return None
        ending = {
            "refusal": Ending.REFUSED,
            "model_context_window_exceeded": Ending.CONTEXT_FULL,
            "max_tokens": Ending.CUT_OFF,
        }.get(stop, Ending.FINISHED)
        return ending, text

    async def _run_tools(self, calls: list[Any]) -> list[dict[str, Any]]:
        """The results of one turn's tool calls, in the order they were called. Calls of read-only tools next to each
        other run at the same time (a turn reading five files waits for the slowest, not for all five in a row);
        any other call runs alone, after what came before it and before what comes after."""
        groups: list[list[Any]] = []  # runs of read-only calls, and every other call alone
        previous_read_only = False
        for block in calls:
            tool = self.toolbox.tools.get(block.name)
            read_only = tool is not None and tool.read_only
            if read_only and previous_read_only:
                groups[-1].append(block)
            else:
                groups.append([block])
            previous_read_only = read_only
        results: list[dict[str, Any]] = []
        for blocks in groups:
            for block in blocks:
                description = describe_step(block.name, dict(block.input or {}))
                self.tools_used.append(block.name)
                if self.on_step:
                    await self.on_step(description)
                if self.answer is not None:
                    await self.answer.activity(description)
            done = await asyncio.gather(*self._in_call_order(blocks))
            results += [result.block(b.id) for result, b in zip(done, blocks, strict=True)]
        return results

    def _in_call_order(self, blocks: list[Any]) -> list[Coroutine[Any, Any, ToolResult]]:
        """The calls of one group, to run at once; each is recorded after the one before it (the audit log keeps the
        model's order whichever finishes first)."""
        recorded = [asyncio.Event() for _ in blocks]

        async def one(n: int, block: Any) -> ToolResult:
            try:
                return await self.toolbox.call(
                    block.name, dict(block.input or {}), recorded_after=recorded[n - 1] if n else None
                )
            finally:
                recorded[n].set()

        return [one(n, block) for n, block in enumerate(blocks)]

    def _answer_pending(self) -> None:
        """Answer the tool calls of the last assistant turn, if any, as not run (the conversation stays valid)."""
        if self.messages and self.messages[-1]["role"] == "assistant":
            pending = [b for b in self.messages[-1]["content"] if b.get("type") == "tool_use"]
            if pending:
                self.messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": b["id"], "content": STOPPED, "is_error": True}
                            for b in pending
                        ],
                    }
                )

    def _stopped(self, ending: Ending, steps: int) -> LoopResult:
        self._answer_pending()  # stopped mid-turn: a pending tool call is answered, the conversation stays valid
        return LoopResult(ending, self.last_text(), steps)

    def last_text(self) -> str:
        for m in reversed(self.messages):
            if m["role"] == "assistant":
                texts = [b.get("text", "") for b in m["content"] if b.get("type") == "text"]
                if any(texts):
                    return "\n".join(texts).strip()
        return ""
