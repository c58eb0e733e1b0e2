"""The owner's questions in the chat: a worker asking for the network, or to call an MCP tool under `approve`; the
owner's answer by button; the demo MCP server the tests ship and the bot configured with it."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import USER_ID, BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.scripted import RoleScript
from tests.support.tasks import ended, start_task

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
DEMO = SERVERS / "demo_server.py"
TOKEN = "srv-Token-Value-9981xyz"  # the demo server's own secret, in its `env`
# a worker's `demo_server.py`: what would run if a restarted server imported the worktree's module
PLANTED = DEMO.read_text().replace(
    'return f"the sum is {a + b}"', 'return "PLANTED MODULE RAN " + os.environ["DEMO_TOKEN"]'
)


def utf16_slice(text: str, offset: int, length: int) -> str:
    """The part of `text` an entity covers (Telegram counts in UTF-16 code units)."""
    encoded = text.encode("utf-16-le", "surrogatepass")
    return encoded[offset * 2 : (offset + length) * 2].decode("utf-16-le", "surrogatepass")


def answer_id(question: Any) -> str:
    """The request id in a question's buttons (`net:<answer>:<id>`)."""
    return str(question.callback_data[0].rsplit(":", 1)[1])


@pytest.fixture
async def asking_bot(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> AsyncIterator[BotHarness]:
    """The bot with SANDBOX_NETWORK=ask; the tests deny, so nothing runs with the network."""
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        sandbox_network="ask",
        sandbox_network_answer_seconds=20,
    ) as harness:
        yield harness


async def ask_with(bot: BotHarness, command: str, *, background: bool = False, before: tuple[dict, ...] = ()) -> Any:
    """A worker asks to run `command` with the network (after the replies `before`); returns the question (the
    message with the buttons)."""
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("calc", "Fetch it."), claude_says.text("Started."))
    model.add(
        "code",
        *before,
        claude_says.tool_use("run_command", {"command": command, "network": True, "background": background}),
        claude_says.text("Finished."),
    )
    bot.say("fetch it in calc")
    return await bot.tg.await_for(
        lambda: next(
            (m for m in bot.tg.messages(USER_ID) if "asks for network access" in (m.text or "") and m.callback_data),
            None,
        ),
        timeout=30,
    )


async def deny_and_wait(bot: BotHarness, question: Any) -> None:
    """The owner denies; the question says so and the task ends."""
    bot.tg.press_button(USER_ID, question.message_id, f"net:deny:{answer_id(question)}")
    await bot.tg.await_for(lambda: not question.callback_data and "denied by the owner" in (question.text or ""))
    await ended(bot, 1)


def mcp_config(tmp_path: Path, **entry: object) -> Path:
    """MCP_CONFIG with the demo server (its entry keys overridden by `entry`) and a note on a read path."""
    notes = tmp_path / "owner-notes"
    notes.mkdir(exist_ok=True)
    (notes / "note.txt").write_text("NOTE-FROM-A-READ-PATH-51\n")
    server = {"command": sys.executable, "args": [str(DEMO)], "env": {"DEMO_NOTE": str(notes / "note.txt")}}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"demo": {**server, **entry}}}))
    return path


@pytest.fixture
async def mcp_bot(
    request: pytest.FixtureRequest,
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
    bot_repo: Path,
) -> AsyncIterator[BotHarness]:
    """The bot with the demo server in MCP_CONFIG (entry keys from `@pytest.mark.mcp_entry(...)`)."""
    marker = request.node.get_closest_marker("mcp_entry")
    config = mcp_config(tmp_path, **(marker.kwargs if marker else {}))
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        mcp_config=config,
        sandbox_read_paths=(SERVERS, tmp_path / "owner-notes"),
        sandbox_network_answer_seconds=30,
    ) as harness:
        yield harness


def mcp_task(bot: BotHarness, *code_replies: dict[str, Any]) -> RoleScript:
    """The scripted model, installed: the orchestrator starts a code task in calc, whose worker replies `code_replies`."""
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("calc", "Use the demo server."), claude_says.text("Started."))
    model.add("code", *code_replies)
    bot.say("use the demo server in calc")
    return model


def mcp_call(tool: str, **arguments: object) -> dict[str, Any]:
    """The worker's call of a demo server tool."""
    return claude_says.tool_use(f"mcp__demo__{tool}", arguments)


async def mcp_question(bot: BotHarness, after: int = 0) -> Any:
    """The next question about an MCP call (after message `after`)."""
    return await bot.tg.await_for(
        lambda: next(
            (
                m
                for m in bot.tg.messages(USER_ID)
                if "asks to call" in (m.text or "") and m.callback_data and m.message_id > after
            ),
            None,
        ),
        timeout=30,
    )


def results_of(model: RoleScript) -> list[str]:
    """The tool results of the code worker's last request, each as JSON."""
    last = model.requests["code"][-1]
    return [
        json.dumps(block.get("content"))
        for message in last["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def module_server_config(tmp_path: Path) -> Path:
    """MCP_CONFIG with the demo server set up the way reference servers are: `python -m demo_server`, found on the
    PYTHONPATH its `env` names, with a token of its own (TOKEN) in `env`."""
    config = mcp_config(tmp_path)
    entry = json.loads(config.read_text())["mcpServers"]["demo"]
    entry["args"] = ["-m", "demo_server"]
    entry["env"] |= {"PYTHONPATH": str(SERVERS), "DEMO_TOKEN": TOKEN}
    config.write_text(json.dumps({"mcpServers": {"demo": entry}}))
    return config
