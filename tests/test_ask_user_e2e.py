"""ask_user through the real bot and the fakes: a worker's question reaches whoever started the task, with a button per
option; it is answered by a button, by a reply in words, by nobody (ASK_TIMEOUT_SECONDS), refused for a member who
did not start the task, and answered after a restart (the answer resumes the interrupted task, or is kept for its
Resume where a Resume would be refused). Asking is bounded: the waits count against the worker's time limit, and a
task asks ASK_MAX_PER_TASK questions at most."""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading
from pathlib import Path

import pytest

from agents.core.models import Caller, TaskStatus
from agents.work.questions import NO_ANSWER
from tests.conftest import USER_ID, BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text, spare
from tests.support.resumes import HeldModel
from tests.support.tasks import ended, start_task, tool_results, until

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
    reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
)

HANG_GUARD = 60
MEMBER = 2002
GROUP = -1009000
QUESTION = "Keep the old add() API or break it?"


def script(model: RoleScript, *after: dict) -> None:
    model.add(
        "orchestrator",
        start_task("group-therapy", "Rename the greeting."),
        claude_says.text("Started."),
    )
    model.add(
        "code",
        claude_says.tool_use("ask_user", {"question": QUESTION, "options": ["keep it", "break it"]}),
        *(after or (claude_says.text("Done."),)),
    )


async def the_question(bot: BotHarness, chat: int = USER_ID):
    return await bot.tg.await_for(
        lambda: next(
            (m for m in bot.tg.messages(chat) if QUESTION in (m.text or "") and m.callback_data),
            None,
        ),
        timeout=HANG_GUARD,
    )


def said(bot: BotHarness, needle: str, chat: int = USER_ID):
    return next((m for m in bot.tg.messages(chat) if needle in (m.text or "")), None)


