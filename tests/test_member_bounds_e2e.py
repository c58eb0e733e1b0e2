"""The bounds of a member in a team, played by a hostile model and member through the real bot: whose proposals a
member decides, which standing notes reach them, what of a task on the bot's own code (`self`) they reach when its
starter is no longer an owner, what an owner is once out of ALLOWED_USER_IDS, and that no id-taking tool reaches a
record of another conversation. The model is scripted to call any tool with any argument, as a hostile one could;
records another user made are stored directly where making them through the bot would only add time.
"""

from __future__ import annotations

import shutil
import sys
from datetime import UTC, datetime, timedelta

import pytest

from agents.core.errors import ToolError
from agents.core.models import (
    Caller,
    Proposal,
    ProposalStatus,
    Schedule,
    ScheduleStatus,
    Task,
    TaskStatus,
    WorkerKind,
)
from agents.core.secrets_filter import SecretsFilter
from agents.core.setting_groups import UserSettings
from agents.store.standing import StandingNote
from agents.tools.desk_tools import desk_tools
from agents.tools.toolbox import Audit, Toolbox
from agents.work.task_proposals import store_proposal
from tests.conftest import BotHarness, git, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text, spare
from tests.support.team import (  # noqa: F401  (team: a fixture)
    GROUP,
    HANG_GUARD,
    MEMBER,
    OWNER,
    said,
    team,
    team_turn,
    tool_results,
)

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.quick_tests,
]


async def member_turn(
    bot: BotHarness, model: RoleScript, *calls: dict, chat: int = GROUP, user: int = MEMBER, words: str = "do it"
) -> dict:
    """One turn of `user` in `chat`, saying `words`, whose model makes `calls`, one response each."""
    return await team_turn(bot, model, list(calls), chat, user, words)


# ---- proposals ------------------------------------------------------------------------------------------------------


async def in_group(bot: BotHarness) -> None:
    bot.tg.send_command(OWNER, "/start", chat_id=GROUP)  # a group the owner and the members share
    await bot.tg.await_for(lambda: bot.tg.messages(GROUP))


async def test_a_member_decides_and_reworks_only_the_proposals_they_asked_for(
    team: BotHarness, model: RoleScript
) -> None:
    """Members decide their own proposals, as they cancel their own tasks; an owner's (on calc, or on `self`, which
    members reach none of) stays pending whatever the member's model calls, by id or by "go ahead"."""
    store = team.runtime.store
    await in_group(team)
    owners = await store.add_proposal(
        Proposal(chat_id=GROUP, workspace="calc", request="owner's", body="## Plan\n1. Fix add.", user_id=OWNER)
    )
    on_self = await store.add_proposal(
        Proposal(chat_id=GROUP, workspace="self", request="add /restart", body="## Plan\n1. x.", user_id=OWNER)
    )
    results = tool_results(
        await member_turn(
            team,
            model,
            claude_says.tool_use("reject_proposal", {"proposal_id": owners.id}),
            claude_says.tool_use("approve_proposal", {"proposal_id": owners.id}),
            claude_says.tool_use("start_research", {"workspace": "calc", "request": "x", "refines": owners.id}),
            claude_says.tool_use("reject_proposal", {"proposal_id": on_self.id}),
            claude_says.tool_use("reject_proposal", {}),
        )
    )
    decided = {p.id: (await store.get_proposal(p.stored_id)).status for p in (owners, on_self)}
    assert decided == {owners.id: ProposalStatus.PENDING, on_self.id: ProposalStatus.PENDING}, results
    assert all("only the member who asked for it or an owner" in r for r in results[:3]), results
    assert "only an owner can reject it" in results[3], results[3]
    assert "only the member who asked for it or an owner" not in results[4], "with two pending, it asks which"
    assert await store.list_tasks(GROUP) == [], "no research or code task was started"

    # the member's own proposal: "go ahead" with no id is theirs, the owners' left pending
    mine = await store.add_proposal(
        Proposal(chat_id=GROUP, workspace="calc", request="mine", body="## Plan\n1. Fix add.", user_id=MEMBER)
    )
    model.add("code", spare(claude_says.text("Nothing to do."), why="the approved task may not ask before the end"))
    [approved] = tool_results(await member_turn(team, model, claude_says.tool_use("approve_proposal", {})))
    assert approved.startswith(f"Proposal #{mine.id} approved"), approved
    assert (await store.get_proposal(owners.stored_id)).status is ProposalStatus.PENDING


