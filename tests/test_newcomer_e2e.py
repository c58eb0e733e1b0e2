"""A newcomer's set-up, followed literally: `agentlab init` writes `.env` from `.env.example` (most keys left empty
there), doctor reads it, and the bot starts from it as a real process. Every feature whose parts are installed on
this machine must then be on: an empty optional path in `.env` means unset, never the current folder."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agents.core.settings import env_keys
from agents.tools import browser
from agents.tools.ripgrep import ripgrep_path
from agents.tools.screenshot import find_chromium
from tests.conftest import USER_ID
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import start_task

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = find_chromium(None)
INSTALL, WHY_NOT = browser.find(None, CHROMIUM)
pytestmark = pytest.mark.slow


def newcomer_env(tg, claude, tmp_path: Path) -> dict[str, str]:
    """The process environment: no setting of the bot's own except where the fakes live (and a local whisper
    checkpoint, so nothing is downloaded); everything else comes from the `.env` that init writes."""
    keys = env_keys()
    env = {k: v for k, v in os.environ.items() if k.upper() not in keys}
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"\0" * 10)
    env.update(
        TELEGRAM_API_BASE_URL=tg.url,
        ANTHROPIC_BASE_URL=claude.url,
        WHISPER_MODEL=str(checkpoint),
        PYTHONPATH=str(REPO),
    )
    return env


async def test_a_env_made_by_init_from_the_example_turns_on_what_is_installed(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / ".env.example", home / ".env.example")
    env = newcomer_env(fake_telegram, fake_anthropic, tmp_path)
    answers = f"{fake_telegram.token}\nsk-ant-newcomer-key\n{USER_ID}\n{workspace_root}\n"
    init = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "telegram_bot", "init"],
        cwd=home,
        env=env,
        input=answers,
        capture_output=True,
        text=True,
        timeout=180,
        start_new_session=True,  # no terminal: getpass reads the piped answers
    )
    out = init.stdout
    assert init.returncode == 0, out + init.stderr
    assert "Ready" in out, out
    assert (home / ".env").read_text().count("MCP_CONFIG=") == 1, "the .env is the example's, filled in"
    marks = {line.split(":", 1)[0] for line in out.splitlines() if line[:2] in ("! ", "✗ ")}
    assert not any(m.startswith("✗") for m in marks), out
    assert "! MCP_CONFIG" not in marks, f"an empty MCP_CONFIG is no config file at all:\n{out}"
    installed = {
        "ripgrep": ripgrep_path() is not None,
        "chromium": CHROMIUM is not None,
        "browser": INSTALL is not None,
    }
    for name, present in installed.items():
        if present:
            assert f"✓ {name}:" in out, f"{name} is installed here, so doctor must show it on:\n{out}"
    if INSTALL is None:
        pytest.skip(f"no browser for the frontend worker here ({WHY_NOT}): the bot's part is not checked")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: a frontend task cannot start its browser")

    model = RoleScript()
    fake_anthropic.handler = model
    model.add(
        "orchestrator",
        start_task("group-therapy", "Look at the page.", worker="frontend"),
        claude_says.text("Started."),
    )
    model.add("frontend", claude_says.text("Looked."))
    log_path = tmp_path / "bot.log"
    with open(log_path, "w") as log:
        bot = subprocess.Popen(
            [sys.executable, "-m", "telegram_bot"], cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        await fake_telegram.wait_for_request("getUpdates", timeout=60)
        fake_telegram.send_text(USER_ID, "look at the page in group-therapy")
        await fake_telegram.await_for(lambda: model.requests.get("frontend"), timeout=120)
    finally:
        bot.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(bot.wait, 20)
        except subprocess.TimeoutExpired:
            bot.kill()
    tools = [t["name"] for t in model.requests["frontend"][0]["tools"]]
    assert "mcp__browser__new_page" in tools and "mcp__browser__unavailable" not in tools, tools
    text = log_path.read_text()
    assert "cannot be read" not in text, text[-3000:]
    assert fake_telegram.token not in text, "the token never reaches a log line"
