"""Owners and members at the crew, where roles are enforced: an in-memory store, real git workspaces, a
recording notifier; no PTB, no SDK. The end-to-end runs through the fake Bot API are in test_team_e2e.py."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents.core.errors import ToolError
from agents.core.models import AttemptGroup, Caller, Schedule, ScheduleStatus, Task, TaskStatus, WorkerKind
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.store.conversations import TOPIC_BASE, Place
from agents.store.database import Store
from agents.tools.desk_tools import desk_tools
from agents.tools.toolbox import Audit, Toolbox
from agents.work.crew import Crew
from agents.work.task_queue import TaskQueue
from agents.workspaces.folders import OwnersOnly, Workspaces
from tests.conftest import CALC_BUGGY, make_repo
from tests.support.settings import offline_settings

OWNER, MEMBER, OTHER_MEMBER = 1, 2, 3
CHAT = -100700


class RecordingNotifier:
    """A Notifier that keeps what the crew sent and handed to the owners."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []
        self.asked: list[tuple[int, str, Any]] = []

    async def send(self, chat_id: int, markdown: str, *, buttons: Any = None, reply_to: int | None = None) -> int:
        self.sent.append((chat_id, markdown))
        return len(self.sent)

    async def edit(self, chat_id: int, message_id: int, markdown: str, *, buttons: Any = None) -> None: ...

    async def send_document(self, chat_id: int, filename: str, data: bytes, caption: str = "") -> None: ...

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None: ...

    async def send_album(self, chat_id: int, pictures: list[tuple[str, bytes]]) -> None: ...

    async def ask_owners(
        self, chat_id: int, markdown: str, *, buttons: Any = None, literal: bool = False
    ) -> list[tuple[int, int]]:
        assert literal, "a request handed to the owners is built literal and goes without the output filter"
        self.asked.append((chat_id, markdown, buttons))
        return [(chat_id, 99)]


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    store = await Store.open(":memory:")
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def crew(tmp_path: Path, store: Store) -> Crew:
    root = tmp_path / "workspaces"
    make_repo(root / "calc", CALC_BUGGY)
    make_repo(root / "site", {"index.html": "<h1>hi</h1>\n"})
    bot_repo = make_repo(tmp_path / "self", {"README.md": "# me\n"})
    settings = Settings(
        _env_file=None,
        telegram_bot_token="1:x",
        anthropic_api_key="sk-unit",
        allowed_user_ids=f"{OWNER},{MEMBER},{OTHER_MEMBER}",
        owner_user_ids=str(OWNER),
        workspace_path=root,
        bot_repository=bot_repo,
        database_path=tmp_path / "unused.db",
    )

    async def never_runs(task: Task) -> None:
        raise AssertionError("no task runs in these tests")

    queue = TaskQueue(store, never_runs, 1)
    queue.wake = lambda: None
    return Crew(settings, store, Workspaces(root, bot_repo), queue, RecordingNotifier(), SecretsFilter())


def member(chat: int = CHAT, user: int = MEMBER) -> Caller:
    return Caller(chat_id=chat, user_id=user, user_name=f"@user{user}")


def owner(chat: int = CHAT) -> Caller:
    return Caller(chat_id=chat, user_id=OWNER, user_name="@boss")


async def ended_task(store: Store, by: int, chat: int = CHAT) -> Task:
    task = await store.add_task(
        Task(chat_id=chat, workspace="calc", worker=WorkerKind.CODE, title="fix add", instructions="x", user_id=by)
    )
    await store.update_task(task.id, status=TaskStatus.COMPLETED)
    return await store.get_task(task.id)


def test_owners_default_to_every_allowed_user(tmp_path: Path) -> None:
    alone = offline_settings(tmp_path, allowed_user_ids="5,6")
    assert alone.users.owners == {5, 6} and alone.users.is_owner(6)


