"""RoleScript: the fake Anthropic server's script, one queue of replies per role (agents.llm.scripted_model.ScriptedModel
is the other scripted model: a MessageModel for unit tests of the loop, no server)."""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from agents.llm import prompts
from tests.fakes import anthropic_server as claude_says

ROLE_MARKERS = list(prompts.BY_ROLE.items())  # a role is known by its whole system prompt, imported


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


class RoleScript:
    """Install with `fake.handler = model`; add replies per role; unscripted calls answer 'done'."""

    def __init__(self) -> None:
        self._queues: dict[str, deque] = defaultdict(deque)
        self.requests: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()

    def add(self, role: str, *replies: dict[str, Any] | Callable[[dict[str, Any]], Any]) -> RoleScript:
        with self._lock:
            self._queues[role].extend(replies)
        return self

    def __call__(self, body: dict[str, Any]) -> Any:
        role = role_of(body)
        with self._lock:
            self.requests[role].append(body)
            reply = self._queues[role].popleft() if self._queues[role] else claude_says.text(f"done ({role})")
        return reply(body) if callable(reply) else reply

    def remaining(self, role: str) -> int:
        with self._lock:
            return len(self._queues[role])
