"""What the orchestrator remembers, end to end through the real bot and the scripted model: the orchestrator sees what the crew showed
(proposals and task summaries, whole, and which one a reply points at), never guesses on approval, refines with the
old proposal in hand, carries approval notes, manages branches and new workspaces in words, and a foreground task
never holds the chat."""

from __future__ import annotations

import asyncio
import json

import pytest

from agents.core.models import Proposal, ProposalStatus, TaskStatus
from tests.conftest import USER_ID, BotHarness, git, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text, spare
from tests.support.tasks import branches, ended, final_summary, start_task


def request_text(body: dict) -> str:
    """Every text the model was sent in one request (messages, tool results, context)."""
    return json.dumps(body["messages"], ensure_ascii=False)


def tool_results(body: dict) -> list[str]:
    return [
        b["content"] if isinstance(b["content"], str) else json.dumps(b["content"])
        for b in body["messages"][-1]["content"]
        if b.get("type") == "tool_result"
    ]


async def shown(bot: BotHarness, needle: str):
    return await bot.tg.await_for(lambda: next((m for m in bot.tg.messages(USER_ID) if needle in (m.text or "")), None))


async def recorded(bot: BotHarness, kind: str, ref_id: int) -> None:
    """Wait until the bot has noted which chat message showed this proposal or task (a reply can point at it)."""
    for _ in range(200):
        record = await bot.runtime.store.bot_message_about(USER_ID, kind, ref_id)
        if record is not None and record.platform_message_id is not None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{kind} #{ref_id} was never recorded as shown")


LONG_PROPOSAL = (
    "## Summary\nMake the API client robust.\n## Current state\n"
    + "".join(f"- `client.py` line {i}: a call without a timeout.\n" for i in range(1, 160))
    + "## Plan\n1. add timeouts\n2. add retries\n## Risks\n"
    "Retries: at most three, with exponential backoff and jitter, only on idempotent GET requests.\n"
    "## Effort\nsmall"
)


