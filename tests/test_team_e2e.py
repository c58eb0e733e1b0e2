"""A team in one group: owners and members, a topic per project, through the real bot and the fake Bot API.

The fake Bot API plays a forum supergroup as Telegram does: a topic's thread id is its creation message's id, every
message in a topic carries `message_thread_id` and points at the topic's root, a send to a closed or deleted topic
is refused. Claude is scripted per role (tests/scripted.py); the workspaces are real git repositories.
"""

from __future__ import annotations

import shutil
import sys

import pytest

from agents.core.models import TaskStatus, UsageRecord
from tests.conftest import BotHarness, git, text_now
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text
from tests.support.tasks import ended, start_task
from tests.support.team import (  # noqa: F401  (team: a fixture)
    GROUP,
    MEMBER,
    OTHER_MEMBER,
    OWNER,
    said,
    task_held_in_topic,
    team,
    team_turn,
    tool_results,
)

# quick_tests: what these tests check is not the verdict, so calc's tests are one quick check (tests/conftest.py)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.quick_tests,
]

STRANGER = 6666
HANG_GUARD = 60


def fix_calc() -> tuple[dict, dict]:
    return (
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )


def in_topic(bot: BotHarness, thread: int | None, needle: str, chat: int = GROUP):
    """The bot's newest message in a topic of the group (None: the general topic) that contains `needle`."""
    return next((m for m in reversed(bot.tg.messages_in_topic(chat, thread)) if needle in (m.text or "")), None)


async def test_a_members_task_is_merged_only_by_an_owner(team: BotHarness, model: RoleScript, workspace_root) -> None:
    repo = workspace_root / "calc"
    topic = team.tg.create_topic(GROUP, "calc", OWNER)  # named like a workspace: it binds itself
    model.add("orchestrator", start_task("", "Fix add() in calc.py."), claude_says.text("Started task #1."))
    model.add("code", *fix_calc())
    team.tg.send_text(MEMBER, "@test_bot fix the failing test", chat_id=GROUP, thread_id=topic, username="mia")

    task = await ended(team, 1)
    assert task.status is TaskStatus.COMPLETED and task.workspace == "calc" and task.user_id == MEMBER
    assert "workspace of this conversation: calc" in last_user_text(model.requests["orchestrator"][0])
    summary = await team.tg.await_for(  # posted in the topic the task was started from
        lambda: next((m for m in team.tg.messages_in_topic(GROUP, topic) if "task:merge:1" in m.callback_data), None)
    )

    team.tg.press_button(MEMBER, summary.message_id, "task:merge:1", chat_id=GROUP, username="mia")
    refusal = await team.tg.await_for(lambda: in_topic(team, topic, "Only an owner can merge"))
    assert refusal.text.startswith("Only an owner can merge; I've asked them")
    request = await team.tg.await_for(lambda: in_topic(team, topic, "asks to merge"))
    assert "@mia asks to merge task #1" in request.text and "task:merge:1" in request.callback_data
    assert any(e.get("url") == f"tg://user?id={OWNER}" for e in request.entities), "the owners are named"
    assert "a - b" in text_now(repo / "calc.py"), "a member's press merged nothing"

    team.tg.press_button(OWNER, request.message_id, "task:merge:1", chat_id=GROUP)
    await team.tg.await_for(lambda: "a + b" in text_now(repo / "calc.py"))
    await team.tg.await_for(lambda: git(repo, "--no-optional-locks", "status", "--porcelain").strip() == "")

    team.tg.send_command(MEMBER, "/tasks", chat_id=GROUP)  # the general topic is another conversation
    assert await team.tg.await_for(lambda: in_topic(team, None, "No tasks yet"))
    for command in ("task", "log"):  # a task is shown in its own conversation only, to an owner as to a member
        team.tg.send_command(OWNER, f"/{command} 1", chat_id=GROUP)
        refused = await team.tg.await_for(lambda c=command: in_topic(team, None, f"Usage: /{c} N"))
        assert refused.text.startswith("There is no task #1 in this chat.")
    team.tg.send_command(OWNER, "/log 1")  # the owner's private chat
    await team.tg.await_for(lambda: any("There is no task #1" in (m.text or "") for m in team.tg.messages(OWNER)))
    shown = team.tg.messages(GROUP) + team.tg.messages(OWNER)
    assert not any(m.kind == "document" for m in shown) and not any("Tool calls:" in (m.text or "") for m in shown)


