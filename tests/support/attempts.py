"""Attempts through the real bot: the orchestrator's `start_task(attempts=N)`, the scripted attempts that race (each
known by the "attempt K of N" of its first turn), and the group's one summary."""

from __future__ import annotations

import re
import threading
from typing import Any

from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.support.tasks import edit, message_with

ATTEMPT = re.compile(r"attempt (\d) of (\d)")
# what each attempt does first: only attempt 2 fixes add(); 1 and 3 change it wrongly
FIRST_EDITS = {1: "a * b", 2: "a + b", 3: "abs(a - b)"}


def start_attempts(workspace: str, instructions: str, attempts: Any, worker: str = "code") -> dict[str, Any]:
    arguments = {
        "workspace": workspace,
        "worker": worker,
        "instructions": instructions,
        "background": True,
        "attempts": attempts,
    }
    return claude_says.tool_use("start_task", arguments)


def first_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


class Racers:
    """The code role for every attempt: its first turn waits until all three first turns have arrived (so they run
    at once, and before any correction), then edits calc.py its own way; a correction gets words only."""

    def __init__(self, size: int = 3, edits: dict[int, str] | None = None) -> None:
        self.edits = edits or FIRST_EDITS
        self.turns: list[tuple[int, str]] = []  # (attempt, "first" | "after tool" | "correction"), in arrival order
        self.firsts: dict[int, str] = {}
        self._lock = threading.Lock()
        self._all_started = threading.Barrier(size, timeout=60)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        found = ATTEMPT.search(first_text(body))
        assert found, "an attempt's first turn names it"
        number = int(found.group(1))
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        kind = "first" if said == 0 else ("after tool" if said == 1 else "correction")
        with self._lock:
            self.turns.append((number, kind))
            if kind == "first":
                self.firsts[number] = first_text(body)
        if kind == "first":
            self._all_started.wait()  # a lone attempt would wait here until the barrier breaks: the test fails
            return edit("calc.py", "a - b", self.edits[number])
        if kind == "after tool":
            return claude_says.text(f"Attempt {number}: changed add().")
        return claude_says.text(f"Attempt {number}: I see no better way.")


def summary_of(bot: BotHarness, group: int = 1) -> Any:
    return message_with(bot, f"Attempts #{group}: 3 ways", "Attempt 1", "Attempt 3")


class Plays:
    """The code role for every attempt: attempt K plays `plays[K]`, one reply per turn (the last one repeats); the
    first turns wait for each other, so the attempts run at once."""

    def __init__(self, plays: dict[int, list[dict[str, Any]]]) -> None:
        self.plays = plays
        self._all_started = threading.Barrier(len(plays), timeout=60)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        found = ATTEMPT.search(first_text(body))
        assert found, "an attempt's first turn names it"
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if said == 0:
            self._all_started.wait()
        play = self.plays[int(found.group(1))]
        return play[min(said, len(play) - 1)]