async def test_a_reply_to_a_long_proposal_is_answered_from_the_proposal_whole(
    bot: BotHarness, model: RoleScript
) -> None:
    model.add(
        "orchestrator",
        claude_says.tool_use("start_research", {"workspace": "calc", "request": "robust client"}),
        claude_says.text("Researching."),
    )
    model.add("research", claude_says.text(LONG_PROPOSAL))
    bot.say("make the calc client robust")
    proposal_message = await shown(bot, "Proposal #1")
    assert len(LONG_PROPOSAL) > 4096, "sent in several messages; the user replies to the first"
    await recorded(bot, "proposal", 1)

    model.add("orchestrator", claude_says.text("At most three retries, only on GETs."))
    bot.tg.send_text(USER_ID, "what does it say about retries?", reply_to_message_id=proposal_message.message_id)
    await shown(bot, "At most three retries")
    body = model.requests["orchestrator"][-1]
    sent = request_text(body)
    assert "only on idempotent GET requests" in sent, "the sentence near the end of the proposal is in the request"
    assert sent.count("only on idempotent GET requests") == 1
    context = body["messages"][-1]["content"][-1]["text"]
    assert "replying to: proposal #1 [pending]" in context
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_a_task_summary_is_remembered_and_get_task_tells_it_whole(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("Started task #1."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add(): the operator was a minus sign (found in calc.py line 2)."),
    )
    bot.say("fix add in calc")
    task, summary = await final_summary(bot, 1)
    assert task.status is TaskStatus.COMPLETED
    await recorded(bot, "task", 1)

    model.add(
        "orchestrator", claude_says.tool_use("get_task", {"task_id": 1}), claude_says.text("It was a minus sign.")
    )
    bot.tg.send_text(USER_ID, "why did it break?", reply_to_message_id=summary.message_id)
    await shown(bot, "It was a minus sign.")
    first, second = model.requests["orchestrator"][-2:]
    assert "the operator was a minus sign" in request_text(first), "the summary the user saw is a turn of the chat"
    assert "replying to: the summary of task #1 [completed]" in first["messages"][-1]["content"][-1]["text"]
    [result] = tool_results(second)
    assert "Task #1 [completed] code worker in calc" in result
    assert "Worker's report: Fixed add(): the operator was a minus sign" in result
    assert f"Branch: {task.branch}" in result and "Tests (bot's own run" in result and "passed" in result
    assert "The summary the user was shown:" in result and "calc.py" in result


async def add_pending(bot: BotHarness, workspace: str, body: str) -> Proposal:
    return await bot.runtime.store.add_proposal(
        Proposal(chat_id=USER_ID, workspace=workspace, request=f"improve {workspace}", body=body)
    )


async def test_approve_without_id_with_several_pending_lists_them_and_starts_nothing(
    bot: BotHarness, model: RoleScript
) -> None:
    await add_pending(bot, "calc", "## Summary\nA.")
    await add_pending(bot, "group-therapy", "## Summary\nB.")
    model.add(
        "orchestrator",
        claude_says.tool_use("approve_proposal", {}),
        claude_says.text("Which one: #1 (calc) or #2 (group-therapy)?"),
    )
    bot.say("go ahead")
    await shown(bot, "Which one")
    [result] = tool_results(model.requests["orchestrator"][-1])
    assert "several proposals are pending" in result
    assert "proposal #1 for calc" in result and "proposal #2 for group-therapy" in result
    store = bot.runtime.store
    assert await store.list_tasks(USER_ID) == []
    assert [p.status for p in await store.pending_proposals(USER_ID)] == [ProposalStatus.PENDING] * 2

    model.add(
        "orchestrator",
        claude_says.tool_use("get_proposal", {}),
        claude_says.tool_use("get_proposal", {"proposal_id": 2}),
        claude_says.text("#2 says B."),
    )
    bot.say("what do they say?")
    await shown(bot, "#2 says B.")
    listing, whole = [tool_results(r)[0] for r in model.requests["orchestrator"][-2:]]
    assert "several proposals are pending" in listing and "proposal #2 for group-therapy" in listing
    assert whole.startswith("Proposal #2 for workspace group-therapy [pending]") and whole.endswith("## Summary\nB.")

    model.add(
        "orchestrator", claude_says.tool_use("approve_proposal", {"proposal_id": 2}), claude_says.text("Approved #2.")
    )
    bot.say("approve the group therapy one")  # the user's words decide (own_words.py)
    await shown(bot, "Approved #2.")
    assert (await store.get_proposal(2)).status is ProposalStatus.APPROVED
    assert (await store.get_proposal(1)).status is ProposalStatus.PENDING


async def test_go_ahead_while_research_runs_says_the_proposal_is_still_being_written(
    bot: BotHarness, model: RoleScript
) -> None:
    await add_pending(bot, "group-therapy", "## Summary\nAn older, unrelated proposal.")
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_research(body: dict) -> dict:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=20)
        return claude_says.text("## Summary\nThe new proposal.")

    model.add(
        "orchestrator",
        claude_says.tool_use("start_research", {"workspace": "calc", "request": "review calc"}),
        claude_says.text("Researching."),
    )
    model.add("research", slow_research)
    bot.say("review calc")
    await shown(bot, "Researching.")
    model.add(
        "orchestrator",
        claude_says.tool_use("approve_proposal", {}),
        claude_says.text("The proposal is still being written; I'll show it when it's ready."),
    )
    bot.say("go ahead")
    await shown(bot, "still being written;")
    [result] = tool_results(model.requests["orchestrator"][-1])
    assert "the proposal is still being written: research task #1 (calc)" in result
    assert "proposal #1 for group-therapy" in result, "the older pending one is named, not approved"
    assert (await bot.runtime.store.get_proposal(1)).status is ProposalStatus.PENDING
    assert "proposals still being written: research #1 in calc" in request_text(model.requests["orchestrator"][-1])
    release.set()
    await shown(bot, "Proposal #2")


