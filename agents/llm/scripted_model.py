"""A list-driven stand-in for the Messages API (as mini-swe-agent ships its deterministic model).

`ScriptedModel(replies)` satisfies `agents.core.protocols.MessageModel`: each `create` (or `stream`) call takes
the next reply from the list and records the request. Replies are built with `say`, `call` and
`calls`, or are callables of the request. For fast unit tests of the tool loop; the HTTP fakes in
`tests/fakes/` stay for end-to-end tests of the real SDK.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anthropic

Reply = anthropic.types.Message | Callable[[dict[str, Any]], anthropic.types.Message]
_ids = itertools.count(1)


def _message(
    content: list[dict[str, Any]], stop_reason: str, output_tokens: int, input_tokens: int
) -> anthropic.types.Message:
    return anthropic.types.Message.model_validate(
        {
            "id": f"msg_scripted_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    )


def say(
    text: str, stop_reason: str = "end_turn", *, input_tokens: int = 10, output_tokens: int | None = None
) -> anthropic.types.Message:
    """A text answer (`stop_reason` 'refusal', 'max_tokens', … for the other endings)."""
    content = [{"type": "text", "text": text}] if text else []
    return _message(
        content, stop_reason, output_tokens if output_tokens is not None else len(text) // 4 + 1, input_tokens
    )


def calls(
    *tool_calls: tuple[str, dict[str, Any]],
    text: str | None = None,
    stop_reason: str = "tool_use",
    input_tokens: int = 10,
    output_tokens: int = 20,
) -> anthropic.types.Message:
    """A turn calling tools: `calls(("read_file", {"path": "a.py"}), text="Let me look")`."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_scripted_{next(_ids)}", "name": name, "input": dict(arguments)}
        for name, arguments in tool_calls
    ]
    return _message(content, stop_reason, output_tokens, input_tokens)


def call(name: str, arguments: dict[str, Any], **kwargs: Any) -> anthropic.types.Message:
    return calls((name, arguments), **kwargs)


@dataclass
class _TextEvent:
    text: str
    type: str = "text"


class _Stream:
    """The part of the SDK's AsyncMessageStream the loop uses: text events, then the final message."""

    def __init__(self, message: anthropic.types.Message, word_delay: float) -> None:
        self.message, self.word_delay = message, word_delay

    async def __aenter__(self) -> _Stream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def __aiter__(self) -> AsyncIterator[_TextEvent]:
        for block in self.message.content:
            if block.type == "text":
                for word in re.findall(r"\s*\S+|\s+", block.text):
                    await asyncio.sleep(self.word_delay)
                    yield _TextEvent(word)

    async def get_final_message(self) -> anthropic.types.Message:
        return self.message


class ScriptedModel:
    """Answers requests from a list; running out is an error (a test should script every call)."""

    def __init__(self, replies: list[Reply] | None = None, *, delay: float = 0.0, word_delay: float = 0.0) -> None:
        self.replies: deque[Reply] = deque(replies or [])
        self.requests: list[dict[str, Any]] = []
        self.delay, self.word_delay = delay, word_delay

    def add(self, *replies: Reply) -> ScriptedModel:
        self.replies.extend(replies)
        return self

    def _next(self, params: dict[str, Any]) -> anthropic.types.Message:
        self.requests.append(copy.deepcopy(params))
        if not self.replies:
            raise AssertionError(f"ScriptedModel: no reply scripted for request #{len(self.requests)}")
        reply = self.replies.popleft()
        return reply(params) if callable(reply) else reply

    async def create(self, **params: Any) -> anthropic.types.Message:
        message = self._next(params)
        if self.delay:
            await asyncio.sleep(self.delay)
        return message

    def stream(self, **params: Any) -> _Stream:
        return _Stream(self._next(params), self.word_delay)