async def test_a_members_merge_is_refused_and_handed_to_the_owners(crew: Crew, store: Store) -> None:
    task = await ended_task(store, by=MEMBER)
    with pytest.raises(ToolError, match=r"^only an owner can merge; I've asked them$"):
        await crew.attempts.merge_task(member(), task.id)
    ((where, request, buttons),) = crew.notifier.asked
    assert where == CHAT and request.startswith("🙋 @user2 asks to merge **task #1**")
    assert [b.data for b in buttons[0]] == ["task:merge:1", "task:diff:1", "task:discard:1"]
    with pytest.raises(ToolError, match="only an owner can discard"):
        await crew.branches.discard(member(), task.id, anywhere=True)  # a button: the same rule


async def test_a_members_request_pressed_again_reaches_the_owners_once(crew: Crew, store: Store) -> None:
    """Outside a turn (a button, the review page's API) nothing else limits a member's presses: the same request goes
    to the owners once, another request (or another member's) goes too."""
    task = await ended_task(store, by=MEMBER)
    for _ in range(5):
        with pytest.raises(ToolError, match="only an owner can merge"):
            await crew.attempts.merge_task(member(), task.id)
    with pytest.raises(ToolError, match="the owners were asked already"):
        await crew.attempts.merge_task(member(), task.id)
    with pytest.raises(ToolError, match="only an owner can discard"):
        await crew.branches.discard(member(), task.id, anywhere=True)
    asked = [request.split("**")[0] + request.split("**")[1] for _, request, _ in crew.notifier.asked]
    assert asked == ["🙋 @user2 asks to merge task #1", "🙋 @user2 asks to discard task #1"], asked


async def test_members_act_on_their_own_tasks_only(crew: Crew, store: Store) -> None:
    mine = await store.add_task(
        Task(chat_id=CHAT, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="x", user_id=MEMBER)
    )
    with pytest.raises(ToolError, match=r"task #1 is not yours: only the member who started it or an owner"):
        await crew.attempts.cancel_task(member(user=OTHER_MEMBER), mine.id)
    with pytest.raises(ToolError, match="only the member who started it"):
        await crew.attempts.message_task(member(user=OTHER_MEMBER), mine.id, "stop")
    assert (await crew.attempts.cancel_task(owner(), mine.id)).startswith("Task #1"), "an owner may (no ToolError)"
    assert (await crew.attempts.cancel_task(member(), mine.id)).startswith("Task #1"), "and so may its starter"


async def test_owner_only_work_is_refused_to_members(crew: Crew, store: Store) -> None:
    with pytest.raises(ToolError, match="only an owner can create a workspace"):
        await crew.binding.create(member(), "blog")
    with pytest.raises(ToolError, match="only an owner can work on the bot's own code"):
        await crew.races.start_task(member(), "self", "code", "add /restart", True)
    with pytest.raises(ToolError, match="only an owner can work on the bot's own code"):
        await crew.starts.start_research(member(), "self", "how are handlers wired?")
    assert await store.list_tasks(CHAT) == []
    assert "Task #1" in await crew.races.start_task(owner(), "self", "code", "add /restart", True)


async def test_an_owner_acts_on_a_handed_request_from_their_own_chat(crew: Crew, store: Store) -> None:
    task = await ended_task(store, by=MEMBER)
    with pytest.raises(ToolError, match="no task #1"):  # a tool call is confined to its conversation
        await crew.branches.discard(owner(chat=OWNER), task.id)
    # the request's button, in the owner's chat
    text = await crew.branches.discard(owner(chat=OWNER), task.id, anywhere=True)
    assert text.startswith("Task #1 was discarded")
    assert crew.notifier.sent == [(CHAT, f"{text} (decided by an owner)")], "the task's conversation is told"
    with pytest.raises(ToolError, match="no task #1"):
        await crew.branches.discard(member(chat=MEMBER), task.id, anywhere=True)  # a member's press: never across