@pytest.mark.untested_calc  # neither the verdict nor how the task ends is what this test is about
async def test_refines_hands_the_old_proposal_whole_and_notes_reach_the_code_worker(
    bot: BotHarness, model: RoleScript
) -> None:
    old = await add_pending(bot, "calc", LONG_PROPOSAL)
    model.add(
        "orchestrator",
        claude_says.tool_use(
            "start_research",
            {
                "workspace": "calc",
                "request": "Use a different retry library instead of hand-written retries.",
                "refines": old.id,
            },
        ),
        claude_says.text("Reworking it."),
    )
    model.add("research", claude_says.text("## Summary\nUse tenacity.\n## Plan\n1. add tenacity"))
    bot.say("instead of writing retries by hand, use a library")
    await shown(bot, "Proposal #2")
    research_first = last_user_text(model.requests["research"][0])
    assert "only on idempotent GET requests" in research_first, "the research worker sees the old proposal whole"
    assert "This reworks proposal #1" in research_first
    store = bot.runtime.store
    assert (await store.get_proposal(1)).status is ProposalStatus.SUPERSEDED

    model.add(
        "orchestrator",
        claude_says.tool_use("approve_proposal", {"proposal_id": 2, "notes": "call it parse_all"}),
        claude_says.text("Approved with your note."),
    )
    # the second reply answers the nudge for the plan's criteria: the task is let end before the bot stops
    model.add("code", claude_says.text("Done."), claude_says.text("Not verified: nothing was changed."))
    bot.say("looks good, but call it parse_all")
    await shown(bot, "Approved with your note.")
    await bot.tg.await_for(lambda: model.requests["code"] or None)
    first = last_user_text(model.requests["code"][0])
    assert "Use tenacity." in first and "Changes the user asked for when approving" in first
    assert first.rstrip().endswith("call it parse_all") or "call it parse_all" in first
    await ended(bot, 2)


@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_merge_and_discard_in_words(bot: BotHarness, model: RoleScript, workspace_root) -> None:
    repo = workspace_root / "calc"
    model.add(
        "orchestrator",
        start_task("calc", "Fix add()."),
        claude_says.text("started"),
        start_task("calc", "Add a docstring."),
        claude_says.text("started 2"),
    )
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed."),
    )
    bot.say("fix calc")
    await final_summary(bot, 1)
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "NOTES.md", "content": "notes\n"}),
        claude_says.text("Wrote notes."),
    )
    bot.say("and add notes")
    task2, _ = await final_summary(bot, 2)

    model.add(
        "orchestrator",
        claude_says.tool_use("merge_task", {"task_id": 1}),
        claude_says.text("Merged #1."),
        claude_says.tool_use("discard_task", {"task_id": 2}),
        claude_says.text("Discarded #2."),
    )
    bot.say("merge the fix")
    await shown(bot, "Merged #1.")
    assert "a + b" in (repo / "calc.py").read_text()
    bot.say("throw the notes away")
    await shown(bot, "Discarded #2.")
    assert task2.branch not in branches(repo)
    [result] = tool_results(model.requests["orchestrator"][-1])
    assert "was discarded" in result


async def test_create_workspace_makes_a_git_repository_and_refuses_bad_names(
    bot: BotHarness, model: RoleScript, workspace_root
) -> None:
    model.add(
        "orchestrator",
        claude_says.tool_use("create_workspace", {"name": "../escape"}),
        claude_says.tool_use("create_workspace", {"name": "Portfolio Site"}),
        start_task("portfolio-site", "Build index.html", worker="frontend"),
        claude_says.text("Made portfolio-site and started building."),
    )
    model.add(
        "frontend",
        claude_says.tool_use("write_file", {"path": "index.html", "content": "<h1>Me</h1>\n"}),
        claude_says.text("Built the page."),
    )
    bot.say("build me a portfolio website")
    await shown(bot, "Made portfolio-site")
    bad, good = [tool_results(r)[0] for r in model.requests["orchestrator"][1:3]]
    assert "cannot be a workspace name" in bad and not (workspace_root.parent / "escape").exists()
    assert "Created workspace portfolio-site" in good
    new = workspace_root / "portfolio-site"
    assert (new / ".git").is_dir() and git(new, "log", "--format=%s").strip() == "Initial commit (agentlab)"
    task, _ = await final_summary(bot, 1)
    assert "<h1>Me</h1>" in git(new, "show", f"{task.branch}:index.html")


@pytest.fixture
async def quick_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo):
    """The bot with a 1-second foreground wait."""
    from telegram_bot.app import stop_application

    settings = make_settings(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repository=bot_repo, foreground_wait_seconds=1
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic)
    yield harness
    await stop_application(harness.app)


