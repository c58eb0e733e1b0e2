"""Command and button arguments through the real bot: huge or mistyped ids get a clear reply and change nothing."""

from __future__ import annotations

from agents.core.models import Caller, TaskStatus
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare

HUGE = "9" * 20  # past SQLite's 64-bit INTEGER: binding it raised OverflowError


def texts(bot: BotHarness) -> list[str]:
    return [m.text or "" for m in bot.tg.messages(USER_ID)]


async def test_twenty_digit_ids_get_a_clear_answer(bot: BotHarness) -> None:
    for command in (f"/task {HUGE}", f"/log {HUGE}", f"/cancel {HUGE}", f"/task #{HUGE}"):
        bot.tg.send_command(USER_ID, command)
    replies = await bot.replies(4)
    assert all("not a task number" in r.text or "no task" in r.text for r in replies), [r.text for r in replies]
    assert not any("went wrong" in t for t in texts(bot))

    await bot.runtime.notifier.send(USER_ID, "a message with a forged button")
    [forged] = [m for m in bot.tg.messages(USER_ID) if m.text == "a message with a forged button"]
    for data in (f"task:cancel:{HUGE}", f"task:diff:{HUGE}", f"proposal:approve:{HUGE}"):
        update = bot.tg.press_button(USER_ID, forged.message_id, data, strict=False)
        query_id = update["callback_query"]["id"]
        answer = await bot.tg.await_for(lambda q=query_id: bot.tg.callback_answers.get(q))
        assert "no longer valid" in answer.get("text", "")
    assert not any("went wrong" in t for t in texts(bot))


async def test_cancel_with_a_mistyped_number_cancels_nothing(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    sleeping = claude_says.tool_use("run_command", {"command": "sleep 0.3"})
    model.add("code", *[spare(sleeping, why="a long job: the test ends while it runs") for _ in range(200)])
    await bot.runtime.crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", "a long job", background=True)
    store = bot.runtime.store
    await bot.tg.await_for(lambda: any("⏳" in t for t in texts(bot)))
    bot.tg.send_command(USER_ID, "/cancel 12a")
    reply = await bot.tg.await_for(lambda: next((t for t in texts(bot) if "12a" in t), None))
    assert "not a task number" in reply
    assert (await store.get_task(1)).status is TaskStatus.IN_PROGRESS, "the only running task kept running"
    assert not any("cancelled" in t for t in texts(bot))
