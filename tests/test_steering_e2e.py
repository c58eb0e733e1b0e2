"""Steering a running task end to end: a reply to its progress message, or the orchestrator's message_task, reaches
the worker's next request as a user note; the progress message shows it, the latest steps and the criteria."""

from __future__ import annotations

import asyncio
import json
import threading

from agents.core.models import Caller, Task, TaskStatus, WorkerKind
from agents.store.database import Store
from agents.work.progress import Progress
from tests.conftest import USER_ID, BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text
from tests.support.tasks import ended

NOTE = "also update the README"


def held_until(go: threading.Event, reply: dict):
    """A scripted reply that the fake model only sends once the test says so (the request is in flight meanwhile)."""

    def answer(body: dict) -> dict:
        go.wait(30)
        return reply

    return answer


async def progress_message(bot: BotHarness, task_id: int):
    task = await bot.runtime.store.get_task(task_id)
    while task.progress_message_id is None:
        await asyncio.sleep(0.02)
        task = await bot.runtime.store.get_task(task_id)
    return bot.tg.message(USER_ID, task.progress_message_id)


async def test_a_reply_to_the_progress_message_reaches_the_workers_next_request(
    bot: BotHarness, model: RoleScript
) -> None:
    go = threading.Event()
    model.add(
        "code",
        claude_says.tool_use("verify_criterion", {"index": 1, "evidence": "app.py prints hi"}),
        held_until(go, claude_says.tool_use("verify_criterion", {"index": 2, "evidence": "README has it"})),
        claude_says.text("Done, README updated too."),
    )
    await bot.runtime.crew.races.start_task(
        Caller(chat_id=USER_ID),
        "group-therapy",
        "code",
        "Tidy app.py.",
        background=True,
        acceptance_criteria=["app.py prints hi", "README mentions it"],
    )
    progress = await progress_message(bot, 1)
    await bot.tg.await_for(lambda: len(model.requests["code"]) == 2, timeout=20)

    bot.tg.send_text(USER_ID, NOTE, reply_to_message_id=progress.message_id)
    ack = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "Note passed to task #1" in (m.text or "")), None)
    )
    assert ack.reply_to_message_id is not None
    shown = await bot.tg.await_for(
        lambda: next((v.text for v in reversed(progress.history) if "note received" in (v.text or "")), None)
    )
    assert "1/2 criteria verified" in shown and "⏱ 0m" in shown
    assert shown.splitlines()[-3:] == ["• verify_criterion", "• verified criterion 1", "• 📝 note received"]
    go.set()

    task = await ended(bot, 1)
    assert task.status is TaskStatus.UNVERIFIED  # ended; no tests in group-therapy
    assert NOTE not in str(model.requests["code"][1]["messages"]), "the request in flight was sent before the note"
    assert NOTE in last_user_text(model.requests["code"][2]), "the next request carries the note"
    assert model.requests["orchestrator"] == [], "a note is not a chat turn"
    assert any(e.kind == "note" and e.detail == NOTE for e in await bot.runtime.store.task_events(1))

    model.add("orchestrator", claude_says.text("That task is finished; want a new one?"))
    bot.tg.send_text(USER_ID, "and the changelog", reply_to_message_id=progress.message_id)
    refusal = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "is unverified" in (m.text or "")), None)
    )
    assert refusal.text.startswith("Task #1 is unverified") and "normal message" in refusal.text
    await bot.tg.await_for(
        lambda: any(m.text == "That task is finished; want a new one?" for m in bot.tg.messages(USER_ID))
    )
    assert "and the changelog" in model.requests["orchestrator"][0]["messages"][-1]["content"][0]["text"]


async def test_message_task_reaches_the_running_worker_and_a_finished_task_says_no(
    bot: BotHarness, model: RoleScript
) -> None:
    go = threading.Event()
    model.add(
        "code", held_until(go, claude_says.tool_use("read_file", {"path": "README.md"})), claude_says.text("Done.")
    )
    await bot.runtime.crew.races.start_task(
        Caller(chat_id=USER_ID), "group-therapy", "code", "Tidy app.py.", background=True
    )
    await bot.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=20)
    model.add(
        "orchestrator", claude_says.tool_use("message_task", {"task_id": 1, "text": NOTE}), claude_says.text("Told #1.")
    )
    bot.say("tell #1 to also update the README")
    await bot.tg.await_for(lambda: any(m.text == "Told #1." for m in bot.tg.messages(USER_ID)))
    result = model.requests["orchestrator"][1]["messages"][-1]["content"][0]
    assert not result.get("is_error") and "Note passed to task #1" in result["content"]
    go.set()
    assert (await ended(bot, 1)).status is TaskStatus.UNVERIFIED  # ended; no tests in group-therapy
    assert NOTE in last_user_text(model.requests["code"][1])

    model.add(
        "orchestrator",
        claude_says.tool_use("message_task", {"task_id": 1, "text": "one more thing"}),
        claude_says.text("It has finished."),
    )
    bot.say("tell #1 one more thing")
    await bot.tg.await_for(lambda: any(m.text == "It has finished." for m in bot.tg.messages(USER_ID)))
    result = model.requests["orchestrator"][3]["messages"][-1]["content"][0]
    assert (
        result["is_error"]
        and "task #1 is unverified" in result["content"]
        and "only a running task" in result["content"]
    )


