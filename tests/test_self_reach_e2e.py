"""Members never reach the bot's own checkout, by whatever name or path: attacks through the real bot.

The bot's checkout holds an untracked `mcp.json` with a token in it (as an owner's real one would). A member's
orchestrator (the scripted model, as a hostile one would) reads, lists and searches it as `self`; with
BOT_REPOSITORY being the folder `agentlab` under WORKSPACE_PATH (and reached through a link of another name), it
starts a task there and looks there under those names; a member's task stored on it by another path than a tool
(a schedule, a resume) is refused when it would start. A folder with no repository of its own inside the bot's
checkout (WORKSPACE_PATH may live there), or a linked worktree of the bot's repository, is the bot's repository to
git, so it is `self` too.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.core.models import Task, TaskStatus, WorkerKind
from tests.conftest import USER_ID, BotHarness, copy_repo, git, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, spare
from tests.support.tasks import start_task


def tool_results(model: RoleScript, role: str) -> list[str]:
    """Every tool result the bot sent back to the model of `role`, in order (the last request holds them all)."""
    last = model.requests[role][-1]
    return [
        json.dumps(block.get("content"))
        for message in last["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


OWNER, MEMBER = USER_ID, 2002
SECRET = "mcp-token-Zx81-NOT-A-SHAPE-4417"


async def member_bot(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repository: Path
) -> AsyncIterator[BotHarness]:
    from telegram_bot.app import stop_application

    (bot_repository / "mcp.json").write_text(f'{{"mcpServers": {{"notes": {{"env": {{"TOKEN": "{SECRET}"}}}}}}}}\n')
    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repository=bot_repository,
        allowed_user_ids=f"{OWNER},{MEMBER}",
        owner_user_ids=str(OWNER),
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        yield harness
    finally:
        await stop_application(harness.app)


@pytest.fixture
async def team(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    """BOT_REPOSITORY outside WORKSPACE_PATH: reached as `self`."""
    async for harness in member_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo):
        yield harness


@pytest.fixture
async def team_inside(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, repo_templates
) -> AsyncIterator[BotHarness]:
    """BOT_REPOSITORY is the folder `agentlab` under WORKSPACE_PATH, and a link `tools` points at it too."""
    inside = copy_repo(repo_templates, "agentlab-self", workspace_root / "agentlab")
    os.symlink(inside, workspace_root / "tools")
    async for harness in member_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, inside):
        yield harness


@pytest.fixture(params=["inside", "worktree"])
async def team_sharing(
    request: pytest.FixtureRequest, fake_telegram, fake_anthropic, tmp_path, workspace_root, repo_templates
) -> AsyncIterator[tuple[BotHarness, str]]:
    """A workspace whose git repository is the bot's: `inside`, WORKSPACE_PATH inside the bot's checkout (git-ignored
    there) with a plain folder `notes` that has no repository of its own; `worktree`, a workspace `tools` that is a
    linked worktree of the bot's repository (`git worktree add`: its `.git` is a file pointing into the bot's)."""
    bot = copy_repo(repo_templates, "agentlab-self", tmp_path / "agentlab")
    if request.param == "inside":
        (bot / ".gitignore").write_text("/workspaces/\n")
        root, name = bot / "workspaces", "notes"
        (root / name).mkdir(parents=True)
        (root / name / "todo.md").write_text("# todo\n")
    else:
        root, name = workspace_root, "tools"
        git(bot, "worktree", "add", "-q", "-b", "tools", str(root / name))
    async for harness in member_bot(fake_telegram, fake_anthropic, tmp_path, root, bot):
        yield harness, name


def look_ups(workspace: str) -> list[dict]:
    return [
        claude_says.tool_use("read_file", {"workspace": workspace, "path": "mcp.json"}),
        claude_says.tool_use("glob", {"workspace": workspace, "pattern": "*.json"}),
        claude_says.tool_use("grep", {"workspace": workspace, "pattern": "mcp-token"}),
    ]


async def member_turn(bot: BotHarness, *replies: dict) -> RoleScript:
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", *replies, claude_says.text("Done looking."))
    bot.tg.send_text(MEMBER, "look at your own config")
    await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(MEMBER) if "Done looking" in (m.text or "")), None), timeout=30
    )
    return model


async def test_a_members_look_ups_in_self_are_refused(team: BotHarness) -> None:
    model = await member_turn(team, *look_ups("self"))
    results = tool_results(model, "orchestrator")
    assert len(results) == 3, results
    for result in results:
        assert "only an owner can read or change it" in result, result
        assert "mcp-token" not in result and "mcp.json" not in result, f"a member saw the bot's checkout: {result}"


async def test_an_owners_look_ups_in_self_still_work(team: BotHarness) -> None:
    model = RoleScript()
    team.claude.handler = model
    model.add("orchestrator", look_ups("self")[0], claude_says.text("Done looking."))
    team.say("look at your own config")
    await team.tg.await_for(
        lambda: next((m for m in team.tg.messages(OWNER) if "Done looking" in (m.text or "")), None), timeout=30
    )
    assert SECRET in tool_results(model, "orchestrator")[0], "an owner reads the bot's own code"


@pytest.mark.parametrize("name", ["agentlab", "tools"])
async def test_the_bots_folder_under_the_workspaces_is_self_by_any_name(team_inside: BotHarness, name: str) -> None:
    bot = team_inside
    model = await member_turn(
        bot,
        *look_ups(name),
        start_task(name, "Add a /pwn."),
    )
    results = tool_results(model, "orchestrator")
    assert len(results) == 4, results
    for result in results[:3]:
        assert "only an owner" in result and "mcp-token" not in result, result
    assert "only an owner can work on the bot's own code" in results[3], results[3]
    assert await bot.runtime.store.get_task(1) is None, "a task started on the bot's own code for a member"


async def test_a_members_task_stored_on_the_bots_folder_never_runs(team_inside: BotHarness) -> None:
    bot = team_inside
    model = RoleScript()
    bot.claude.handler = model
    refused = "what the worker would do: it must never run"
    model.add(
        "code",
        spare(claude_says.tool_use("write_file", {"path": "pwned.py", "content": "x"}), why=refused),
        spare(claude_says.text("ok"), why=refused),
    )
    task = await bot.runtime.store.add_task(
        Task(
            chat_id=MEMBER,
            user_id=MEMBER,
            workspace="agentlab",
            worker=WorkerKind.CODE,
            title="pwn",
            instructions="Add a /pwn.",
        )
    )
    bot.runtime.crew.engine.wake()
    deadline = asyncio.get_running_loop().time() + 30
    while not (now := await bot.runtime.store.get_task(task.id)).status.is_final:
        assert asyncio.get_running_loop().time() < deadline, "the task did not end"
        await asyncio.sleep(0.05)
    assert now.status is TaskStatus.FAILED and "only an owner" in (now.error or ""), now
    assert not model.requests["code"], "a worker ran on the bot's own checkout for a member"


async def test_a_folder_whose_repository_is_the_bots_is_self(team_sharing: tuple[BotHarness, str]) -> None:
    """Git run in a folder with no repository of its own inside the bot's checkout, or in a linked worktree of the
    bot's repository, works on the bot's own repository (a task's branch and worktree would be the bot's code), so
    the folder is `self` to the roles, whatever its name."""
    bot, workspace = team_sharing
    model = RoleScript()
    bot.claude.handler = model
    never = "the worker of a member's task on the bot's repository: it must never run"
    model.add(
        "code",
        spare(claude_says.tool_use("read_file", {"path": "telegram_bot/handlers.py"}), why=never),
        spare(claude_says.text("Read it."), why=never),
    )
    model.add("orchestrator", start_task(workspace, "Tidy the todo list."), claude_says.text("Done looking."))
    bot.tg.send_text(MEMBER, "tidy my notes")
    await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(MEMBER) if "Done looking" in (m.text or "")), None), timeout=30
    )
    started = await bot.runtime.store.get_task(1)
    if started is not None:  # what the member's task reached, for the failure's message
        deadline = asyncio.get_running_loop().time() + 30
        while not (started := await bot.runtime.store.get_task(1)).status.is_final:
            assert asyncio.get_running_loop().time() < deadline, "the task did not end"
            await asyncio.sleep(0.05)
    seen = tool_results(model, "code") if model.requests["code"] else []
    assert started is None, f"a member's task ran on the bot's repository as {workspace}: {started}; worker saw {seen}"
    assert "only an owner can work on the bot's own code" in tool_results(model, "orchestrator")[0]
