"""Start-up as a real process: no token, a refused token or key, an unreachable Telegram. Each outcome is one line
with what to do, never the token; a refused key exits with status 2 (the systemd unit does not restart on it), an
unreachable service is tried again with one log line per attempt. And the log filter that hides the bot's secrets."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.core.settings import env_keys
from telegram_bot.cli import TEXT_LOG_FORMAT, JsonLogFormatter
from telegram_bot.startup import RedactSecrets
from tests.conftest import USER_ID

REPO = Path(__file__).resolve().parents[1]
WRONG_TOKEN = "123456:wrong-secret-from-an-old-bot-AAAA"
pytestmark = pytest.mark.slow


def start_env(tmp_path: Path, **keys: str) -> dict[str, str]:
    """No setting of the bot's from the test's environment; `keys` and the `.env` of `tmp_path` only."""
    names = env_keys()
    env = {k: v for k, v in os.environ.items() if k.upper() not in names}
    env.update(
        PYTHONPATH=str(REPO),
        WORKSPACE_PATH=str(tmp_path),
        ALLOWED_USER_IDS=str(USER_ID),
        DATABASE_PATH=str(tmp_path / "data" / "bot.db"),
        WHISPER_MODEL=str(tmp_path / "missing.pt"),
        **keys,
    )
    return env


def run_bot(tmp_path: Path, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "telegram_bot"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_an_env_copied_from_the_example_names_the_empty_keys(tmp_path: Path) -> None:
    shutil.copy(REPO / ".env.example", tmp_path / ".env")
    env = start_env(tmp_path)
    del env["WORKSPACE_PATH"], env["ALLOWED_USER_IDS"]
    result = run_bot(tmp_path, env)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("agentlab: configuration error: TELEGRAM_BOT_TOKEN: empty (required)")
    assert "ANTHROPIC_API_KEY: empty" in result.stderr and "agentlab init" in result.stderr


def test_a_refused_token_is_one_line_and_exit_2(tmp_path: Path, fake_telegram, fake_anthropic) -> None:
    env = start_env(
        tmp_path,
        TELEGRAM_BOT_TOKEN=WRONG_TOKEN,
        TELEGRAM_API_BASE_URL=fake_telegram.url,
        ANTHROPIC_API_KEY="sk-ant-good-key",
        ANTHROPIC_BASE_URL=fake_anthropic.url,
        PYTHONPROFILEIMPORTTIME="1",  # each module the process imports, one stderr line each
    )
    result = run_bot(tmp_path, env)
    lines = result.stderr.splitlines(keepends=True)
    imported = [line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")]
    output = result.stdout + "".join(line for line in lines if not line.startswith("import time:"))
    assert result.returncode == 2, output
    assert output == "agentlab: Telegram rejected TELEGRAM_BOT_TOKEN (401): copy it again from @BotFather\n", output
    assert "wrong-secret" not in result.stdout + result.stderr
    # Telegram is asked first: a refused token costs neither a request to Anthropic nor the SDK's import (~1 s CPU)
    assert "telegram" in imported and "anthropic" not in imported, "the Anthropic SDK was imported"
    assert not fake_anthropic.count_token_requests


def test_a_refused_api_key_is_one_line_and_exit_2(tmp_path: Path, fake_telegram, fake_anthropic) -> None:
    fake_anthropic.api_keys = {"sk-ant-the-real-one"}
    env = start_env(
        tmp_path,
        TELEGRAM_BOT_TOKEN=fake_telegram.token,
        TELEGRAM_API_BASE_URL=fake_telegram.url,
        ANTHROPIC_API_KEY="sk-ant-revoked-key-42",
        ANTHROPIC_BASE_URL=fake_anthropic.url,
    )
    result = run_bot(tmp_path, env)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert output.count("\n") == 1 and output.startswith("agentlab: Anthropic rejected ANTHROPIC_API_KEY (401)")
    assert "console.anthropic.com" in output and "revoked" not in output


# `agentlab run` with the start-up check passed: the token is refused by PTB's own start, as after a /revoke in
# @BotFather between the check and the first getMe of the application
PROVEN_THEN_RUN = """
import sys
import telegram_bot.startup as startup

async def proven(settings):
    return "test_bot"

startup.both_reachable = proven
from telegram_bot.cli import main