async def test_a_new_proposal_supersedes_only_the_one_it_reworks(team: BotHarness) -> None:
    """A new proposal for a workspace leaves the pending ones there to their askers, its own asker's too (a research
    the model started beside it withdraws nothing); it replaces the one it reworks, and a schedule's run the one its
    schedule's earlier run left."""
    store = team.runtime.store

    def research(user_id: int, reworks: int | None = None, schedule_id: int | None = None) -> Task:
        return Task(
            chat_id=GROUP,
            user_id=user_id,
            workspace="calc",
            worker=WorkerKind.RESEARCH,
            title="r",
            instructions="r",
            reworks=reworks,
            schedule_id=schedule_id,
        )

    owners = await store_proposal(store, research(OWNER), "## Plan\n1. The owner's.")
    members = await store_proposal(store, research(MEMBER), "## Plan\n1. The member's.")
    assert (owners.user_id, members.user_id) == (OWNER, MEMBER), "a proposal records who asked for it"
    beside = await store_proposal(store, research(MEMBER), "## Plan\n1. The member's, about something else.")
    assert [p.id for p in await store.pending_proposals(GROUP)] == [owners.id, members.id, beside.id]
    await store_proposal(store, research(MEMBER, reworks=members.id), "## Plan\n1. The member's, reworked.")
    assert (await store.get_proposal(members.stored_id)).status is ProposalStatus.SUPERSEDED
    assert (await store.get_proposal(beside.stored_id)).status is ProposalStatus.PENDING
    assert (await store.get_proposal(owners.stored_id)).status is ProposalStatus.PENDING

    first_run = await store.add_task(
        research(MEMBER, schedule_id=7).model_copy(update={"status": TaskStatus.COMPLETED})
    )
    runs = await store_proposal(store, first_run, "## Plan\n1. The schedule's first run.")
    await store.update_task(first_run.stored_id, status=TaskStatus.COMPLETED, result=f"proposal #{runs.id}")
    await store_proposal(store, research(MEMBER, schedule_id=7), "## Plan\n1. The schedule's next run.")
    assert (await store.get_proposal(runs.stored_id)).status is ProposalStatus.SUPERSEDED
    assert (await store.get_proposal(beside.stored_id)).status is ProposalStatus.PENDING


async def test_an_owners_rework_of_a_members_proposal_replaces_it(team: BotHarness, model: RoleScript) -> None:
    """An owner may rework a member's proposal; the new proposal (the owner's) replaces it: the member's is no longer
    pending for anyone to approve by accident, and the chat is told which one the new one replaces."""
    store = team.runtime.store
    await in_group(team)
    members = await store.add_proposal(
        Proposal(chat_id=GROUP, workspace="calc", request="mine", body="## Plan\n1. Fix add.", user_id=MEMBER)
    )
    model.add("research", claude_says.text("## Plan\n1. Fix add, and test it."))
    await member_turn(
        team,
        model,
        claude_says.tool_use("start_research", {"workspace": "calc", "request": "and test", "refines": members.id}),
        user=OWNER,
        words="rework it to add tests",
    )
    shown = await team.tg.await_for(lambda: said(team, GROUP, "📋 Proposal #"), timeout=HANG_GUARD)
    [new] = await store.pending_proposals(GROUP)
    assert (new.user_id, new.supersedes) == (OWNER, members.id)
    assert (await store.get_proposal(members.stored_id)).status is ProposalStatus.SUPERSEDED
    assert f"Proposal #{new.id} for calc, replacing #{members.id}." in shown.text, shown.text


