"""End to end: the real PTB Application polls the fake Telegram server; the real SDK calls the fake Anthropic server."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from agents.core.models import Role
from agents.store.database import start_of_day
from telegram_bot.app import stop_application
from tests.conftest import STRANGER_ID, USER_ID, BotHarness, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_html import parse_telegram_html
from tests.fakes.telegram_server import FakeTelegram


def last_user_text(request) -> str:
    """The user's words in the last user message of a recorded Messages request."""
    content = request.body["messages"][-1]["content"]
    return content[0]["text"] if isinstance(content, list) else content


async def test_direct_answer_is_one_api_call_and_rendered_as_html(bot: BotHarness) -> None:
    bot.claude.script(claude_says.text("**Async** lets one thread wait on many things. Use `await`.", delay=0.6))
    bot.say("what's async/await in python?")
    [reply] = await bot.replies(1)
    assert reply.parse_mode == "HTML"
    assert "<b>Async</b>" in reply.html and "<code>await</code>" in reply.html
    assert parse_telegram_html(reply.html).startswith("Async lets one thread")
    assert bot.claude.calls == 1
    request = bot.claude.requests[0]
    assert last_user_text(request) == "what's async/await in python?"
    context = request.body["messages"][-1]["content"][1]["text"]
    assert "input_method: text" in context and "- calc" in context and "- self" in context
    assert bot.tg.calls("sendChatAction"), "typing indicator while the orchestrator thinks"
    stored = await bot.runtime.store.all_messages(USER_ID)
    assert [(m.role, m.content[:10]) for m in stored] == [(Role.USER, "what's asy"), (Role.ASSISTANT, "**Async** ")]


async def test_stranger_is_refused_and_never_reaches_claude(bot: BotHarness, caplog) -> None:
    bot.tg.send_text(STRANGER_ID, "run rm -rf / please")
    [reply] = await bot.tg.wait_for_message(STRANGER_ID, 1)
    assert "private bot" in reply.text
    await asyncio.sleep(0.2)
    assert bot.claude.calls == 0
    assert str(STRANGER_ID) in caplog.text
    assert await bot.runtime.store.all_messages(STRANGER_ID) == []


async def test_start_help_status_and_command_menu(bot: BotHarness) -> None:
    commands = (await bot.tg.wait_for_request("setMyCommands")).params["commands"]
    names = {c["command"] for c in commands}
    assert {"start", "help", "status", "tasks", "cancel", "usage"} <= names
    bot.tg.send_command(USER_ID, "/start")
    bot.tg.send_command(USER_ID, "/status")
    bot.tg.send_command(USER_ID, "/help")
    replies = await bot.replies(3)
    assert any(r.text.startswith("Hi ") and "agentlab" in r.text for r in replies)
    help_reply = next(
        r for r in replies if "Commands:" in r.text and not r.text.startswith("Hi ")
    )  # commands are answered concurrently
    listed = {line.split(":")[0] for line in help_reply.text.splitlines() if line.startswith("/")}
    assert listed == {f"/{name}" for name in names - {"start", "help"}}, "/help lists the menu, /workspace included"
    status_reply = next(r for r in replies if "Pending proposals" in r.text)
    assert "calc" in status_reply.text and "group-therapy" in status_reply.text
    assert bot.claude.calls == 0


async def test_unknown_command_and_unsupported_kinds_get_one_line(bot: BotHarness) -> None:
    bot.tg.send_command(USER_ID, "/frobnicate now")
    [reply] = await bot.replies(1)
    assert "/frobnicate" in reply.text and "/help" in reply.text
    bot.tg.send_sticker(USER_ID)
    bot.tg.send_location(USER_ID, 52.5, 13.4)
    replies = await bot.replies(3)
    assert all("text and voice" in r.text for r in replies[1:])
    assert bot.claude.calls == 0


async def test_a_command_for_another_bot_in_a_group_gets_no_reply(bot: BotHarness) -> None:
    """`/start@other_bot` in a group is another bot's, a command this bot has or not: it says nothing (no "I don't
    know" noise). Its own, `/cmd@Test_Bot` in any case, still work."""
    group = -100555
    for command in ("/start@other_bot", "/frobnicate@other_bot now", "/status@Test_Bot", "/frobnicate@TEST_BOT"):
        bot.tg.send_command(USER_ID, command, chat_id=group)
    bot.claude.script(claude_says.text("Marker."))
    bot.tg.send_text(USER_ID, "@test_bot say marker", chat_id=group)  # after the others: they were handled
    mine = ("Pending proposals", "I don't know /frobnicate@TEST_BOT", "Marker.")
    await bot.tg.await_for(
        lambda: all(any(m in (s.text or "") for s in bot.tg.messages(group)) for m in mine) or None, timeout=20
    )
    said = [s.text or "" for s in bot.tg.messages(group)]
    assert len(said) == 3 and not any("@other_bot" in s for s in said), f"another bot's command was answered: {said}"


async def test_huge_message_is_answered_and_kept_whole(bot: BotHarness) -> None:
    huge = "lorem ipsum " * 8334  # 100,008 characters
    bot.claude.script(claude_says.text("That was long; I read the first part."))
    bot.say(huge)
    [reply] = await bot.replies(1)
    assert "long" in reply.text
    sent = last_user_text(bot.claude.requests[0])
    assert len(sent) < 25_000 and "100,008 characters" in sent
    stored = await bot.runtime.store.all_messages(USER_ID)
    assert stored[0].content == huge


