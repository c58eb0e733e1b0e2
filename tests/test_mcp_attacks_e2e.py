"""An owner's MCP server against a hostile worker, through the real bot and real bwrap.

The server of tests/mcp_servers/demo_server.py is configured the way reference servers are (`python -m
demo_server`, found on the PYTHONPATH its `env` names) with a token of its own in `env`. The worker (the scripted
model) writes a `demo_server.py` of its own into the worktree, crashes the server and calls it again, so that the
restart would run the worker's module with the server's token; asks the server for its own token; and asks for a
result of 2 MB of text beside a picture.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import AsyncIterator

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.support.questions import (
    PLANTED,
    SERVERS,
    TOKEN,
    mcp_call,
    mcp_config,
    mcp_task,
    module_server_config,
    results_of,
)
from tests.support.tasks import ended

# untested_calc: these tests look at neither the verdict nor the task's end, so calc has no tests (tests/conftest.py)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or shutil.which("nsenter") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) or nsenter is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.untested_calc,
]


@pytest.fixture
async def module_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    config = module_server_config(tmp_path)
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        mcp_config=config,
        sandbox_read_paths=(SERVERS, tmp_path / "owner-notes"),
    ) as harness:
        yield harness


async def test_a_restarted_server_never_imports_the_workers_module(module_bot: BotHarness) -> None:
    bot = module_bot
    assert "PLANTED MODULE RAN" in PLANTED, "the worker's module differs from the owner's in `add`"
    model = mcp_task(
        bot,
        claude_says.tool_use("write_file", {"path": "demo_server.py", "content": PLANTED}),
        mcp_call("crash"),
        mcp_call("add", a=3, b=4),
        mcp_call("note"),
        claude_says.text("Done."),
    )
    task = await ended(bot, 1, timeout=90)
    assert task.status is not TaskStatus.FAILED, task.error
    written, crashed, added, noted = results_of(model)
    assert "stopped during crash" in crashed, crashed
    assert "PLANTED MODULE RAN" not in added, f"the restart ran the worker's module: {added}"
    assert "the sum is 7" in added, added
    assert "cwd: /home/agent" in noted, f"the server's working directory is the worktree: {noted}"


async def test_a_servers_own_token_is_masked(module_bot: BotHarness) -> None:
    bot = module_bot
    model = mcp_task(bot, mcp_call("env_value", name="DEMO_TOKEN"), claude_says.text("Done."))
    await ended(bot, 1, timeout=90)
    (result,) = results_of(model)
    assert "DEMO_TOKEN=" in result and TOKEN not in result, f"the server's own secret reached the model: {result}"


@pytest.fixture
async def plain_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        mcp_config=mcp_config(tmp_path),
        sandbox_read_paths=(SERVERS, tmp_path / "owner-notes"),
    ) as harness:
        yield harness


async def test_a_result_of_text_and_a_picture_is_capped_as_a_whole(plain_bot: BotHarness) -> None:
    bot = plain_bot
    model = mcp_task(bot, mcp_call("big", size=2_000_000), claude_says.text("Done."))
    await ended(bot, 1, timeout=90)
    blocks = next(
        block["content"]
        for message in model.requests["code"][-1]["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    )
    assert isinstance(blocks, list) and any(b["type"] == "image" for b in blocks), blocks
    text = sum(len(b.get("text", "")) for b in blocks if b["type"] == "text")
    limit = bot.settings.workers.tool_result_max_chars
    assert text <= limit + 1_000, f"{text:,} characters of text went to the model (limit {limit:,})"
    assert len(json.dumps(model.requests["code"][-1])) < 200_000
