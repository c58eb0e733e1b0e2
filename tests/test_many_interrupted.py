"""A restart with many tasks left interrupted: the one this kill interrupted is announced (Resume / Discard) however
many older interruptions, told at earlier starts and never acted on, are newer than it in the task list."""

from __future__ import annotations

from agents.core.models import Task, TaskEvent, TaskStatus, WorkerKind
from agents.store.database import Store
from telegram_bot.app import stop_application
from tests.conftest import USER_ID, make_settings, start_bot

TOLD_BEFORE = 25  # more than any "newest few" a start-up might look at


async def test_a_task_a_kill_interrupted_is_announced_past_many_older_interruptions(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    store = await Store.open(settings.paths.database_path)
    running = await store.add_task(  # created first: the oldest id; the bot was killed while it ran
        Task(chat_id=USER_ID, workspace="calc", worker=WorkerKind.CODE, title="the long one", instructions="i")
    )
    await store.update_task(running.stored_id, status=TaskStatus.IN_PROGRESS)
    for n in range(TOLD_BEFORE):  # interrupted at earlier starts, told then, and left so
        task = await store.add_task(
            Task(chat_id=USER_ID, workspace="calc", worker=WorkerKind.CODE, title=f"old {n}", instructions="i")
        )
        await store.update_task(task.stored_id, status=TaskStatus.INTERRUPTED)
        await store.add_event(TaskEvent(task_id=task.stored_id, kind="announced", detail="interruption announced"))
    await store.close()

    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        told = await fake_telegram.await_for(
            lambda: (
                next((m for m in fake_telegram.messages(USER_ID) if "task #1**" in (m.text or "")), None)
                or next((m for m in fake_telegram.messages(USER_ID) if "task #1 " in (m.text or "")), None)
            ),
            timeout=30,
        )
        assert "the long one" in (told.text or ""), told.text
        assert (await bot.runtime.store.get_task(1)).status is TaskStatus.INTERRUPTED
        assert not any("old " in (m.text or "") for m in fake_telegram.messages(USER_ID)), "told again"
    finally:
        await stop_application(bot.app)
