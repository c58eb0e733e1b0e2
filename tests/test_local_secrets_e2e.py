"""What another local account or a reader of the logs finds of the bot's secrets and its users' data: the store and
the files users send are the bot's user's alone whatever the umask, and the log hides every secret the settings hold
(GitHub's token and webhook secret too, as the chat's output filter does)."""

from __future__ import annotations

import io
import logging
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.attachments import answered

GITHUB_TOKEN = "ghp_ProbeTokenOfTheBot0123456789abcdefABCD"
GITHUB_WEBHOOK_SECRET = "Probe-Webhook-Secret-7781"


@pytest.fixture
def umask_022() -> object:
    """The usual umask of a login shell or a systemd service without UMask= (deploy/agentlab.service has none)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _group_or_other_bits(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode) & 0o077


async def test_database_and_attachments_are_private_to_the_bots_user(
    umask_022: object, bot: BotHarness, model: RoleScript, tmp_path: Path
) -> None:
    """The SQLite store (chat history, tool-call audit, task results, raw webhook updates) and the files users send
    are readable by no other local account, whatever the process's umask."""
    model.add("orchestrator", claude_says.text("Noted."))
    bot.tg.send_document(
        USER_ID, b"DB_PASSWORD=hunter2-from-a-user\n", filename="prod-notes.txt", mime="text/plain", caption="keep this"
    )
    await answered(bot, "Noted.")
    data = tmp_path / "data"
    exposed = {
        str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in [data, *data.rglob("*")]
        if p.exists()
        and (p.is_dir() and stat.S_IMODE(p.stat().st_mode) & 0o005 or p.is_file() and _group_or_other_bits(p) & 0o044)
    }
    assert not exposed, f"readable by other local users: {exposed}"


def test_log_redaction_hides_the_github_token_and_webhook_secret(tmp_path: Path) -> None:
    """`agentlab run` installs RedactSecrets on every log handler; the GitHub token and webhook secret are the bot's
    own secrets too (bot_secrets masks them in the chat), so a log line or traceback holding one must hide it."""
    from agents.core.settings import Settings
    from telegram_bot.startup import install_redaction

    settings = Settings(
        _env_file=None,
        telegram_bot_token="123456:Probe-Telegram-Token-abc",
        anthropic_api_key="sk-ant-probe-key-0000",
        allowed_user_ids=str(USER_ID),
        workspace_path=tmp_path,
        database_path=tmp_path / "data" / "agentlab.db",
        github_token=GITHUB_TOKEN,
        github_webhook_listen="127.0.0.1:8099",
        github_webhook_secret=GITHUB_WEBHOOK_SECRET,
    )
    root = logging.getLogger()
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    saved = root.handlers[:]
    root.handlers = [handler]  # as after cmd_run's _configure_logging: one handler, then the filter on it
    try:
        install_redaction(settings)
        log = logging.getLogger("agents.work.pull_requests")
        log.warning("could not push: git push https://x-access-token:%s@github.com/o/r.git", GITHUB_TOKEN)
        log.warning("webhook secret is %s", GITHUB_WEBHOOK_SECRET)
        log.warning("telegram %s", settings.telegram.telegram_bot_token.get_secret_value())
    finally:
        root.handlers = saved
    text = out.getvalue()
    assert "Probe-Telegram-Token" not in text  # the bot token is hidden (holds)
    assert GITHUB_TOKEN not in text, text
    assert GITHUB_WEBHOOK_SECRET not in text, text
