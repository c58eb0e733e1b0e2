"""Strangers through the real bot: one refusal each per period, and a flood of them never delays the owner."""

from __future__ import annotations

import asyncio

from tests.conftest import STRANGER_ID, USER_ID, BotHarness
from tests.support.tasks import all_updates_handled

REFUSALS_PER_MINUTE = 20  # telegram_bot.strangers.REFUSALS_PER_MINUTE (not imported: the test also runs on old code)


def to(chat_id: int, calls) -> list:
    return [c for c in calls if c.params.get("chat_id") == chat_id]


async def test_sixty_messages_from_one_stranger_get_one_refusal(bot: BotHarness) -> None:
    for i in range(60):
        bot.tg.send_text(STRANGER_ID, f"let me in {i}")
    await bot.tg.wait_for_message(STRANGER_ID, 1)
    await all_updates_handled(bot)
    assert [m.text for m in bot.tg.messages(STRANGER_ID)] == ["Sorry, this is a private bot."]
    assert len(to(STRANGER_ID, bot.tg.calls("sendMessage"))) == 1
    assert bot.claude.calls == 0


async def test_a_crowd_of_strangers_does_not_delay_the_owner(bot: BotHarness) -> None:
    strangers = [50_000 + n for n in range(150)]
    for stranger in strangers:
        bot.tg.send_text(stranger, "hello?")
    bot.tg.send_command(USER_ID, "/status")
    await bot.tg.await_for(lambda: any("Active tasks" in (m.text or "") for m in bot.tg.messages(USER_ID)), timeout=20)
    await all_updates_handled(bot)
    sends = [c.params.get("chat_id") for c in bot.tg.calls("sendMessage")]
    owner_at = sends.index(USER_ID)
    assert owner_at <= REFUSALS_PER_MINUTE, f"{owner_at} refusals went out before the owner's answer"
    assert len([c for c in sends if c != USER_ID]) <= REFUSALS_PER_MINUTE, "past the budget strangers are ignored"


async def test_a_guard_that_fails_lets_nothing_through(bot: BotHarness, monkeypatch, caplog) -> None:
    """python-telegram-bot hands an error raised in a handler to the error handler and goes on with the next handler
    groups: a guard that failed on a stranger's update (here its book of refusals) let the stranger's /status reach
    the command and answer with the workspaces and tasks. The guard fails closed: nothing past it runs, the stranger
    gets no answer, and the owner, whose check failed too, is told something went wrong."""

    async def broken(user_id: object) -> bool:
        raise RuntimeError("the refusal book is unavailable")

    monkeypatch.setattr(bot.app.bot_data.strangers, "should_refuse", broken)
    bot.tg.send_command(STRANGER_ID, "/status")
    await all_updates_handled(bot)
    await asyncio.sleep(0.2)
    assert to(STRANGER_ID, bot.tg.calls("sendMessage")) == [], "the stranger's /status was answered"
    assert "allow-list guard failed" in caplog.text

    monkeypatch.setattr("telegram_bot.handlers.addressed_to_bot", lambda update, context: 1 / 0)
    bot.tg.send_command(USER_ID, "/status")
    await bot.tg.wait_for_message(USER_ID, 1)
    await all_updates_handled(bot)
    assert [m.text for m in bot.tg.messages(USER_ID)] == [
        "Sorry, something went wrong on my side; it is logged. Please try again."
    ]
    assert bot.claude.calls == 0
