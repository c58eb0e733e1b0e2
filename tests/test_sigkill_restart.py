"""The bot as a real process, SIGKILLed at unlucky moments, then started again: a task's end and its summary are
stored as one step (a kill while the progress message closes still leaves the summary owed, sent at the next start),
and each message a stop cut short is told even when the start that tells them is killed in turn."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import USER_ID
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.processes import bot_env, launch
from tests.support.tasks import start_task

pytestmark = pytest.mark.slow


def task_status(tmp_path: Path, task_id: int) -> str | None:
    try:
        with contextlib.closing(sqlite3.connect(tmp_path / "data" / "bot.db", timeout=5)) as db:
            row = db.execute("SELECT status FROM tasks WHERE id = ?", (task_id,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


async def test_a_kill_after_a_tasks_end_still_delivers_its_summary(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    """The task's final status is stored, then the bot is killed while it closes the progress message (before the
    summary is sent). After a restart the summary reaches the chat: it was stored with the task's end."""
    model = RoleScript()
    fake_anthropic.handler = model
    model.add("orchestrator", start_task("group-therapy", "Write notes.md."), claude_says.text("Started task #1."))
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "notes.md", "content": "notes\n"}),
        claude_says.text("Wrote notes.md."),
    )
    # the progress message's last edit comes after the final status is stored: its answer is held there
    held = fake_telegram.hold_answer(
        "editMessageText", when=lambda params: (task_status(tmp_path, 1) or "") not in ("", "pending", "in_progress")
    )
    env = bot_env(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    first = launch(env, tmp_path, "first")
    try:
        fake_telegram.send_text(USER_ID, "write notes in group therapy")
        await fake_telegram.await_for(lambda: fake_telegram.hold_taken(held), timeout=90)
        status = task_status(tmp_path, 1)
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 10)
    finally:
        held.set()
        if first.poll() is None:
            first.kill()
    assert status not in (None, "pending", "in_progress"), status
    assert not any("Task #1" in (m.text or "") and "Files:" in (m.text or "") for m in fake_telegram.messages(USER_ID))

    second = launch(env, tmp_path, "second")
    try:
        await fake_telegram.wait_for_request("getUpdates", timeout=60)

        def summary() -> bool:
            return any("needs a look" in (m.text or "") and "Files:" in m.text for m in fake_telegram.messages(USER_ID))

        try:  # the start-up's outbox flush sends it
            await fake_telegram.await_for(summary, timeout=60)
        except TimeoutError:
            chat = [m.text for m in fake_telegram.messages(USER_ID)]
            raise AssertionError(f"task #1 ended ({status}) but its summary was never sent; chat: {chat}") from None
    finally:
        second.send_signal(signal.SIGKILL)
        await asyncio.to_thread(second.wait, 10)


def open_turns(tmp_path: Path) -> int:
    try:
        with contextlib.closing(sqlite3.connect(tmp_path / "data" / "bot.db", timeout=5)) as db:
            return int(db.execute("SELECT count(*) FROM open_turns").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


async def test_a_kill_while_cut_short_notices_go_out_loses_none(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    """Two messages cut short by a SIGKILL; the next start is killed in turn while the first notice is being sent.
    The third start tells the user about the second one too (each turn is forgotten only with its notice queued)."""
    model = RoleScript()
    fake_anthropic.handler = model
    model.add("orchestrator", claude_says.text("Too late to be seen.", delay=30))
    env = bot_env(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    first = launch(env, tmp_path, "first")
    try:
        fake_telegram.send_text(USER_ID, "first question")
        await fake_telegram.await_for(lambda: model.requests["orchestrator"], timeout=60)
        fake_telegram.send_text(USER_ID, "second question")
        await fake_telegram.await_for(lambda: open_turns(tmp_path) == 2, timeout=30)
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 10)
    finally:
        if first.poll() is None:
            first.kill()

    notice = "stopped before it had answered"
    held = fake_telegram.hold_answer("sendMessage", when=lambda params: notice in str(params.get("text", "")))
    second = launch(env, tmp_path, "second")
    try:
        await fake_telegram.await_for(
            lambda: any(notice in (m.text or "") for m in fake_telegram.messages(USER_ID)), timeout=60
        )
        second.send_signal(signal.SIGKILL)
        await asyncio.to_thread(second.wait, 10)
    finally:
        held.set()
        if second.poll() is None:
            second.kill()

    third = launch(env, tmp_path, "third")
    try:
        await fake_telegram.wait_for_request("getUpdates", timeout=60)

        def told() -> list[str]:
            return [m.text or "" for m in fake_telegram.messages(USER_ID) if notice in (m.text or "")]

        try:  # the start-up tells what is left, and sends what the outbox holds
            await fake_telegram.await_for(
                lambda: any("second question" in t for t in told()) and any("first question" in t for t in told()),
                timeout=60,
            )
        except TimeoutError:
            raise AssertionError(f"a message cut short was never told: {told()}") from None
    finally:
        third.send_signal(signal.SIGKILL)
        await asyncio.to_thread(third.wait, 10)
