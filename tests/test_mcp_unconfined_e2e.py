"""With SANDBOX=off an owner's stdio MCP server still never runs a module a worker planted, through the real bot.

The server of tests/mcp_servers/demo_server.py is configured as reference servers are (`python -m demo_server`,
found on the PYTHONPATH its `env` names). The worker (the scripted model, its commands unconfined) writes a
`demo_server.py` of its own into the worktree and into the bot's working directory, crashes the server and calls it
again: the restart must run the owner's module, from a working directory of its own.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.support.questions import (
    PLANTED,
    mcp_call,
    mcp_task,
    module_server_config,
    results_of,
)
from tests.support.tasks import ended


@pytest.fixture
async def unconfined_bot(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, monkeypatch
) -> AsyncIterator[BotHarness]:
    bot_cwd = tmp_path / "bot-cwd"
    bot_cwd.mkdir()
    monkeypatch.chdir(bot_cwd)  # the bot's working directory, where an unconfined server used to start
    config = module_server_config(tmp_path)
    async with running_bot(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, mcp_config=config, sandbox="off"
    ) as harness:
        yield harness


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_an_unconfined_server_never_imports_a_module_the_worker_planted(
    unconfined_bot: BotHarness, tmp_path: Path
) -> None:
    bot = unconfined_bot
    bot_cwd = tmp_path / "bot-cwd"
    model = mcp_task(
        bot,
        claude_says.tool_use("write_file", {"path": "demo_server.py", "content": PLANTED}),
        claude_says.tool_use("run_command", {"command": f"cp demo_server.py {shlex.quote(str(bot_cwd))}/ && pwd"}),
        mcp_call("crash"),
        mcp_call("add", a=3, b=4),
        mcp_call("note"),
        claude_says.text("Done."),
    )
    task = await ended(bot, 1, timeout=90)
    assert task.status is not TaskStatus.FAILED, task.error
    _written, copied, crashed, added, noted = results_of(model)
    assert (bot_cwd / "demo_server.py").is_file(), copied
    worktree = task.worktree
    assert "stopped during crash" in crashed, crashed
    assert "PLANTED MODULE RAN" not in added, f"the restart ran the worker's module: {added}"
    assert "the sum is 7" in added, added
    cwd = noted.split("cwd: ", 1)[1].split('"', 1)[0].split("\\", 1)[0]
    assert cwd != str(bot_cwd) and not cwd.startswith(str(worktree)), f"the server runs in {cwd}: {noted}"
    assert "agentlab-mcp-" in cwd, noted
    await bot.tg.await_for(lambda: not Path(cwd).exists(), timeout=30)  # removed with the task