def gated_worker(loop: asyncio.AbstractEventLoop, release: asyncio.Event) -> list:
    """A code worker that waits for `release`, then fixes calc.py and reports."""

    def reply(body: dict) -> dict:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=30)
        return claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"})

    return [reply, claude_says.text("Finished the slow job.")]


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_a_foreground_task_past_the_cap_goes_on_in_the_background(quick_bot: BotHarness) -> None:
    bot = quick_bot
    model = RoleScript()
    bot.claude.handler = model
    release = asyncio.Event()
    model.add(
        "orchestrator",
        start_task("calc", "Quick fix.", background=False),
        claude_says.text("Still running as task #1; I'll report when it ends."),
    )
    model.add("code", *gated_worker(asyncio.get_running_loop(), release))
    bot.say("quick fix in calc")
    await shown(bot, "Still running as task #1")
    [result] = tool_results(model.requests["orchestrator"][-1])
    assert "Task #1 is still running" in result and "background" in result
    store = bot.runtime.store
    task = await store.get_task(1)
    assert task.status is TaskStatus.IN_PROGRESS and task.background

    model.add("orchestrator", claude_says.text("Answered while #1 runs."))
    bot.say("what's 2+2?")
    await shown(bot, "Answered while #1 runs.")
    assert (await store.get_task(1)).status is TaskStatus.IN_PROGRESS
    release.set()
    task, summary = await final_summary(bot, 1)
    assert "Finished the slow job." in summary.text


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_a_typed_message_stops_the_foreground_wait_at_once(bot: BotHarness, model: RoleScript) -> None:
    assert bot.settings.orchestrator.foreground_wait_seconds == 90
    release = asyncio.Event()
    model.add(
        "orchestrator",
        start_task("calc", "Quick fix.", background=False),
        claude_says.text("Still running as task #1."),
        claude_says.text("Stopping nothing; it runs."),
    )
    model.add("code", *gated_worker(asyncio.get_running_loop(), release))
    bot.say("quick fix in calc")
    await bot.tg.await_for(lambda: model.requests["code"] or None)
    bot.say("actually, what's it doing?")
    second = await asyncio.wait_for(shown(bot, "Stopping nothing"), timeout=20)
    first = await shown(bot, "Still running as task #1.")
    assert first.message_id < second.message_id
    assert (await bot.runtime.store.get_task(1)).status is TaskStatus.IN_PROGRESS
    release.set()
    await final_summary(bot, 1)


@pytest.fixture
async def short_memory_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo):
    """The bot with the smallest history budget: compaction comes after a few turns."""
    from telegram_bot.app import stop_application

    settings = make_settings(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repository=bot_repo, history_token_budget=1_000
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic)
    yield harness
    await stop_application(harness.app)


async def test_a_pending_proposal_outlives_compaction_and_a_decided_one_does_not(short_memory_bot: BotHarness) -> None:
    bot = short_memory_bot
    model = RoleScript()
    bot.claude.handler = model
    for workspace, marker in (("calc", "KEEP-ME-PENDING"), ("group-therapy", "DROP-ME-REJECTED")):
        model.add(
            "orchestrator",
            claude_says.tool_use("start_research", {"workspace": workspace, "request": "look"}),
            claude_says.text(f"Researching {workspace}."),
        )
        model.add("research", claude_says.text(f"## Summary\n{marker}: a plan for {workspace}."))
        bot.say(f"look at {workspace}")
        await shown(bot, marker)
    await bot.runtime.store.decide_proposal(2, ProposalStatus.REJECTED)
    compacted = claude_says.text("SUMMARY-NOTE: we talked about calc.")
    model.add("compactor", *[spare(compacted, why="compaction runs as often as the history outgrows its budget")] * 6)
    for i in range(5):
        model.add("orchestrator", claude_says.text(f"answer {i}"))
        bot.say(f"question {i} " + "padding " * 300)
        await shown(bot, f"answer {i}")
    assert model.requests["compactor"], "the history was compacted"
    last = request_text(model.requests["orchestrator"][-1])
    assert "SUMMARY-NOTE" in last
    assert "KEEP-ME-PENDING" in last, "the pending proposal is kept whole past compaction"
    assert "DROP-ME-REJECTED" not in last
    assert "question 0" not in last
