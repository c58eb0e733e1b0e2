"""A task through the real bot: the orchestrator's `start_task`, the task's end and summary, what the worker was sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from agents.core.models import Caller, Task, TaskStatus
from agents.core.settings import Settings
from agents.store.database import Store
from tests.conftest import USER_ID, BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text

HANG_GUARD = 60.0  # seconds: only a hung task takes this long
T = TypeVar("T")


def start_task(workspace: str, instructions: str, worker: str = "code", background: bool = True) -> dict[str, Any]:
    """The orchestrator's reply that starts a task."""
    arguments = {"workspace": workspace, "worker": worker, "instructions": instructions, "background": background}
    return claude_says.tool_use("start_task", arguments)


async def until(check: Callable[[], Awaitable[T | None]], timeout: float = HANG_GUARD) -> T:
    """Poll an async check until it returns something truthy, and return that."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (found := await check()):
        assert loop.time() < deadline, f"not true within {timeout:g} s"
        await asyncio.sleep(0.05)
    return found


async def ended(bot: BotHarness, task_id: int, timeout: float = HANG_GUARD) -> Task:
    """The task once it is final; past `timeout`, the test fails with the task and its events."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not ((task := await bot.runtime.store.get_task(task_id)) and task.status.is_final):
        if loop.time() >= deadline:
            events = [e.detail for e in await bot.runtime.store.task_events(task_id)]
            raise AssertionError(f"task #{task_id} did not end in {timeout:g} s: {task} {events}")
        await asyncio.sleep(0.05)
    return task


async def final_summary(bot: BotHarness, task_id: int, timeout: float = 30.0) -> tuple[Task, Any]:
    """Wait for the task to end, then return it and its summary message (the one listing its files)."""
    task = await ended(bot, task_id, timeout)
    message = await bot.tg.await_for(
        lambda: next(
            (
                m
                for m in bot.tg.messages(USER_ID)
                if f"Task #{task_id}" in (m.text or "") and "Files:" in (m.text or "")
            ),
            None,
        )
    )
    return task, message


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").split()


def tool_results(model: RoleScript, role: str = "code") -> list[str]:
    """Every tool result the bot sent back to the model of `role` (JSON), each once, in order."""
    texts = []
    for body in model.requests[role]:
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        texts.append(json.dumps(block.get("content")))
    return list(dict.fromkeys(texts))


def everything_said(bot: BotHarness, model: RoleScript, role: str = "code") -> str:
    """All the model of `role` was sent and all the chat showed (every version of every message)."""
    chat = "\n".join(v.text or "" for m in bot.tg.messages(USER_ID) for v in m.history)
    return json.dumps(model.requests[role]) + chat


def corrections(model: RoleScript) -> list[str]:
    """The code worker's turns that told it the tests failed."""
    return [t for t in (last_user_text(r) for r in model.requests["code"]) if "correction " in t and "FAILED" in t]


def requests_naming(model: RoleScript, text: str) -> list[str]:
    """The code worker's later turns (corrections) whose text names `text`."""
    return [t for t in (last_user_text(r) for r in model.requests["code"][1:]) if text in t]


def commit_test_command(repo: Path, command: str) -> None:
    """Commit a `.agentlab.toml` whose [tests] command is `command` (one quick check in place of the repository's
    pytest run: conftest's CALC_QUICK says why), for a test that needs the check to print something of its own."""
    (repo / ".agentlab.toml").write_text(f"[tests]\ncommand = {json.dumps(command)}\n")  # a JSON string is TOML's
    git(repo, "add", ".agentlab.toml")
    git(repo, "commit", "-q", "-m", "the quick test command")


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return claude_says.tool_use("edit_file", {"path": path, "old": old, "new": new})


def write_file(path: str, content: str) -> dict[str, Any]:
    return claude_says.tool_use("write_file", {"path": path, "content": content})


def breaks_then_fixes(path: str, before: str, broken: str, fixed: str) -> list[dict[str, Any]]:
    """A code worker's script: an edit that breaks a test, "done", then (told the tests failed) the fix, "done"."""
    return [
        edit(path, before, broken),
        claude_says.text("Changed."),
        edit(path, broken, fixed),
        claude_says.text("Fixed."),
    ]


async def stored_task(settings: Settings, task_id: int) -> Task | None:
    """The task as the bot's database keeps it, read while no bot runs."""
    store = await Store.open(settings.paths.database_path)
    try:
        return await store.get_task(task_id)
    finally:
        await store.close()


def message_with(bot: BotHarness, *parts: str) -> Any:
    """The first message to the owner's private chat holding every one of `parts`, or None."""
    return next((m for m in bot.tg.messages(USER_ID) if all(p in (m.text or "") for p in parts)), None)


async def fixed_add(bot: BotHarness, caller: Caller) -> Task:
    """A finished code task of `caller`'s conversation on calc (add() fixed), with its branch: something to merge,
    discard or press buttons on. Its worker is scripted here (the bot's model handler is replaced)."""
    model = RoleScript()
    bot.claude.handler = model
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )
    await bot.runtime.crew.races.start_task(caller, "calc", "code", "fix add", True)
    task = await ended(bot, 1, timeout=90)
    assert task.branch and task.status is not TaskStatus.FAILED, task
    return task


async def all_updates_handled(bot: BotHarness, timeout: float = 20.0) -> None:
    """Every injected update was fetched and every handler finished (PTB's own counters)."""
    processor = bot.app.update_processor
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while bot.tg.pending_updates or not bot.app.update_queue.empty() or processor.current_concurrent_updates:
        assert loop.time() < deadline, "the bot is still busy with the updates"
        await asyncio.sleep(0.05)
