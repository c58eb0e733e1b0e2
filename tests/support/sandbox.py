"""The secrets a hostile worker looks for, planted where a real bot keeps them, and the host listener it must not reach.

The "bot's secrets" live in a `.env` in its working folder, in the owner's home, next to the workspaces and in the
environment of a process outside the sandbox (a stand-in for the bot's own, whose /proc/<pid>/environ holds its keys).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from agents.sandbox.bwrap import SandboxProbe
from tests.support.processes import Listener

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
    reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
)

# The bwrap probe the tests' own sandbox specs carry: one for the test process (the machine does not change under
# the tests); a test about the probe itself makes a fresh one.
PROBE = SandboxProbe()

FAKE_KEY = "sk-ant-FAKE-KEY-4f1c9e"
FAKE_TOKEN = "123456:FAKE-TOKEN-77ab"
SECRETS = (FAKE_KEY, FAKE_TOKEN, "NEIGHBOUR-SECRET-5e1", "OWNER-HOME-SECRET-9a2", "PRIVATE-CHAT-MARKER-3c7")
SECRET_ENV = {
    "TELEGRAM_BOT_TOKEN": FAKE_TOKEN,
    "ANTHROPIC_API_KEY": FAKE_KEY,
    "GITHUB_TOKEN": "ghp_FAKE0123456789abcdef",
}


@pytest.fixture
def secret_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bot's secrets in its own process environment (docker run --env-file, systemd's Environment=)."""
    for key, value in SECRET_ENV.items():
        monkeypatch.setenv(key, value)


def secrets_in(env: Mapping[str, str] | None) -> list[str]:
    """The variables of a child's environment that hold one of SECRET_ENV, by name or value; None (the child
    inherits) is the process's own environment."""
    seen = os.environ if env is None else env
    return sorted(k for k, v in seen.items() if k in SECRET_ENV or v in SECRET_ENV.values())


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def planted(tmp_path: Path, workspace_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Secrets where a hostile worker would look: next to the workspaces, in the owner's home, the bot's cwd/.env
    and a process environment outside the sandbox."""
    (workspace_root / "secret-next-door.txt").write_text("NEIGHBOUR-SECRET-5e1\n")
    home = tmp_path / "owner-home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("OWNER-HOME-SECRET-9a2\n")
    bot_cwd = tmp_path / "bot-cwd"
    bot_cwd.mkdir()
    (bot_cwd / ".env").write_text(f"ANTHROPIC_API_KEY={FAKE_KEY}\nTELEGRAM_BOT_TOKEN={FAKE_TOKEN}\n")
    monkeypatch.chdir(bot_cwd)
    monkeypatch.setenv("HOME", str(home))
    keeper = subprocess.Popen(["sleep", "120"], env={"ANTHROPIC_API_KEY": FAKE_KEY, "TELEGRAM_BOT_TOKEN": FAKE_TOKEN})
    yield home
    keeper.kill()
    keeper.wait()