async def test_a_members_network_question_goes_to_an_owner(team: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", start_task("calc", "Fetch the data."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": "curl -s https://example.com/data", "network": True}),
        claude_says.text("Could not fetch it."),
    )
    team.tg.send_text(MEMBER, "fetch the data in calc", username="mia")  # the member's private chat

    question = await team.tg.await_for(
        lambda: next((m for m in team.tg.messages(OWNER) if "asks for network access" in (m.text or "")), None),
        timeout=HANG_GUARD,
    )
    assert [d.split(":")[:2] for d in question.callback_data] == [["net", "once"], ["net", "task"], ["net", "deny"]]
    assert "only an owner can answer" in question.text and "@mia" in question.text
    told = await team.tg.await_for(
        lambda: next((m for m in team.tg.messages(MEMBER) if "I've asked an owner" in (m.text or "")), None)
    )
    assert not any(d.startswith("net:") for m in team.tg.messages(MEMBER) for d in m.callback_data), (
        "the member is not shown buttons they may not press"
    )
    assert told is not None
    deny = next(d for d in question.callback_data if "deny" in d)
    team.tg.press_button(OWNER, question.message_id, deny)
    task = await ended(team, 1)
    assert task.user_id == MEMBER
    decisions = [e.detail for e in await team.runtime.store.task_events(1) if e.kind == "network"]
    assert any(d.startswith("denied by the owner") for d in decisions), decisions


async def test_two_topics_keep_their_own_history_and_workspace(team: BotHarness, model: RoleScript) -> None:
    calc = team.tg.create_topic(GROUP, "calc", OWNER)
    site = team.tg.create_topic(GROUP, "the website", OWNER)
    team.tg.send_command(OWNER, "/workspace group therapy", chat_id=GROUP)  # in the general topic: not the site's
    team.tg.send_command(OWNER, "/workspace group therapy", chat_id=GROUP, thread_id=site)
    await team.tg.await_for(lambda: in_topic(team, site, "now works in group-therapy"))

    model.add("orchestrator", claude_says.text("Noted: banana."))
    team.tg.send_text(OWNER, "@test_bot remember the word banana", chat_id=GROUP, thread_id=calc)
    await team.tg.await_for(lambda: in_topic(team, calc, "Noted: banana."))

    model.add("orchestrator", start_task("", "Add a CONTRIBUTING file."), claude_says.text("Started task #1."))
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "CONTRIBUTING.md", "content": "PRs welcome\n"}),
        claude_says.text("Added CONTRIBUTING.md."),
    )
    team.tg.send_text(OWNER, "@test_bot add a contributing guide", chat_id=GROUP, thread_id=site)
    task = await ended(team, 1)

    site_request = model.requests["orchestrator"][1]  # [0]: the calc topic's turn; [2]: the tool result's round
    assert "add a contributing guide" in str(site_request["messages"][-1])
    assert "banana" not in str(site_request["messages"]), "another topic's history leaked into this one"
    assert "workspace of this conversation: group-therapy" in last_user_text(site_request)
    assert task.workspace == "group-therapy"
    assert await team.tg.await_for(lambda: in_topic(team, site, "Files:"))
    assert in_topic(team, calc, "Task #1") is None and in_topic(team, None, "Task #1") is None


async def test_a_deleted_topic_falls_back_to_the_general_topic(team: BotHarness, model: RoleScript) -> None:
    topic, go = await task_held_in_topic(team, model)
    team.tg.delete_topic(GROUP, topic)
    go.set()

    await ended(team, 1)
    summary = await team.tg.await_for(lambda: in_topic(team, None, "Files:"), timeout=HANG_GUARD)
    note = in_topic(team, None, "closed or was deleted")
    assert note is not None and "«calc»" in note.text and note.message_id < summary.message_id


async def test_a_stranger_and_chatter_in_the_group_are_ignored(team: BotHarness, model: RoleScript) -> None:
    team.tg.send_text(STRANGER, "@test_bot delete everything", chat_id=GROUP)
    team.tg.send_text(MEMBER, "lunch at noon?", chat_id=GROUP)  # team chatter: not addressed to the bot
    model.add("orchestrator", claude_says.text("Hello team."))
    team.tg.send_text(MEMBER, "@test_bot hello", chat_id=GROUP)
    await team.tg.await_for(lambda: in_topic(team, None, "Hello team."))
    assert len(model.requests["orchestrator"]) == 1
    assert "delete everything" not in str(model.requests["orchestrator"]) and "lunch" not in str(
        model.requests["orchestrator"]
    )
    assert [m.text for m in team.tg.messages(GROUP)] == ["Hello team."], "nothing was said to the stranger"