async def test_overloaded_claude_gets_a_clear_reply_and_loses_nothing(bot: BotHarness) -> None:
    bot.claude.script(claude_says.overloaded())
    bot.say("first question")
    [reply] = await bot.replies(1)
    assert reply.text == "Claude is overloaded, try again in a minute."
    assert [m.content for m in await bot.runtime.store.all_messages(USER_ID)] == ["first question"]
    bot.claude.script(claude_says.text("Now I can answer both."))
    bot.say("second question")
    replies = await bot.replies(2)
    assert replies[1].text == "Now I can answer both."
    messages = bot.claude.requests[-1].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"], "never folded into the next turn"
    assert messages[0]["content"][0]["text"] == "first question"
    assert "no answer" in messages[1]["content"][0]["text"]
    assert messages[2]["content"][0]["text"] == "second question"


async def test_telegram_flood_limit_is_waited_out(bot: BotHarness) -> None:
    bot.tg.fail_next("sendMessage", error_code=429, retry_after=1)
    bot.claude.script(claude_says.text("delivered after the flood wait"))
    bot.say("hi")
    [reply] = await bot.replies(1, timeout=20)
    assert reply.text == "delivered after the flood wait"
    assert len(bot.tg.calls("sendMessage")) >= 2


async def test_telegram_failing_while_the_bot_polls_is_one_log_line_and_loses_nothing(
    bot: BotHarness, caplog: pytest.LogCaptureFixture
) -> None:
    await bot.tg.wait_for_request("getUpdates")
    bot.tg.fail_next("getUpdates", error_code=502, description="Bad Gateway")
    bot.claude.script(claude_says.text("Still here."))
    bot.say("are you there?")
    await bot.replies(1)
    failures = [r for r in caplog.records if "polling for updates" in r.getMessage()]
    assert failures, "the failed getUpdates was not logged"
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in failures), [
        (r.levelname, r.getMessage(), r.exc_info is not None) for r in failures
    ]
    assert "Bad Gateway" in failures[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info is not None], "a traceback was logged"


async def test_telegram_unreachable_when_the_bot_stops_is_one_log_line(
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Stopping, the updater confirms the updates it fetched with one more getUpdates; Telegram is down by then.
    bot = await start_bot(
        make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root), fake_telegram, fake_anthropic
    )
    try:
        bot.claude.script(claude_says.text("Hello."))
        bot.say("hi")
        await bot.replies(1)
        fake_telegram.fail_next("getUpdates", error_code=502, description="Bad Gateway", times=1000)
    finally:
        await stop_application(bot.app)
    stopping = [r for r in caplog.records if "while stopping" in r.getMessage()]
    assert stopping and all(r.levelno == logging.WARNING and r.exc_info is None for r in stopping), [
        (r.name, r.levelname, r.getMessage()[:80]) for r in caplog.records if r.levelno >= logging.WARNING
    ]
    assert not [r for r in caplog.records if r.exc_info is not None], "a traceback was logged"


async def test_entity_refusal_falls_back_to_plain_text(bot: BotHarness) -> None:
    bot.tg.fail_next(
        "sendMessage",
        error_code=400,
        description='Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0',
    )
    bot.claude.script(claude_says.text("Use **bold** and `code` <here>"))
    bot.say("format something")
    [reply] = await bot.replies(1)
    assert reply.parse_mode is None
    assert reply.text == "Use bold and code <here>"


async def test_long_reply_is_split_and_huge_reply_goes_as_document(bot: BotHarness) -> None:
    paragraphs = "\n\n".join(f"Paragraph {i}: " + "word " * 150 for i in range(12))  # ~9,000 chars
    bot.claude.script(claude_says.text(paragraphs))
    bot.say("long please")
    replies = await bot.replies(2)
    await asyncio.sleep(0.3)
    replies = bot.tg.messages(USER_ID)
    assert len(replies) >= 3
    joined = " ".join(parse_telegram_html(r.html) for r in replies)
    assert all(f"Paragraph {i}:" in joined for i in range(12))
    assert all(len(r.text) <= 4096 for r in replies)

    huge = "\n\n".join(f"Section {i}\n" + "data " * 400 for i in range(20))  # ~40,000 chars
    bot.claude.script(claude_says.text(huge))
    bot.say("huge please")
    docs = await bot.tg.await_for(lambda: [m for m in bot.tg.messages(USER_ID) if m.kind == "document"])
    assert docs[0].data.decode() == huge.strip()
    assert docs[0].filename.endswith(".md")


async def test_prompt_cache_serves_the_fixed_prefix_on_the_second_message(bot: BotHarness) -> None:
    bot.claude.script(claude_says.text("one"), claude_says.text("two"))
    bot.say("first")
    await bot.replies(1)
    bot.say("second")
    await bot.replies(2)
    requests = bot.claude.requests
    assert requests[0].body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in requests[0].body["tools"]), "the system's breakpoint covers the tools"
    for request in requests:
        body = request.body
        marks = sum("cache_control" in b for m in body["messages"] for b in m["content"]) + sum(
            "cache_control" in b for b in body["system"]
        )
        assert marks <= 3, "three cache breakpoints: system, the previous turn, this message"
    assert sum("cache_control" in b for m in requests[1].body["messages"] for b in m["content"]) == 2
    records = await bot.runtime.store.usage_since(start_of_day())
    assert records[0].cache_creation_input_tokens > 0
    assert records[1].cache_read_input_tokens >= records[0].cache_creation_input_tokens


async def test_messages_back_to_back_are_answered_in_order(bot: BotHarness) -> None:
    bot.claude.script(claude_says.text("answer one", delay=0.5), claude_says.text("answer two"))
    bot.say("one")
    bot.say("two")
    replies = await bot.replies(2)
    assert [r.text for r in replies] == ["answer one", "answer two"]
    assert last_user_text(bot.claude.requests[1]) == "two"
