"""Attempts through the real bot: the orchestrator's `start_task(attempts=N)`, the scripted attempts that race (each
known by the "attempt K of N" of its first turn), and the group's one summary."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

from tests.conftest import USER_ID, BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.tasks import edit, message_with, until

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


def race_summary(bot: BotHarness, ways: int, group: int = 1) -> Any:
    """The race's summary (not its progress message, which names the attempts too: the summary names its pick)."""
    return next(
        (
            m
            for m in bot.tg.messages(USER_ID)
            if f"Attempts #{group}: {ways} ways" in (m.text or "")
            and ("Pick: attempt" in (m.text or "") or "No pick:" in (m.text or ""))
        ),
        None,
    )


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


def green_at_base(bot: BotHarness) -> None:
    """calc (quick_tests) with add() already right: its one check passes at the base commit."""
    repo = bot.settings.paths.workspace_path / "calc"
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git(repo, "add", "calc.py")
    git(repo, "commit", "-q", "-m", "add() fixed already")


class FirstThenHonest:
    """Two attempts' model: attempt 1 plays `first` (one reply per turn, the last repeats); attempt 2 runs `sleep 0.2`
    until `go` is set, then plays `honest` (so attempt 1 ends first)."""

    def __init__(self, first: list[dict[str, Any]], honest: list[dict[str, Any]]) -> None:
        self.first, self.honest = first, honest
        self.go = threading.Event()
        self._honest_said = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        number = int(ATTEMPT.search(first_text(body)).group(1))
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if number == 1:
            return self.first[min(said, len(self.first) - 1)]
        if not self.go.is_set():
            return claude_says.tool_use("run_command", {"command": "sleep 0.2"})
        with self._lock:
            step = self._honest_said
            self._honest_said += 1
        return self.honest[min(step, len(self.honest) - 1)]


async def race_first_pass_wins(bot: BotHarness, model: RoleScript, play: FirstThenHonest, instructions: str) -> Any:
    """A race of two attempts on calc with first_pass_wins: attempt 1 ends first, attempt 2 is let go once the bot
    had the moment to stop the race at attempt 1; the summary and the attempts' tasks."""
    turn = start_attempts("calc", instructions, 2)
    turn["content"][0]["input"]["first_pass_wins"] = True
    model.add("orchestrator", turn, claude_says.text("Racing; the first pass wins."))
    model.add("code", *[spare(play, why="each step of the attempts") for _ in range(600)])
    bot.say("try two ways, the first that passes wins")
    store = bot.runtime.store

    async def first_ended() -> bool:
        members = await store.attempts.members(1)
        return len(members) == 2 and members[0].status.is_final

    await until(first_ended, timeout=120)
    # the follower wakes at attempt 1's end (engine.wait): give it the moment a first-pass stop would take
    for _ in range(40):
        members = await store.attempts.members(1)
        if members[1].status.is_final:
            break
        await asyncio.sleep(0.05)
    play.go.set()
    summary = await bot.tg.await_for(lambda: race_summary(bot, 2), timeout=180)
    return summary, await store.attempts.members(1)