async def test_a_note_the_worker_never_read_is_reported(bot: BotHarness, model: RoleScript) -> None:
    go = threading.Event()
    model.add("code", held_until(go, claude_says.text("Finished without another step.")))
    await bot.runtime.crew.races.start_task(
        Caller(chat_id=USER_ID), "group-therapy", "code", "Tidy app.py.", background=True
    )
    await bot.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=20)
    assert "Note passed" in await bot.runtime.crew.attempts.message_task(Caller(chat_id=USER_ID), 1, NOTE)
    go.set()
    told = await bot.tg.await_for(
        lambda: next(
            (m for m in bot.tg.messages(USER_ID) if "before its worker read your note" in (m.text or "")), None
        )
    )
    assert NOTE in told.text


class RecordingNotifier:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def send(self, chat_id: int, markdown: str, *, buttons=None, reply_to=None) -> int:
        self.texts.append(markdown)
        return 7

    async def edit(self, chat_id: int, message_id: int, markdown: str, *, buttons=None) -> None:
        self.texts.append(markdown)


async def test_progress_shows_the_last_three_steps_elapsed_time_and_criteria(tmp_path) -> None:
    store = await Store.open(tmp_path / "db.sqlite")
    task = await store.add_task(
        Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="Fix add", instructions="i")
    )
    notifier = RecordingNotifier()
    progress = Progress(notifier, store, task)
    await progress.open()
    assert notifier.texts[-1].splitlines()[-1] == "• starting"
    progress.started -= 125
    progress.criteria = "2/5 criteria verified"
    for step in ("reading calc.py", "editing calc.py", "running: pytest -q", "editing test_calc.py"):
        await progress.update(step, force=True)
    progress.stop()
    lines = notifier.texts[-1].splitlines()
    assert lines[2] == "⏱ 2m05s · 2/5 criteria verified"
    assert lines[3:] == ["• editing calc.py", "• running: pytest -q", "• editing test_calc.py"]
    await store.close()


async def test_a_note_a_restart_kept_from_the_worker_reaches_the_resumed_one_once(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo
) -> None:
    """The chat is told "Note passed to task #1; its worker reads it before its next step", and the bot stops before
    that step: the note lived in memory only, so the resumed worker never got it (and no one said so). Now the
    resumed worker's first turn carries it; a note the worker did read is not handed over again."""
    read_note, kept_note = "use tabs, not spaces", "also update the README"
    model = RoleScript()
    first, second = threading.Event(), threading.Event()

    def held(gate: threading.Event, path: str):
        def answer(body: dict) -> dict:
            gate.wait(30)
            return claude_says.tool_use("read_file", {"path": path})

        return answer

    model.add("code", held(first, "app.py"), held(second, "README.md"))
    caller = Caller(chat_id=USER_ID)
    try:
        async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
            bot.claude.handler = model
            await bot.runtime.crew.races.start_task(caller, "group-therapy", "code", "Tidy app.py.", background=True)
            await bot.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=30)
            await bot.runtime.crew.attempts.message_task(caller, 1, read_note)  # taken before the second step
            first.set()
            await bot.tg.await_for(lambda: len(model.requests["code"]) == 2, timeout=30)
            assert read_note in json.dumps(model.requests["code"][1]["messages"])
            said = await bot.runtime.crew.attempts.message_task(caller, 1, kept_note)
            assert said.startswith("Note passed to task #1")
    finally:
        first.set(), second.set()
    model.add("code", claude_says.text("Done."))
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        bot.claude.handler = model
        assert (await bot.runtime.store.get_task(1)).status is TaskStatus.INTERRUPTED
        await bot.runtime.crew.branches.resume(caller, 1)
        await ended(bot, 1)
    resumed = json.dumps(model.requests["code"][-1]["messages"][0])
    assert kept_note in resumed, "the note the restart kept from the worker is in the resumed worker's first turn"
    assert read_note not in resumed, "the note the worker had read is not handed over again"
