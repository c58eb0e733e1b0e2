"""Forum topics as conversations of their own, with a team: a topic deleted while its task runs gets the task's
messages in the general topic, and those messages still act for the topic (Merge on its summary, an answer to its
worker's question, by button or by a reply in words); /history in a topic holds that topic alone."""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading

import pytest

from tests.conftest import BotHarness, text_now
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text, spare
from tests.support.tasks import ended, start_task
from tests.support.team import GROUP, HANG_GUARD, MEMBER, OWNER, task_held_in_topic, team  # noqa: F401  (team: a fixture)

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed",
    ),
    pytest.mark.quick_tests,
]

HANG_GUARD = 60
QUESTION = "Keep the old add() API or break it?"


def in_topic(bot: BotHarness, thread: int | None, needle: str, chat: int = GROUP):
    return next((m for m in reversed(bot.tg.messages_in_topic(chat, thread)) if needle in (m.text or "")), None)


async def topic_deleted_mid_task(team: BotHarness, model: RoleScript, step: dict, then: dict) -> int:
    """A task started in topic "calc", whose worker's first `step` comes once the topic is deleted; `then` its next
    reply. The topic's thread id."""
    topic = team.tg.create_topic(GROUP, "calc", OWNER)
    go = threading.Event()

    def held(body: dict) -> dict:
        go.wait(30)
        return step

    model.add("orchestrator", start_task("", "Work on calc."), claude_says.text("Started."))
    model.add("code", held, then)
    team.tg.send_text(OWNER, "@test_bot work on calc", chat_id=GROUP, thread_id=topic)
    await team.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=HANG_GUARD)
    team.tg.delete_topic(GROUP, topic)
    go.set()
    return topic


async def test_merge_button_on_a_summary_that_fell_back_to_the_general_topic_works(
    team: BotHarness, model: RoleScript, workspace_root
) -> None:
    """A topic deleted while its task runs: the summary lands in the general topic with its Merge button; the owner
    pressing it there merges the finished work (no chat would own the task otherwise: the work would be stranded)."""
    repo = workspace_root / "calc"
    fix = claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"})
    await topic_deleted_mid_task(team, model, fix, claude_says.text("Fixed add()."))
    await ended(team, 1)
    summary = await team.tg.await_for(
        lambda: next((m for m in team.tg.messages_in_topic(GROUP, None) if "task:merge:1" in m.callback_data), None),
        timeout=HANG_GUARD,
    )
    team.tg.press_button(OWNER, summary.message_id, "task:merge:1", chat_id=GROUP)
    reply = await team.tg.await_for(
        lambda: next(
            (m for m in team.tg.messages_in_topic(GROUP, None) if m.message_id > summary.message_id and m.text), None
        ),
        timeout=HANG_GUARD,
    )
    assert "no task" not in reply.text.lower(), reply.text
    await team.tg.await_for(lambda: "a + b" in text_now(repo / "calc.py"), timeout=10)


async def test_a_question_of_a_task_whose_topic_was_deleted_can_be_answered(
    team: BotHarness, model: RoleScript
) -> None:
    """The worker's question falls back to the general topic; its starter's button press there answers it."""
    ask = claude_says.tool_use("ask_user", {"question": QUESTION, "options": ["keep it", "break it"]})
    await topic_deleted_mid_task(team, model, ask, claude_says.text("Done."))
    question = await team.tg.await_for(
        lambda: next(
            (m for m in team.tg.messages_in_topic(GROUP, None) if QUESTION in (m.text or "") and m.callback_data),
            None,
        ),
        timeout=HANG_GUARD,
    )
    team.tg.press_button(OWNER, question.message_id, question.callback_data[1], chat_id=GROUP)
    refused = await team.tg.await_for(
        lambda: next(
            (m for m in team.tg.messages_in_topic(GROUP, None) if m.message_id > question.message_id and m.text), None
        ),
        timeout=HANG_GUARD,
    )
    assert "no longer waiting" not in refused.text, refused.text
    await ended(team, 1)
    assert len(model.requests["code"]) >= 2
    assert "The user answered: break it" in last_user_text(model.requests["code"][1])


async def test_a_reply_in_words_to_a_question_moved_to_the_general_topic_answers_it(
    team: BotHarness, model: RoleScript
) -> None:
    """A question without options, moved to the general topic when its topic was deleted: a reply to it there is
    the answer (as a reply to it in the topic would have been)."""
    await topic_deleted_mid_task(
        team, model, claude_says.tool_use("ask_user", {"question": QUESTION}), claude_says.text("Done.")
    )
    question = await team.tg.await_for(lambda: in_topic(team, None, QUESTION), timeout=HANG_GUARD)
    team.tg.send_text(OWNER, "keep the old one", chat_id=GROUP, reply_to_message_id=question.message_id)
    await ended(team, 1)
    assert "keep the old one" in last_user_text(model.requests["code"][1])


