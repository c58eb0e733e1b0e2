"""Host processes and sockets, seen from outside any sandbox: pids by argument, a counting TCP listener, and the bot
run as a real process (`python -m telegram_bot`) against the fakes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from tests.conftest import MODEL, USER_ID
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram

REPO = Path(__file__).resolve().parents[2]


def host_pids(argument: str) -> list[int]:
    """Pids (on the host, seen from outside any sandbox) of this test process's processes (`_ours`) with `argument`
    among their arguments."""
    wanted = argument.encode()
    return host_pids_where(lambda args: wanted in args)


def host_pids_where(matches: Callable[[list[bytes]], bool]) -> list[int]:
    """As `host_pids`, for the processes whose arguments `matches`."""
    pids = (int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit())
    return [pid for pid in pids if (args := _arguments(pid)) is not None and matches(args) and _ours(pid)]


def _arguments(pid: int) -> list[bytes] | None:
    """The process's command line, one item per argument (None: it has ended, or is not readable)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None


def _ours(pid: int) -> bool:
    """Whether `pid` may be this test process's: it descends from it, or from no other test run's process.

    A test runs beside other xdist workers and maybe other test runs on the same host, with the same ports, scripts
    and programs in their command lines: their processes are not this test's. A process reparented away from its
    starter (an escapee of a sandbox that should have taken it down) descends from neither, and counts: a test that
    asserts that nothing outlived its task must see it."""
    chain = []
    while pid > 1 and len(chain) < 64:
        chain.append(pid)
        pid = _parent(pid)
    if os.getpid() in chain:
        return True  # whatever ran in between: a sandboxed pytest of the bot's under test is this test's too
    run = _pid_of_this_run()
    return not any(p != run and _is_a_test_run(p) for p in chain)


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _is_a_test_run(pid: int) -> bool:
    """A pytest process (`python -m pytest`, `…/pytest`) or an xdist worker (`python -u -c "import sys;exec(…)"`)."""
    args = _arguments(pid) or []
    return any(a in (b"pytest", b"py.test") or a.endswith((b"/pytest", b"/py.test")) for a in args) or any(
        a.startswith(b"import sys;exec(eval(sys.stdin.readline()))") for a in args
    )


def _pid_of_this_run() -> int:
    """The pytest process this test process belongs to: its parent when it is an xdist worker, else itself."""
    parent = os.getppid()
    return parent if _is_a_test_run(parent) and os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


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