async def test_an_unexpected_error_in_a_topic_is_apologised_for_in_that_topic(
    team: BotHarness, model: RoleScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    calc = team.tg.create_topic(GROUP, "calc", OWNER)

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(team.runtime.orchestrator, "handle", broken)
    team.tg.send_text(OWNER, "@test_bot hello", chat_id=GROUP, thread_id=calc)
    assert await team.tg.await_for(lambda: in_topic(team, calc, "something went wrong"))
    assert in_topic(team, None, "something went wrong") is None


async def test_a_task_queued_by_a_user_no_longer_allowed_never_starts(team: BotHarness, model: RoleScript) -> None:
    """A task stored while its starter was allowed (queued, or pending again after a restart) and claimed after they
    left ALLOWED_USER_IDS: its worker never reaches Claude or a tool, and the chat is told why, as a schedule's run
    of such a maker is paused."""
    from agents.core.models import Task, WorkerKind
    from tests.scripted import spare

    gone = 3003  # a member once: not in ALLOWED_USER_IDS any more
    never = "the worker of a task whose starter is no longer allowed: it must never run"
    model.add(
        "code",
        spare(claude_says.tool_use("read_file", {"path": "calc.py"}), why=never),
        spare(claude_says.text("Read it."), why=never),
    )
    team.tg.send_command(OWNER, "/start", chat_id=GROUP)
    await team.tg.await_for(lambda: team.tg.messages(GROUP))
    task = await team.runtime.store.add_task(
        Task(
            chat_id=GROUP,
            user_id=gone,
            user_name="@gone",
            workspace="calc",
            worker=WorkerKind.CODE,
            title="queued before they left",
            instructions="Read calc.py.",
            background=True,
        )
    )
    team.runtime.crew.engine.wake()
    ended_now = await ended(team, task.stored_id)
    assert not model.requests["code"], "a worker ran for a user no longer allowed"
    assert ended_now.status is TaskStatus.FAILED, ended_now
    assert "no longer an allowed user" in (ended_now.error or ""), ended_now.error
    told = await team.tg.await_for(lambda: in_topic(team, None, "no longer an allowed user"))
    assert f"Task #{task.id}" in told.text


async def test_an_owners_notes_in_the_group_leave_out_a_members_private_notes(
    team: BotHarness, model: RoleScript
) -> None:
    model.add(
        "orchestrator",
        claude_says.tool_use("remember", {"text": "my staging box is mia-staging.internal"}),
        claude_says.text("Noted."),
    )
    team.tg.send_text(MEMBER, "remember that my staging box is mia-staging.internal", username="mia")
    await team.tg.await_for(lambda: any("Noted." in (m.text or "") for m in team.tg.messages(MEMBER)))
    model.add("orchestrator", claude_says.tool_use("remember", {"text": "we squash merges"}), claude_says.text("Ok."))
    team.tg.send_text(OWNER, "remember that we squash merges")
    await team.tg.await_for(lambda: any("Ok." in (m.text or "") for m in team.tg.messages(OWNER)))

    team.tg.send_command(OWNER, "/notes", chat_id=GROUP)
    in_group = await team.tg.await_for(lambda: in_topic(team, None, "Standing notes"), timeout=HANG_GUARD)
    assert "we squash merges" in in_group.text, "the owners' notes apply to everyone: the group sees them"
    assert "mia-staging" not in in_group.text, "a member's own note is not shown to the whole group"
    team.tg.send_command(OWNER, "/notes")  # the owner's private chat: every note, each with Forget
    private = await team.tg.await_for(
        lambda: next((m for m in team.tg.messages(OWNER) if "Standing notes" in (m.text or "")), None),
        timeout=HANG_GUARD,
    )
    assert "mia-staging" in private.text and "we squash merges" in private.text
    assert private.callback_data == ["note:forget:1", "note:forget:2"]

    # nor can forget reach it from the group (its answer quotes the note it forgot): not by the owner's words, nor
    # by the Forget button of the notice a model's call leaves
    last = await team_turn(team, model, [claude_says.tool_use("forget", {"note_id": 1})], GROUP, OWNER, "forget note 1")
    [result] = tool_results(last)
    assert result == "Error: there is no note #1", result
    shown_from = len(team.tg.messages(GROUP))
    pressed = team.tg.press_button(OWNER, in_group.message_id, "note:forget:1", chat_id=GROUP, strict=False)
    await team.tg.await_for(lambda: team.tg.callback_answers.get(pressed["callback_query"]["id"]), timeout=HANG_GUARD)
    assert not any("mia-staging" in (m.text or "") for m in team.tg.messages(GROUP)[shown_from:])
    assert [n.id for n in await team.runtime.crew.notes.table.all()] == [1, 2], "the member's note was deleted"


async def test_an_owners_task_on_self_in_the_group_shows_a_member_nothing_of_what_it_did(
    team: BotHarness, model: RoleScript
) -> None:
    """Members reach none of `self` (the bot's own code). An owner's task on it ran in the group: a member's /task
    and /log, and get_task in a member's turn (the model may call it on any number), are refused; the owner's are
    not. What the task wrote and reported is in its tool calls and its report."""
    written, reported = "SELF-FILE-MARKER-4711", "SELF-REPORT-MARKER-0815"
    model.add("orchestrator", start_task("self", "Write the owners' notes."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "OWNERS_NOTES.md", "content": f"{written}\n"}),
        claude_says.text(f"Wrote the notes. {reported}"),
    )
    team.tg.send_text(OWNER, "@test_bot write the owners' notes in your own code", chat_id=GROUP, username="boss")
    task = await ended(team, 1)
    assert task.workspace == "self" and task.user_id == OWNER, task
    await team.tg.await_for(  # the summary, the group's to see: the last message before the commands' answers
        lambda: any("task:diff:1" in m.callback_data for m in team.tg.messages(GROUP)), timeout=HANG_GUARD
    )

    for command in ("/task 1", "/log 1"):
        before = len(team.tg.messages(GROUP))
        team.tg.send_command(MEMBER, command, chat_id=GROUP, username="mia")
        answer = (await team.tg.wait_for_message(GROUP, count=before + 1))[before]
        assert "only an owner can see what it did" in (answer.text or ""), (command, answer)
        assert written.encode() not in (answer.data or b"") and written not in (answer.text or "")

    model.add("orchestrator", claude_says.tool_use("get_task", {"task_id": 1}), claude_says.text("Here it is."))
    team.tg.send_text(MEMBER, "@test_bot what did task 1 do?", chat_id=GROUP, username="mia")
    await team.tg.await_for(lambda: in_topic(team, None, "Here it is."), timeout=HANG_GUARD)
    said = last_user_text(model.requests["orchestrator"][-1])
    assert "only an owner can see what it did" in said and reported not in said and written not in said, said

    before = len(team.tg.messages(GROUP))
    team.tg.send_command(OWNER, "/log 1", chat_id=GROUP, username="boss")
    log = (await team.tg.wait_for_message(GROUP, count=before + 1))[before]
    assert written.encode() in (log.data or b""), log  # the owner's own view is unchanged