sys.exit(main(["run"]))
"""


def test_a_token_refused_after_the_start_check_is_one_line_without_the_token(tmp_path: Path, fake_telegram) -> None:
    """PTB's InvalidToken names the whole token: escaping `agentlab run`, Python printed it to stderr (journald)."""
    env = start_env(
        tmp_path,
        TELEGRAM_BOT_TOKEN=WRONG_TOKEN,
        TELEGRAM_API_BASE_URL=fake_telegram.url,
        ANTHROPIC_API_KEY="sk-ant-good-key",
    )
    result = subprocess.run(
        [sys.executable, "-c", PROVEN_THEN_RUN], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert output.endswith("agentlab: Telegram rejected TELEGRAM_BOT_TOKEN (401): copy it again from @BotFather\n")
    assert "wrong-secret" not in output, output  # PTB logs the error itself: through the log's filter


async def test_an_unreachable_telegram_is_tried_again_one_line_each(tmp_path: Path, fake_anthropic) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on: connections are refused at once
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    env = start_env(
        tmp_path,
        TELEGRAM_BOT_TOKEN=WRONG_TOKEN,
        TELEGRAM_API_BASE_URL=f"http://127.0.0.1:{closed}",
        ANTHROPIC_API_KEY="sk-ant-good-key",
        ANTHROPIC_BASE_URL=fake_anthropic.url,
    )
    log_path = tmp_path / "bot.log"
    with open(log_path, "w") as log:
        bot = subprocess.Popen(
            [sys.executable, "-m", "telegram_bot"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while "(attempt 3)" not in log_path.read_text() and bot.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert bot.poll() is None, "an unreachable Telegram is waited for, not a reason to exit"
    finally:
        bot.send_signal(signal.SIGTERM)
        await asyncio.to_thread(bot.wait, 10)
    lines = log_path.read_text().splitlines()
    attempts = [line for line in lines if "cannot reach Telegram" in line]
    assert len(attempts) >= 3 and all("trying again in" in line for line in attempts), lines
    assert "(attempt 1)" in attempts[0] and "in 1 s" in attempts[0] and "in 2 s" in attempts[1], attempts
    assert len(lines) == len(attempts), f"one line per attempt, nothing else:\n{lines}"
    assert "wrong-secret" not in log_path.read_text()


async def test_an_empty_allowed_user_ids_and_no_bubblewrap_are_said_at_start(
    tmp_path: Path, fake_telegram, fake_anthropic
) -> None:
    """The bot starts (it can still be fixed while running), and its log says who cannot use it and what the
    missing sandbox turns off."""
    no_bwrap = tmp_path / "path-without-bwrap"
    no_bwrap.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for name in os.listdir(directory) if os.path.isdir(directory) else []:
            if name != "bwrap" and not (no_bwrap / name).exists():
                (no_bwrap / name).symlink_to(Path(directory) / name)
    env = start_env(
        tmp_path,
        TELEGRAM_BOT_TOKEN=fake_telegram.token,
        TELEGRAM_API_BASE_URL=fake_telegram.url,
        ANTHROPIC_API_KEY="sk-ant-good-key",
        ANTHROPIC_BASE_URL=fake_anthropic.url,
        PATH=str(no_bwrap),
    )
    env["ALLOWED_USER_IDS"] = ""
    log_path = tmp_path / "bot.log"
    with open(log_path, "w") as log:
        bot = subprocess.Popen(
            [sys.executable, "-m", "telegram_bot"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        await fake_telegram.wait_for_request("getUpdates", timeout=60)
    finally:
        bot.send_signal(signal.SIGTERM)
        await asyncio.to_thread(bot.wait, 20)
    text = log_path.read_text()
    assert "ALLOWED_USER_IDS is empty: nobody may use the bot" in text and "add your Telegram user id" in text, text
    [sandbox] = [line for line in text.splitlines() if "the sandbox does not work here" in line]
    assert "every command a task runs is refused" in sandbox and "bubblewrap (bwrap) is not installed" in sandbox


# ------------------------------------------------------------------------------------------------ the log filter


def _formatted(formatter: logging.Formatter, redact: RedactSecrets, record: logging.LogRecord) -> str:
    assert redact.filter(record)
    return formatter.format(record)


@pytest.mark.parametrize("formatter", [logging.Formatter(TEXT_LOG_FORMAT), JsonLogFormatter()])
def test_the_bot_s_secrets_leave_no_log_record(formatter: logging.Formatter) -> None:
    redact = RedactSecrets([WRONG_TOKEN, WRONG_TOKEN.partition(":")[2], "sk-ant-key-123456"])
    url = f"https://api.telegram.org/bot{WRONG_TOKEN}/getUpdates"
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: POST %s", (url,), None)
    line = _formatted(formatter, redact, record)
    assert "wrong-secret" not in line and "bot<secret>/getUpdates" in line
    try:
        raise RuntimeError(f"The token `{WRONG_TOKEN.partition(':')[2]}` was rejected; key sk-ant-key-123456")
    except RuntimeError:
        record = logging.LogRecord("telegram.ext", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    line = _formatted(formatter, redact, record)
    assert "wrong-secret" not in line and "sk-ant-key" not in line and "RuntimeError: The token `<secret>`" in line
    if isinstance(formatter, JsonLogFormatter):
        assert "<secret>" in json.loads(line)["exception"]


# ------------------------------------------------------------------------------------------ the sandbox's probe


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_the_sandbox_probe_runs_after_polling_began_and_still_warns(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, monkeypatch, caplog
) -> None:
    """Where bwrap is installed, whether it confines commands (a sandboxed `true`, after a private copy of /etc) is
    found out beside the running bot, not before its first poll: a probe that has not answered yet holds nothing
    back, and its warning still comes once it answers."""
    from agents.sandbox import bwrap
    from telegram_bot.app import stop_application
    from tests.conftest import make_settings, start_bot

    answer = asyncio.Event()

    async def slow_probe(_probe: bwrap.SandboxProbe) -> str | None:
        await answer.wait()
        return "Commands are refused because the probe said so."

    monkeypatch.setattr(bwrap, "_probe", slow_probe)  # a fresh probe object asks this
    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    with caplog.at_level(logging.WARNING, logger="agents.runtime"):
        started = start_bot(settings, fake_telegram, fake_anthropic, sandbox_probe=bwrap.SandboxProbe())
        bot = await asyncio.wait_for(started, 60)
        try:
            await fake_telegram.wait_for_request("getUpdates", timeout=30)
            assert "the sandbox does not work here" not in caplog.text
            answer.set()
            await asyncio.wait_for(bot.runtime.sandbox_probe, 30)
            assert "the sandbox does not work here" in caplog.text and "the probe said so" in caplog.text
        finally:
            await stop_application(bot.app)
