"""Text the bot did not write is shown as text, through the real bot and the fakes: a worker's `ask_user` question and
options with bidi overrides and zero-width characters, a note's text in "Note #N is forgotten", a member's schedule
instructions in /schedules. A link in it stays its characters (no link entity in what Telegram shows), and an invisible
character is a visible mark."""

from __future__ import annotations

import shutil
import sys

import pytest

from agents.core.models import Caller
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text
from tests.support.tasks import ended, start_task

HANG_GUARD = 60
LINK = "[the docs](https://evil.example/login)"
INVISIBLE = ("\u202e", "\u2066", "\u200b", "\u200d", "\u2028", "\u2029", "\u0085")
OWNER = Caller(chat_id=USER_ID, user_id=USER_ID, user_name="owner")


def links(message) -> list[dict]:
    return [e for e in message.entities if e.get("type") in ("text_link", "url")]


def newest(bot: BotHarness, needle: str):
    return next((m for m in reversed(bot.tg.messages(USER_ID)) if needle in (m.text or "")), None)


@pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"), reason="bubblewrap (bwrap) is not installed"
)
async def test_a_workers_question_and_options_reach_the_owner_with_their_invisible_characters_shown(
    bot: BotHarness,
) -> None:
    model = RoleScript()
    bot.claude.handler = model
    question = f"Keep the API?\u202e ?ti kaerb ro\u200b See {LINK}"
    options = ["keep\u200b it", "break\u202e it", "ok\u2028then"]
    model.add("orchestrator", start_task("group-therapy", "Rename the greeting."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("ask_user", {"question": question, "options": options}),
        claude_says.text("Done."),
    )
    bot.say("rename the greeting")
    shown = await bot.tg.await_for(lambda: newest(bot, "asks you"), timeout=HANG_GUARD)
    labels = [b["text"] for b in shown.buttons]
    for char in INVISIBLE:
        assert char not in (shown.text or ""), f"U+{ord(char):04X} reached the owner raw"
        assert not any(char in label for label in labels), f"U+{ord(char):04X} is raw in a button"
    assert "\\u202e" in shown.text and "\\u200b" in shown.text
    assert labels[:2] == ["keep\\u200b it", "break\\u202e it"]  # the third's line separator: a space (ask_user)
    assert LINK in shown.text and not links(shown), "the question's link became a link"
    bot.tg.press_button(USER_ID, shown.message_id, shown.callback_data[1])
    await ended(bot, 1)
    assert "The user answered: break\u202e it" in last_user_text(model.requests["code"][1]), "the option, as asked"


async def test_a_forgotten_notes_text_is_shown_as_text(bot: BotHarness) -> None:
    await bot.runtime.crew.notes.remember(OWNER, f"read {LINK} first **always**")
    bot.tg.send_command(USER_ID, "/notes")
    listed = await bot.tg.await_for(lambda: newest(bot, "Standing notes"))
    bot.tg.press_button(USER_ID, listed.message_id, listed.callback_data[0])
    told = await bot.tg.await_for(lambda: newest(bot, "is forgotten"))
    assert f"read {LINK} first **always**" in told.text, told.text
    assert not links(told) and not told.entities, "the note's text became a link or formatting"


async def test_a_schedules_instructions_are_shown_as_text_in_schedules(bot: BotHarness) -> None:
    said = await bot.runtime.crew.schedules.make(OWNER, "calc", "code", f"open {LINK}\u202e", cron="0 9 * * 1-5")
    assert "#1" in said
    bot.tg.send_command(USER_ID, "/schedules")
    listed = await bot.tg.await_for(lambda: newest(bot, "Schedules"))
    assert f"open {LINK}\\u202e" in listed.text, listed.text
    assert "\u202e" not in listed.text and not links(listed)


async def test_a_members_schedule_and_note_reach_the_orchestrators_context_with_their_marks(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    await bot.runtime.crew.schedules.make(OWNER, "calc", "code", "run tests\u202e\u200b nightly", cron="0 9 * * 1-5")
    await bot.runtime.crew.notes.remember(OWNER, "use pnpm\u202e always\u2066")
    model.add("orchestrator", claude_says.text("OK."))
    bot.say("what runs tonight?")
    await bot.replies(1)
    context = last_user_text(model.requests["orchestrator"][0])
    for char in INVISIBLE:
        assert char not in context, f"U+{ord(char):04X} reached the model raw"
    assert "run tests\\u202e\\u200b nightly" in context and "use pnpm\\u202e always\\u2066" in context
