"""An owner's MCP server against a hostile worker, through the real bot and real bwrap.

The server of tests/mcp_servers/demo_server.py is configured the way reference servers are (`python -m
demo_server`, found on the PYTHONPATH its `env` names) with a token of its own in `env`. The worker (the scripted
model) writes a `demo_server.py` of its own into the worktree, crashes the server and calls it again, so that the
restart would run the worker's module with the server's token; asks the server for its own token; looks for the
token in what a server that logs it to stderr wrote; and asks for a result of 2 MB of text beside a picture.
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
    DEMO,
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


CHATTY_TOKEN = "mcp-Chatty-Secret-Value-5521qrs"  # of no shape the filter knows: masked only as the server's `env`
OWN_SERVICE_SAID = "own-service-said-7713"


@pytest.fixture
async def chatty_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    """The demo server, started by a line that first writes its own token to stderr (as a server in debug mode does,
    or one that crashes printing its settings)."""
    starter = (
        "import os, runpy, sys; "
        "print('starting with API key', os.environ['CHATTY_TOKEN'], file=sys.stderr, flush=True); "
        f"runpy.run_path({str(DEMO)!r}, run_name='__main__')"
    )
    config = mcp_config(tmp_path, args=["-c", starter])
    entry = json.loads(config.read_text())["mcpServers"]["demo"]
    entry["env"] |= {"CHATTY_TOKEN": CHATTY_TOKEN}
    config.write_text(json.dumps({"mcpServers": {"demo": entry}}))
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


async def test_a_servers_stderr_is_not_readable_by_the_workers_commands(chatty_bot: BotHarness) -> None:
    """What a stdio server writes to stderr may be its own secrets: the worker's commands must not read it, since a
    command prints what it read in any spelling (reversed: no filter knows it). The log of a service the worker
    started itself stays readable at /run/services."""
    bot = chatty_bot
    probe = (
        f"echo FOUND=$(grep -rl {CHATTY_TOKEN} /run/services 2>/dev/null | tr '\\n' ' ')END; "
        "echo LISTED=$(ls /run/services | tr '\\n' ' ')END; "
        "cat /run/services/*.log | rev"
    )
    model = mcp_task(
        bot,
        mcp_call("add", a=1, b=2),
        claude_says.tool_use(
            "run_command", {"command": f"echo {OWN_SERVICE_SAID}; exec sleep 600", "background": True}
        ),
        claude_says.tool_use("run_command", {"command": probe}),
        claude_says.text("Done."),
    )
    await ended(bot, 1, timeout=90)
    added, started, shown = results_of(model)
    assert "the sum is 3" in added, f"the server (which logged its token first) did not answer: {added}"
    assert OWN_SERVICE_SAID in started, started
    assert OWN_SERVICE_SAID[::-1] in shown, f"the worker's own service's log is not readable: {shown}"
    assert CHATTY_TOKEN[::-1] not in shown, f"the server's token reached the worker's commands (reversed): {shown}"
    assert "FOUND=END" in shown, f"the server's token is readable by the worker's commands: {shown}"
    assert "stdio-" not in shown, f"the server's log is shown at /run/services: {shown}"


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