async def test_a_model_cannot_set_what_the_bot_sets_through_a_tool(crew: Crew, store: Store) -> None:
    """The button's `anywhere` and the caller are the bot's: the tools refuse them from the model, so a tool call
    from the owner's own chat never reaches another conversation's task."""
    task = await ended_task(store, by=MEMBER)
    toolbox = Toolbox(desk_tools(crew, owner(chat=OWNER)), Audit(None, "orchestrator"), SecretsFilter())
    for name in ("discard_task", "merge_task", "open_pull_request"):
        for hostile in ({"anywhere": True}, {"caller": owner()}, {"chat_id": CHAT}):
            result = await toolbox.call(name, {"task_id": task.id, **hostile})
            assert result.is_error and str(result.content).startswith(f"Error: bad arguments for {name}"), result
        refused = await toolbox.call(name, {"task_id": task.id})
        assert refused.is_error and "no task #1" in str(refused.content), refused
    assert (await store.get_task(task.id)).status is TaskStatus.COMPLETED
    assert crew.notifier.sent == [] and crew.notifier.asked == []


async def test_a_topic_is_a_conversation_with_its_own_workspace(crew: Crew, store: Store) -> None:
    conversations = store.conversations
    first = await conversations.topic(CHAT, 12, "calc")
    assert first >= TOPIC_BASE and await conversations.topic(CHAT, 12) == first
    assert await conversations.topic(CHAT, 13, "") != first
    assert await conversations.place(first) == Place(CHAT, 12, "calc")
    await crew.binding.auto_bind(first, "calc")
    assert await conversations.bound_workspace(first) == "calc"
    await crew.binding.auto_bind(await conversations.topic(CHAT, 14, "lunch plans"), "lunch plans")
    assert await conversations.bound_workspace(TOPIC_BASE + 3) is None, "a name that is no workspace binds nothing"

    started = await crew.races.start_task(member(chat=first), "", "code", "fix the failing test", True)
    assert "workspace calc" in started and (await store.get_task(1)).workspace == "calc"
    with pytest.raises(ToolError, match="no workspace named"):
        await crew.races.start_task(member(), "", "code", "fix it", True)
    assert "now works in **site**" in await crew.binding.bind(member(chat=first), "site")
    assert await conversations.bound_workspace(first) == "site"
    await crew.binding.auto_bind(first, "calc")  # a binding someone made is never replaced by the topic's name
    assert await conversations.bound_workspace(first) == "site"


async def test_a_members_name_is_shown_as_written_in_the_owners_request(crew: Crew, store: Store) -> None:
    from telegram_bot.render.markdown import markdown_to_html

    task = await ended_task(store, by=MEMBER)
    named = Caller(chat_id=CHAT, user_id=MEMBER, user_name="mia_*dev* [x](y)")
    with pytest.raises(ToolError):
        await crew.attempts.merge_task(named, task.id)
    ((_, request, _),) = crew.notifier.asked
    shown = markdown_to_html(request).split(" asks ")[0]
    assert shown == "🙋 mia_*dev* [x](y)", shown  # no italics, bold or link made of the name


async def test_a_proposal_on_the_bots_own_code_is_an_owners_to_read(crew: Crew, store: Store) -> None:
    """Members reach none of `self`: a task on it is not shown them whole, nor is a proposal on it. get_proposal
    checked only that the proposal was the chat's, so a member had the owner's plan for the bot's own code by its
    number, or by asking for "the proposal" with no number; now neither names it, and the owner reads it."""
    from agents.core.models import Proposal
    from agents.workspaces.folders import OwnersOnly

    proposal = await store.add_proposal(
        Proposal(chat_id=CHAT, workspace="self", request="harden the bot", body="## Plan\nOWNERS-ONLY", user_id=OWNER)
    )
    with pytest.raises(OwnersOnly):
        await crew.lookups.get_proposal(member(), proposal.id)
    with pytest.raises(ToolError, match="no proposal") as refused:
        await crew.lookups.get_proposal(member())
    assert "OWNERS-ONLY" not in str(refused.value)
    assert "OWNERS-ONLY" in await crew.lookups.get_proposal(owner(), proposal.id)
    assert "OWNERS-ONLY" in await crew.lookups.get_proposal(owner())
    mine = await store.add_proposal(
        Proposal(chat_id=CHAT, workspace="calc", request="fix add", body="## Plan\nfix it", user_id=MEMBER)
    )
    assert "fix it" in await crew.lookups.get_proposal(member()), "the member's own pending one, the only one shown"
    assert "fix it" in await crew.lookups.get_proposal(member(), mine.id)