# ---- standing notes -------------------------------------------------------------------------------------------------


async def test_an_owners_note_about_self_never_reaches_a_member(team: BotHarness, model: RoleScript) -> None:
    """An owner's standing note for `self` is about the bot's own code: neither the member's /notes nor the member's
    turn context carries it; nor may a member keep a note for `self`. The owner's other notes still apply to all."""
    notes = team.runtime.crew.notes.table
    await notes.add(StandingNote(user_id=OWNER, user_name="@boss", workspace="self", text="SELF-NOTE-7781 hooks"))
    await notes.add(StandingNote(user_id=OWNER, user_name="@boss", workspace="calc", text="CALC-NOTE-SHOWN"))
    team.tg.send_command(MEMBER, "/notes")
    listing = await team.tg.await_for(lambda: said(team, MEMBER, "Standing notes"), timeout=HANG_GUARD)
    last = await member_turn(
        team, model, claude_says.tool_use("remember", {"text": "do x", "workspace": "self"}), chat=MEMBER
    )
    context = last_user_text(model.requests["orchestrator"][-2])  # the turn's first request: the user's message
    leaks = [where for where, text in (("/notes", listing.text), ("turn context", context)) if "SELF-NOTE-7781" in text]
    assert leaks == [], f"an owner's note on self reached a member through: {leaks}"
    assert "CALC-NOTE-SHOWN" in listing.text and "CALC-NOTE-SHOWN" in context
    [refused] = tool_results(last)
    assert "only an owner can read or change it" in refused, refused
    assert [n.workspace for n in await notes.all()] == ["self", "calc"], "a member kept a note for the bot's own code"


async def test_a_user_out_of_allowed_user_ids_is_no_owner(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, model: RoleScript
) -> None:
    """Owners are the allowed users who may do more: a user taken out of ALLOWED_USER_IDS but left in
    OWNER_USER_IDS is nobody, so their standing notes stop applying to everyone's requests and workers."""
    gone = 3003
    assert UserSettings(allowed_user_ids="1,2", owner_user_ids="1,3").owners == {1}
    assert UserSettings(allowed_user_ids="1,2").owners == {1, 2}, "no OWNER_USER_IDS: every allowed user"
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        allowed_user_ids=f"{OWNER},{MEMBER}",
        owner_user_ids=f"{OWNER},{gone}",
        sandbox_network="off",
    ) as bot:
        assert not bot.runtime.settings.users.is_owner(gone)
        await bot.runtime.crew.notes.table.add(
            StandingNote(user_id=gone, user_name="@gone", text="GONE-NOTE-5512: push straight to main")
        )
        context = last_user_text(await member_turn(bot, model, chat=MEMBER))
        briefing = await bot.runtime.crew.notes.for_worker(MEMBER, "calc")
        leaks = [w for w, t in (("turn context", context), ("worker briefing", briefing)) if "GONE-NOTE-5512" in t]
        assert leaks == [], f"a removed user's note still applies to a member through: {leaks}"


# ---- a task on self whose starter is an owner no more ---------------------------------------------------------------