async def test_a_question_answered_by_a_button(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    script(model)
    bot.say("rename add in calc")
    question = await the_question(bot)
    assert [d.rsplit(":", 1)[0] for d in question.callback_data] == ["ask:option", "ask:option"]
    assert [b["text"] for b in question.buttons] == ["keep it", "break it"]
    progress = await bot.tg.await_for(
        lambda: next(
            (
                m
                for m in bot.tg.messages(USER_ID)
                if any("waiting for your answer" in (v.text or "") for v in m.history)
            ),
            None,
        )
    )
    assert "Task #1" in progress.history[0].text

    bot.tg.press_button(USER_ID, question.message_id, question.callback_data[1])
    task = await ended(bot, 1)
    assert task.status is TaskStatus.COMPLETED or task.status.is_final
    assert "The user answered: break it" in last_user_text(model.requests["code"][1])
    assert not question.callback_data and "Answered: break it" in question.text, "the buttons go"


async def test_a_question_telegram_refused_once_is_sent_again_and_answered(bot: BotHarness) -> None:
    """A question is only worth sending while its worker waits, so it is not kept for later like a summary: a 502 on
    its send is retried at once, and the worker gets the user's answer, not an error."""
    model = RoleScript()
    bot.claude.handler = model
    script(model)
    bot.tg.fail_next("sendMessage", error_code=502, when=lambda params: QUESTION in str(params.get("text", "")))
    bot.say("rename add in calc")
    question = await the_question(bot)
    sends = [c for c in bot.tg.calls("sendMessage") if QUESTION in str(c.params.get("text", ""))]
    assert len(sends) == 2, "refused once, then sent"
    bot.tg.press_button(USER_ID, question.message_id, question.callback_data[0])
    await ended(bot, 1)
    assert "The user answered: keep it" in last_user_text(model.requests["code"][1])


async def test_a_question_answered_by_a_reply_in_words(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    script(model)
    bot.say("rename add in calc")
    question = await the_question(bot)
    bot.tg.send_text(USER_ID, "keep it, and add plus() beside it", reply_to_message_id=question.message_id)
    await ended(bot, 1)
    assert "The user answered: keep it, and add plus() beside it" in last_user_text(model.requests["code"][1])
    assert await bot.tg.await_for(lambda: said(bot, "task #1 has your answer"))


async def test_a_reply_before_telegram_answered_the_questions_send_still_answers_it(bot: BotHarness) -> None:
    """Telegram shows the question before its answer to the bot's send arrives (a slow answer, a retried send): a
    reply in that moment is the question's answer, not a new message for the orchestrator."""
    model = RoleScript()
    bot.claude.handler = model
    script(model)
    release = bot.tg.hold_answer("sendMessage", lambda params: QUESTION in str(params.get("text", "")))
    bot.say("rename add in calc")
    question = await the_question(bot)  # shown; the bot still waits for Telegram's answer to its send
    bot.tg.send_text(USER_ID, "keep it, and add plus() beside it", reply_to_message_id=question.message_id)
    await bot.tg.await_for(lambda: not bot.tg.pending_updates)  # the reply has reached the bot
    await asyncio.sleep(0.5)  # time for a reply taken as a new message to reach the orchestrator (the old way)
    release.set()
    await ended(bot, 1)
    assert "The user answered: keep it, and add plus() beside it" in last_user_text(model.requests["code"][1])
    assert len(model.requests["orchestrator"]) == 2, "the reply never went to the orchestrator"


@pytest.mark.settings(ask_timeout_seconds=2)
async def test_no_answer_in_time(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    script(model, claude_says.text("I kept the old API (no answer)."))
    bot.say("rename add in calc")
    question = await the_question(bot)
    task = await ended(bot, 1)
    assert NO_ANSWER in last_user_text(model.requests["code"][1])
    assert "I kept the old API" in (task.result or "")
    assert "No answer in 2 s" in question.text and not question.callback_data


@pytest.mark.settings(ask_timeout_seconds=1, worker_max_seconds=3, ask_max_per_task=50)
async def test_a_worker_asking_again_and_again_stops_at_its_time_limit(bot: BotHarness) -> None:
    """The wait for an answer counts against the worker's time limit: ten questions of 1 s each cannot fit in a
    3 s limit, however slow or fast the machine (a question waits no longer than the limit has left)."""
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("group-therapy", "Rename the greeting."), claude_says.text("Started."))
    asks = [claude_says.tool_use("ask_user", {"question": f"{QUESTION} (take {i})"}) for i in range(10)]
    limited = "a worker that would ask ten times: the time limit stops it first"
    model.add("code", *[spare(ask, why=limited) for ask in asks], spare(claude_says.text("Done."), why=limited))
    bot.say("rename add in calc")
    task = await ended(bot, 1)
    asked = [m for m in bot.tg.messages(USER_ID) if QUESTION in (m.text or "")]
    stopped = "time limit" in (task.error or "") or any("leaves no time to wait" in r for r in tool_results(model))
    assert stopped, f"neither the time limit nor a refusal stopped the questions: {task}"
    assert 1 <= len(asked) < 10, f"{len(asked)} questions asked within a 3 s limit"
    assert all(not m.callback_data for m in asked), "no question is left waiting once the task stopped"


@pytest.mark.settings(ask_timeout_seconds=0.2, ask_max_per_task=2)
async def test_questions_past_the_tasks_cap_are_refused(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("group-therapy", "Rename the greeting."), claude_says.text("Started."))
    asks = [claude_says.tool_use("ask_user", {"question": f"{QUESTION} (take {i})"}) for i in range(3)]
    model.add("code", *asks, claude_says.text("Decided myself."))
    bot.say("rename add in calc")
    task = await ended(bot, 1)
    asked = [m for m in bot.tg.messages(USER_ID) if QUESTION in (m.text or "")]
    assert len(asked) == 2, "the third question never reaches the chat"
    refusal = last_user_text(model.requests["code"][3])
    assert "has asked 2 questions" in refusal and "ASK_MAX_PER_TASK" in refusal
    assert "Decided myself." in (task.result or "")


async def test_a_member_who_did_not_start_the_task_cannot_answer(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> None:
    fake_telegram.make_forum(GROUP)
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        allowed_user_ids=f"{USER_ID},{MEMBER}",
        owner_user_ids=str(USER_ID),
    ) as bot:
        model = RoleScript()
        bot.claude.handler = model
        script(model)
        fake_telegram.send_text(USER_ID, "@test_bot rename add in calc", chat_id=GROUP, username="olga")
        question = await the_question(bot, GROUP)
        fake_telegram.press_button(MEMBER, question.message_id, question.callback_data[0], chat_id=GROUP)
        refusal = await fake_telegram.await_for(lambda: said(bot, "or an owner can answer", GROUP))
        assert "who started task #1" in refusal.text
        fake_telegram.send_text(
            MEMBER, "break it", chat_id=GROUP, reply_to_message_id=question.message_id, username="mia"
        )
        await fake_telegram.await_for(
            lambda: len([m for m in fake_telegram.messages(GROUP) if "or an owner can answer" in (m.text or "")]) == 2
        )
        assert question.callback_data, "still waiting for the starter"
        assert len(model.requests["code"]) == 1, "the worker got no answer"
        fake_telegram.press_button(USER_ID, question.message_id, question.callback_data[0], chat_id=GROUP)
        await ended(bot, 1)
        assert "The user answered: keep it" in last_user_text(model.requests["code"][1])


async def test_a_question_asked_before_a_restart_is_answered_after_it_and_the_task_goes_on(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> None:
    model = RoleScript()
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        bot.claude.handler = model
        script(model, claude_says.text("Broke it as asked."))
        bot.say("rename add in calc")
        question = await the_question(bot)
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        bot.claude.handler = model
        assert (await bot.runtime.store.get_task(1)).status is TaskStatus.INTERRUPTED
        fake_telegram.press_button(USER_ID, question.message_id, question.callback_data[1])
        assert await fake_telegram.await_for(lambda: said(bot, "task #1 goes on with your answer"))
        task = await ended(bot, 1)
        resumed = last_user_text(model.requests["code"][1])
        assert "You asked the user: “" + QUESTION + "”; they answered: “break it”" in resumed
        assert "Broke it as asked." in (task.result or "")


async def test_an_answer_after_a_restart_that_cannot_resume_its_task_is_kept_for_the_resume(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> None:
    """The late answer resumes the task as the Resume button does, so it is refused as Resume is (here the chat's
    queue is full: MAX_WAITING_TASKS=1); the chat is told, and the answer reaches the worker at the later Resume."""
    model = RoleScript()
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        bot.claude.handler = model
        script(model, spare(claude_says.text("Done."), why="the bot stops while the question waits"))
        bot.say("rename add in calc")
        question = await the_question(bot)
    async with running_bot(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, max_waiting_tasks=1
    ) as bot:
        held = HeldModel(threading.Event())
        bot.claude.handler = held
        owner = Caller(chat_id=USER_ID, user_id=USER_ID, user_name="owner")
        try:
            await bot.runtime.crew.races.start_task(owner, "calc", "code", "hold the slot", True)
            await until(held.working)
            fake_telegram.press_button(USER_ID, question.message_id, question.callback_data[1])
            told = await fake_telegram.await_for(
                lambda: said(bot, "your answer is kept for task #1, but it cannot go on now"), timeout=HANG_GUARD
            )
            assert "(MAX_WAITING_TASKS)" in told.text, told.text
            assert (await bot.runtime.store.get_task(1)).status is TaskStatus.INTERRUPTED
        finally:
            held.release()
        await ended(bot, 2)
        assert await bot.runtime.crew.branches.resume(owner, 1) == "Task #1 resumed on its branch."
        await ended(bot, 1)
        firsts = [last_user_text(b) for b in held.requests["code"] if len(b["messages"]) == 1]
        assert any("they answered: “break it”" in text for text in firsts), firsts
