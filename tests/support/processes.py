"""Host processes and sockets, seen from outside any sandbox: pids by argument, a counting TCP listener, and the bot
run as a real process (`python -m telegram_bot`) against the fakes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.conftest import MODEL, USER_ID
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram

REPO = Path(__file__).resolve().parents[2]


def host_pids(argument: str) -> list[int]:
    """Pids (on the host, seen from outside any sandbox) of processes with `argument` among their arguments."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                args = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argument.encode() in args:
                found.append(int(entry.name))
    return found


def own_sleep(tag: str) -> str:
    """A `sleep` argument no other test process uses (`1000.<this pid><tag>`: about 1,000 s): `host_pids` of it finds
    this process's sleepers only, never those of another test run on the same host."""
    return f"1000.{os.getpid()}{tag}"


class Listener:
    """A TCP listener on one host address (the loopback by default) that counts the connections it sees."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.host, self.port = host, self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def bot_env(tg: FakeTelegram, claude: FakeAnthropic, tmp_path: Path, workspace_root: Path) -> dict[str, str]:
    """The environment of a bot process on the test settings (this checkout first on its path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "ANTHROPIC_"))}
    env.update(
        TELEGRAM_BOT_TOKEN=tg.token,
        TELEGRAM_API_BASE_URL=tg.url,
        ANTHROPIC_API_KEY="sk-test",
        ANTHROPIC_BASE_URL=claude.url,
        ANTHROPIC_MAX_RETRIES="0",
        ALLOWED_USER_IDS=str(USER_ID),
        WORKSPACE_PATH=str(workspace_root),
        DATABASE_PATH=str(tmp_path / "data" / "bot.db"),
        WHISPER_MODEL=str(tmp_path / "missing.pt"),
        ORCHESTRATOR_MODEL=MODEL,
        WORKER_MODEL=MODEL,
        PYTHONPATH=str(REPO),
    )
    return env


def launch(env: dict[str, str], tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    """`python -m telegram_bot` in `tmp_path`, its output in `<name>.log` there."""
    log = open(tmp_path / f"{name}.log", "w")  # the process writes it until it ends
    return subprocess.Popen(
        [sys.executable, "-m", "telegram_bot"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
    )