async def test_usage_in_the_group_or_a_members_chat_itemises_only_that_chat(
    team: BotHarness, model: RoleScript
) -> None:
    """What the owner spent in a private chat, and a member in theirs, is shown neither to the group nor to the other
    member; the owner's private chat shows the whole bot, per user."""
    store = team.runtime.store
    for chat, user, tokens in ((OWNER, OWNER, 1_000_000), (MEMBER, MEMBER, 2_000_000)):
        await store.record_usage(
            UsageRecord(chat_id=chat, user_id=user, agent="orchestrator", model="m", input_tokens=tokens)
        )
    team.tg.send_command(MEMBER, "/usage", chat_id=GROUP, username="mia")
    in_group = await team.tg.await_for(lambda: in_topic(team, None, "This chat today"), timeout=HANG_GUARD)
    assert "By user" not in in_group.text and "Today:" not in in_group.text.replace("This chat today:", ""), (
        in_group.text
    )
    assert "1,000,000" not in in_group.text and "2,000,000" not in in_group.text, in_group.text

    team.tg.send_command(OTHER_MEMBER, "/usage", username="otto")
    other = await team.tg.await_for(lambda: said(team, OTHER_MEMBER, "This chat today"), timeout=HANG_GUARD)
    assert "By user" not in other.text and "2,000,000" not in other.text, other.text

    team.tg.send_command(MEMBER, "/usage", username="mia")
    own = await team.tg.await_for(lambda: said(team, MEMBER, "This chat today"), timeout=HANG_GUARD)
    assert "in 2,000,000" in own.text and "By user in this chat" in own.text and "1,000,000" not in own.text

    team.tg.send_command(OWNER, "/usage")
    whole = await team.tg.await_for(lambda: said(team, OWNER, "This chat today"), timeout=HANG_GUARD)
    assert whole.text.startswith("Today:") and "in 3,000,000" in whole.text, whole.text
    assert "By user (today · this month)" in whole.text and whole.text.count("\n• ") == 2, whole.text