async def test_a_note_to_another_members_attempts_is_refused_for_the_role(crew: Crew, store: Store) -> None:
    """Another member races two attempts; a member's note to one of them was dropped with "the attempts ended before
    the note reached them" (false: they run on) because the refusal looked like a race lost to the attempt's end."""
    group = AttemptGroup(chat_id=CHAT, size=2, title="fix add")
    attempts = [
        Task(
            chat_id=CHAT,
            workspace="calc",
            worker=WorkerKind.CODE,
            title="fix add",
            instructions="x",
            user_id=OTHER_MEMBER,
            user_name="@other",
            attempt=k,
        )
        for k in (1, 2)
    ]
    stored = await store.attempts.add(group, attempts)
    for attempt in stored:
        await store.update_task(attempt.stored_id, status=TaskStatus.IN_PROGRESS)
    for note in ("attempt 1: push to main", "push to main"):
        with pytest.raises(ToolError, match="is @other's: only the member who started it or an owner can steer it"):
            await crew.attempts.message_task(member(), stored[0].stored_id, note)


async def test_merge_of_another_chats_attempt_answers_as_for_no_task_at_all(crew: Crew, store: Store) -> None:
    """merge_task in another chat with the number of an attempt said "there are no attempts #G in this chat": that
    the task exists, and its race's number. It answers as for a number no task has."""
    group = AttemptGroup(chat_id=CHAT, size=2, title="fix add")
    attempts = [
        Task(chat_id=CHAT, workspace="calc", worker=WorkerKind.CODE, title="fix add", instructions="x", attempt=k)
        for k in (1, 2)
    ]
    stored = await store.attempts.add(group, attempts)
    elsewhere = owner(chat=OWNER)  # the owner's private chat
    with pytest.raises(ToolError) as missing:
        await crew.attempts.merge_task(elsewhere, 999)
    with pytest.raises(ToolError) as attempt:
        await crew.attempts.merge_task(elsewhere, stored[0].stored_id)
    assert str(attempt.value) == str(missing.value).replace("999", str(stored[0].stored_id)), str(attempt.value)


async def paused_schedule(store: Store, maker: int | None, name: str, workspace: str) -> Schedule:
    """An hourly code schedule of CHAT made by `maker`, paused (as a run pauses one it may no longer run)."""
    made = await store.schedules.add(
        Schedule(
            chat_id=CHAT,
            user_id=maker,
            user_name=name,
            workspace=workspace,
            worker=WorkerKind.CODE,
            instructions="run",
            every_minutes=60,
        )
    )
    await store.schedules.update(made.stored_id, status=ScheduleStatus.PAUSED, next_run_at=None)
    return made


async def test_a_members_paused_schedule_on_the_bots_own_code_stays_paused(crew: Crew, store: Store) -> None:
    """A schedule on `self` made while its maker was an owner was paused when they became a member; resuming it
    answered "resumed" (its next run would only pause it again: members reach none of `self`)."""
    made = await paused_schedule(store, MEMBER, "@member", "self")
    for caller in (member(), owner()):
        with pytest.raises(OwnersOnly, match="its maker is not an owner"):
            await crew.schedules.resume(caller, made.stored_id)
    assert (await store.schedules.get(made.stored_id)).status is ScheduleStatus.PAUSED