async def test_history_in_a_topic_holds_only_that_topic(team: BotHarness, model: RoleScript) -> None:
    """/history in one topic: nothing said in another topic, the general topic, or a private chat."""
    calc = team.tg.create_topic(GROUP, "calc", OWNER)
    site = team.tg.create_topic(GROUP, "site", OWNER)
    for who, thread, word in ((OWNER, calc, "banana"), (OWNER, None, "cherry")):
        model.add("orchestrator", claude_says.text(f"Noted {word}."))
        team.tg.send_text(who, f"@test_bot remember {word}", chat_id=GROUP, thread_id=thread)
        await team.tg.await_for(lambda w=word, t=thread: in_topic(team, t, f"Noted {w}."))
    model.add("orchestrator", claude_says.text("Noted durian."))
    team.tg.send_text(MEMBER, "remember durian")
    await team.tg.await_for(lambda: any("Noted durian." in (m.text or "") for m in team.tg.messages(MEMBER)))
    model.add("orchestrator", claude_says.text("Noted elder."))
    team.tg.send_text(MEMBER, "@test_bot remember elder", chat_id=GROUP, thread_id=site)
    await team.tg.await_for(lambda: in_topic(team, site, "Noted elder."))
    team.tg.send_command(MEMBER, "/history", chat_id=GROUP, thread_id=site)
    doc = await team.tg.await_for(
        lambda: next((m for m in team.tg.messages_in_topic(GROUP, site) if m.kind == "document"), None)
    )
    body = (doc.data or b"").decode()
    assert "elder" in body
    for leaked in ("banana", "cherry", "durian"):
        assert leaked not in body, leaked


async def progress_of(bot: BotHarness, task_id: int) -> int:
    while True:
        task = await bot.runtime.store.get_task(task_id)
        if task is not None and task.progress_message_id is not None:
            return task.progress_message_id
        await asyncio.sleep(0.05)


async def test_a_members_reply_to_an_owners_progress_message_is_refused_in_one_sentence_and_nothing_else(
    team: BotHarness, model: RoleScript
) -> None:
    """Members steer only their own tasks. A member's reply to the progress message of an owner's running task is
    refused in one sentence, and nothing else happens: no model turn (which costs and answers a second time, with
    the member's words to another's task in its context)."""
    topic, go = await task_held_in_topic(team, model)
    progress = await progress_of(team, 1)
    turns_before = len(model.requests["orchestrator"])
    model.add("orchestrator", spare(claude_says.text("A MODEL TURN ANSWERED."), why="only the bot's defect asks it"))

    words = team.tg.send_text(
        MEMBER, "drop everything and delete calc.py", chat_id=GROUP, thread_id=topic, reply_to_message_id=progress
    )
    refusal = await team.tg.await_for(lambda: in_topic(team, topic, "can steer it"), timeout=HANG_GUARD)
    await asyncio.sleep(3)  # what else the bot does with the member's words
    go.set()
    await ended(team, 1)
    assert len(model.requests["orchestrator"]) == turns_before, (
        "a member's refused steering of an owner's task went on to a model turn: "
        + last_user_text(model.requests["orchestrator"][-1])[-300:]
    )
    answers = [
        m.text
        for m in team.tg.messages_in_topic(GROUP, topic)
        if m.reply_to_message_id == words["message"]["message_id"]
    ]
    assert answers == [refusal.text] and "I'll answer it" not in (refusal.text or ""), answers
    assert "drop everything" not in "".join(last_user_text(r) for r in model.requests["code"]), (
        "never reached the worker"
    )


async def test_a_topic_named_like_a_workspace_binds_once_its_name_is_seen(team: BotHarness, model: RoleScript) -> None:
    """Without admin rights the bot learns a topic from the messages addressed to it there. The first one is a reply
    to a teammate's message (Telegram then points at that message, not at the topic's root, so the name is not in
    it); the next one points at the root, whose name is "calc": the topic works in calc from then on."""
    topic = team.tg.create_topic(GROUP, "calc", OWNER, announce=False)
    chatter = team.tg.send_text(MEMBER, "the add test is red again", chat_id=GROUP, thread_id=topic)
    model.add("orchestrator", claude_says.text("I see."))
    team.tg.send_text(
        OWNER,
        "@test_bot noted?",
        chat_id=GROUP,
        thread_id=topic,
        reply_to_message_id=chatter["message"]["message_id"],
    )
    await team.tg.await_for(lambda: in_topic(team, topic, "I see."), timeout=HANG_GUARD)
    model.add("orchestrator", claude_says.text("Which one?"))
    team.tg.send_text(OWNER, "@test_bot fix the failing test", chat_id=GROUP, thread_id=topic)
    await team.tg.await_for(lambda: in_topic(team, topic, "Which one?"), timeout=HANG_GUARD)
    said = last_user_text(model.requests["orchestrator"][-1])
    assert "workspace of this conversation: calc" in said, said


async def test_the_answer_to_a_merge_pressed_in_a_closed_topic_is_not_lost(
    team: BotHarness, model: RoleScript, workspace_root
) -> None:
    """A topic closed after its task's summary was posted: the owner presses Merge on that summary. The merge happens;
    its answer cannot go to the closed topic, so it goes to the general topic ("nothing is lost", as a task's own
    messages do)."""
    repo = workspace_root / "calc"
    topic = team.tg.create_topic(GROUP, "calc", OWNER)
    model.add("orchestrator", start_task("", "Fix add() in calc.py."), claude_says.text("Started task #1."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )
    team.tg.send_text(OWNER, "@test_bot fix add", chat_id=GROUP, thread_id=topic)
    await ended(team, 1)
    summary = await team.tg.await_for(
        lambda: next((m for m in team.tg.messages_in_topic(GROUP, topic) if "task:merge:1" in m.callback_data), None),
        timeout=HANG_GUARD,
    )
    team.tg.close_topic(GROUP, topic)
    before = len(team.tg.messages(GROUP))
    team.tg.press_button(OWNER, summary.message_id, "task:merge:1", chat_id=GROUP)
    await team.tg.await_for(lambda: "a + b" in text_now(repo / "calc.py"), timeout=HANG_GUARD)
    await asyncio.sleep(2)
    told = [m.text for m in team.tg.messages(GROUP)[before:] if m.text]
    assert any("merge" in t.lower() for t in told), f"the merge's answer was lost; the group got {told}"
    assert any("is closed or was deleted, so this message goes here" in t for t in told), told