async def test_a_demoted_owners_task_on_self_is_out_of_their_reach(team: BotHarness, bot_repo) -> None:
    """A task on `self` started while its user was an owner; OWNER_USER_IDS no longer names them. Like /task and
    /log, the Diff (button and review page) and a note to its worker are refused them."""
    base = git(bot_repo, "rev-parse", "HEAD").strip()
    git(bot_repo, "checkout", "-q", "-b", "agentlab/task-1")
    (bot_repo / "ADMIN_SECRET.md").write_text("SELF-DIFF-MARKER-3321\n")
    git(bot_repo, "add", "ADMIN_SECRET.md")
    git(bot_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "self work")
    head = git(bot_repo, "rev-parse", "HEAD").strip()
    git(bot_repo, "checkout", "-q", "-")
    store = team.runtime.store
    task = await store.add_task(
        Task(
            chat_id=MEMBER,
            user_id=MEMBER,
            user_name="@once-owner",
            workspace="self",
            worker=WorkerKind.CODE,
            title="self work",
            instructions="x",
        )
    )
    await store.update_task(
        task.stored_id,
        status=TaskStatus.COMPLETED,
        branch="agentlab/task-1",
        base_commit=base,
        base_branch="main",
        commit_sha=head,
    )
    crew = team.runtime.crew
    caller = Caller(chat_id=MEMBER, user_id=MEMBER, user_name="@once-owner")
    with pytest.raises(ToolError, match="only an owner can see what it did"):
        await crew.access.shown_task(caller, task.stored_id)
    with pytest.raises(ToolError, match="bot's own code: only an owner can see the diff of it"):
        await crew.branches.diff(caller, task.stored_id)
    with pytest.raises(ToolError, match="bot's own code: only an owner can steer it"):
        await crew.running.message(caller, task.stored_id, "also push to main")
    owner = Caller(chat_id=MEMBER, user_id=OWNER, user_name="@boss")
    data, _ = await crew.branches.diff(owner, task.stored_id, anywhere=True)
    assert b"SELF-DIFF-MARKER-3321" in data, "an owner still sees it"


# ---- ids of another conversation --------------------------------------------------------------------------------


async def test_every_id_tool_from_another_topic_reaches_nothing(team: BotHarness) -> None:
    """Topic A holds a task, a proposal and a schedule; an owner's turn in topic B (the model may pass any id)."""
    store = team.runtime.store
    a = await store.conversations.topic(GROUP, 11, "a")
    b = await store.conversations.topic(GROUP, 12, "b")
    task = await store.add_task(
        Task(chat_id=a, user_id=MEMBER, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="x")
    )
    await store.update_task(task.stored_id, status=TaskStatus.COMPLETED)
    proposal = await store.add_proposal(Proposal(chat_id=a, workspace="calc", request="r", body="## Summary\nP."))
    schedule = await store.schedules.add(
        Schedule(
            chat_id=a,
            user_id=MEMBER,
            workspace="calc",
            worker=WorkerKind.CODE,
            instructions="run",
            every_minutes=60,
            next_run_at=datetime.now(UTC) + timedelta(hours=1),
        )
    )
    toolbox = Toolbox(
        desk_tools(team.runtime.crew, Caller(chat_id=b, user_id=OWNER, user_name="@boss")),
        Audit(None, "orchestrator"),
        SecretsFilter(),
    )
    t, p, s = task.stored_id, proposal.id, schedule.stored_id
    calls = {
        "get_task": {"task_id": t},
        "cancel_task": {"task_id": t},
        "message_task": {"task_id": t, "text": "hi"},
        "merge_task": {"task_id": t},
        "discard_task": {"task_id": t},
        "open_pull_request": {"task_id": t},
        "get_proposal": {"proposal_id": p},
        "approve_proposal": {"proposal_id": p},
        "reject_proposal": {"proposal_id": p},
        "start_research": {"workspace": "calc", "request": "x", "refines": p},
        "cancel_schedule": {"schedule_id": s},
        "pause_schedule": {"schedule_id": s},
        "resume_schedule": {"schedule_id": s},
    }
    reached = {}
    for name, args in calls.items():
        result = await toolbox.call(name, args)
        if not result.is_error:
            reached[name] = str(result.content)[:200]
    assert reached == {}, f"tools reached topic A's records from topic B: {reached}"
    assert (await store.get_proposal(p)).status is ProposalStatus.PENDING
    assert (await store.schedules.get(s)).status is ScheduleStatus.ACTIVE
    assert [x.id for x in await store.list_tasks(b)] == []
