"""The scripted model of every test: `RoleScript`, strict replies to the Messages API, one queue per role.

Two faces, one script:
- behind the fake Anthropic server (`fake.handler = model`), for end-to-end tests through the real SDK: a
  request's role is known by its system prompt (`role_of`), and `model.add(role, *replies)` queues that role's
  replies (the fake server's reply dicts, `tests.fakes.anthropic_server.text`, `tool_use`, …);
- in process, as an `agents.core.protocols.MessageModel` (`create` and `stream`), for unit tests of the tool loop:
  `RoleScript([say(...), call(...)])` answers requests of any role from one list, built with `say`, `call`, `calls`.

It is strict both ways. A request it has no reply for fails the test: the error names the call (its role and number,
the last user text, what was left in the script); it is raised in the server thread, where the fake records it and
answers 500, and the `fake_anthropic` fixture fails the test on it; `model.unexpected` keeps the same lines.
And a reply still queued when a test that passed ends fails it (`tests.fakes.unserved`, checked in
`tests/conftest.py`), one line per reply: its role's queue and what it says. A reply that may stay unused by design is
queued as `spare(reply, why="...")`, the reason in words.
A reply is a reply dict, an `anthropic.types.Message`, or a callable of the request body returning one.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import re
import threading
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anthropic

from agents.llm import prompts
from tests.fakes import unserved
from tests.fakes.unserved import Spare
from tests.fakes.unserved import spare as spare  # queued replies that may stay unused are marked with it

ROLE_MARKERS = list(prompts.BY_ROLE.items())  # a role is known by its whole system prompt, imported
ANY_ROLE = "any role"  # the queue the constructor's list fills: it answers a role whose own queue is empty
Reply = dict[str, Any] | anthropic.types.Message | Callable[[dict[str, Any]], Any] | Spare
_ids = itertools.count(1)


def role_of(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    text = system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)
    for role, marker in ROLE_MARKERS:
        if marker in text:
            return role
    return "unknown"


def last_user_text(body: dict[str, Any]) -> str:
    """All text of the last user message (tool results included)."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else str(inner))
    return "\n".join(parts)


class UnscriptedCall(AssertionError):
    """The model was called where the test scripted no reply."""


class RoleScript:
    """Replies queued per role (`add`) or for any role (the constructor's list); an unscripted call fails."""

    def __init__(self, replies: list[Reply] | None = None, *, delay: float = 0.0, word_delay: float = 0.0) -> None:
        self._queues: dict[str, deque[Reply]] = defaultdict(deque)
        self._queues[ANY_ROLE].extend(replies or [])
        self.requests: dict[str, list[dict[str, Any]]] = defaultdict(list)  # role -> its request bodies
        self.calls: list[dict[str, Any]] = []  # every request, in order
        self.unexpected: list[str] = []  # what each unscripted call was
        self.delay, self.word_delay = delay, word_delay  # in process: before an answer, between streamed words
        self._lock = threading.Lock()
        unserved.track(self)

    def add(self, role: str, *replies: Reply) -> RoleScript:
        with self._lock:
            self._queues[role].extend(replies)
        return self

    def remaining(self, role: str = ANY_ROLE) -> int:
        with self._lock:
            return len(self._queues[role])

    def unserved(self) -> list[str]:
        """The replies still queued and not marked spare, one line each (the check after a test)."""
        with self._lock:
            return [line for role, queue in self._queues.items() for line in unserved.leftovers(f"{role} queue", queue)]

    def _take(self, body: dict[str, Any]) -> Any:
        role = role_of(body)
        with self._lock:
            self.requests[role].append(body)
            self.calls.append(body)
            queue = self._queues[role] or self._queues[ANY_ROLE]
            if not queue:
                self.unexpected.append(self._describe(role, body))
                raise UnscriptedCall(self.unexpected[-1])
            reply = unserved.unwrap(queue.popleft())
        return reply(body) if callable(reply) else reply

    def _describe(self, role: str, body: dict[str, Any]) -> str:
        left = {name: len(queue) for name, queue in self._queues.items() if queue}
        try:
            said = last_user_text(body)
        except (KeyError, IndexError, TypeError):
            said = "?"
        said = said if len(said) <= 300 else said[:300] + "…"
        return (
            f"unscripted model call: {role} call #{len(self.requests[role])} (request #{len(self.calls)}); "
            f"last user text: {said!r}; left in the script: {left or 'nothing'}"
        )

    # the fake server's handler

    def __call__(self, body: dict[str, Any]) -> Any:
        reply = self._take(body)
        if isinstance(reply, anthropic.types.Message):
            return reply.model_dump(include={"content", "stop_reason", "usage"}, exclude_none=True)
        return reply

    # in process: the MessageModel the tool loop takes

    def _message(self, params: dict[str, Any]) -> anthropic.types.Message:
        reply = self._take(copy.deepcopy(params))
        return reply if isinstance(reply, anthropic.types.Message) else _as_message(reply)

    async def create(self, **params: Any) -> anthropic.types.Message:
        message = self._message(params)
        if self.delay:
            await asyncio.sleep(self.delay)
        return message

    def stream(self, **params: Any) -> _Stream:
        return _Stream(self._message(params), self.word_delay)


# --------------------------------------------------------------------------- in-process replies


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


def _as_message(reply: dict[str, Any]) -> anthropic.types.Message:
    """A fake-server reply dict as the SDK's message (tool calls given ids, usage filled in)."""
    if "error" in reply:
        raise AssertionError(f"an error reply is for the fake server, not the in-process model: {reply!r}")
    content = [
        {**block, "id": block.get("id") or f"toolu_scripted_{next(_ids)}"} if block["type"] == "tool_use" else block
        for block in reply["content"]
    ]
    usage = reply.get("usage") or {}
    return _message(
        content, reply.get("stop_reason", "end_turn"), usage.get("output_tokens", 20), usage.get("input_tokens", 10)
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