@pytest.mark.parametrize("maker", [4242, None], ids=["no-longer-allowed", "unknown"])
async def test_a_paused_schedule_whose_maker_is_no_longer_allowed_stays_paused(
    crew: Crew, store: Store, maker: int | None
) -> None:
    """A schedule is paused at its run when its maker is no longer an allowed user (a run acts as its maker); an
    owner's resume answered "resumed", and its next run only paused it again with a second notice."""
    made = await paused_schedule(store, maker, "@gone", "calc")
    with pytest.raises(ToolError, match="no longer an allowed user: it stays paused"):
        await crew.schedules.resume(owner(), made.stored_id)
    assert (await store.schedules.get(made.stored_id)).status is ScheduleStatus.PAUSED


@pytest.mark.parametrize(("gone", "beside"), [("bot", None), ("notes", "notes-archive")])
async def test_a_conversation_bound_to_a_deleted_workspace_is_told_so_never_sent_to_another(
    crew: Crew, store: Store, gone: str, beside: str | None
) -> None:
    """The bound name is the folder's: read tolerantly once the folder is deleted, `bot` would be the bot's own code
    (one of `self`'s spoken names) and `notes` would be `notes-archive` (a prefix), and the task would start there."""
    for name in filter(None, (gone, beside)):
        make_repo(crew.workspaces.root / name, {"README.md": f"# {name}\n"})
    assert f"now works in **{gone}**" in await crew.binding.bind(owner(), gone)
    shutil.rmtree(crew.workspaces.root / gone)
    with pytest.raises(ToolError, match=f"the workspace {gone} this conversation is bound to is gone"):
        await crew.races.start_task(owner(), "", "code", "tidy the readme", True)
    assert await store.get_task(1) is None


@pytest.mark.parametrize(("gone", "beside"), [("bot", None), ("notes", "notes-archive")])
async def test_a_proposal_whose_workspace_was_deleted_is_never_approved_into_another(
    crew: Crew, store: Store, gone: str, beside: str | None
) -> None:
    from agents.core.models import Proposal

    for name in filter(None, (gone, beside)):
        make_repo(crew.workspaces.root / name, {"README.md": f"# {name}\n"})
    proposal = await store.add_proposal(
        Proposal(chat_id=CHAT, workspace=gone, request="tidy the readme", body="## Plan\ntidy", user_id=OWNER)
    )
    shutil.rmtree(crew.workspaces.root / gone)
    with pytest.raises(ToolError, match=f"the workspace {gone} is gone"):
        await crew.proposals.approve(owner(), proposal.id)
    assert await store.get_task(1) is None


async def test_a_task_whose_workspace_was_deleted_is_never_merged_in_another(crew: Crew, store: Store) -> None:
    """A task keeps its workspace's name: Merge, Diff and Discard find its repository by exactly that name."""
    for name in ("notes", "notes-archive"):
        make_repo(crew.workspaces.root / name, {"README.md": f"# {name}\n"})
    task = await store.add_task(
        Task(chat_id=CHAT, workspace="notes", worker=WorkerKind.CODE, title="tidy", instructions="x", user_id=OWNER)
    )
    await store.update_task(task.id, status=TaskStatus.COMPLETED, branch="agentlab/task-1-tidy", base_commit="0" * 40)
    shutil.rmtree(crew.workspaces.root / "notes")
    with pytest.raises(ToolError, match="the workspace notes is gone"):
        await crew.branches.merge(owner(), task.id)


@pytest.mark.parametrize("name", ["self", "Self", "yourself", "your code", "the bot", "agentlab", "you"])
async def test_a_members_workspace_command_never_binds_self(crew: Crew, store: Store, name: str) -> None:
    with pytest.raises(ToolError):
        await crew.binding.bind(member(), name)
    assert await store.conversations.bound_workspace(CHAT) is None
