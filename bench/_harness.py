"""Shared helpers for the benches: the loopback fakes, a temp workspace, reply-latency measurement, figures, output.

A bench runs the real bot (or a baseline) on the asyncio loop of the main thread while a driver thread injects user
messages into the fake Telegram server and waits, on the fake's own condition variable (no polling), for the bot's
reply to each one. A reply is recognised as the first bot message that replies to the injected message, so progress
messages of background tasks in the same chat never count as an answer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.core.settings import Settings
from tests.conftest import USER_ID, make_repo, make_settings
from tests.fakes import anthropic_server, telegram_server
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram

# A short Markdown answer, so agentlab's renderer has something to do (bold, inline code).
ANSWER = "**Async** lets one thread wait on many things. Use `await` where a call would block."
QUESTION = "what's async/await in python? ({n})"
SMALL_REPO = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "README.md": "# calc\n\nA tiny calculator.\n",
}


# ---------------------------------------------------------------------------------------------------- figures


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class LatencySummary:
    """Latencies in milliseconds."""

    n: int
    p50: float
    p95: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, samples_ms: list[float]) -> LatencySummary:
        return cls(
            len(samples_ms),
            percentile(samples_ms, 50),
            percentile(samples_ms, 95),
            sum(samples_ms) / len(samples_ms),
            min(samples_ms),
            max(samples_ms),
        )

    def line(self) -> str:
        return (
            f"p50 {self.p50:7.2f} ms   p95 {self.p95:7.2f} ms   mean {self.mean:7.2f} ms   "
            f"(min {self.min:.2f}, max {self.max:.2f}, n={self.n})"
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "n": self.n,
            "p50_ms": round(self.p50, 3),
            "p95_ms": round(self.p95, 3),
            "mean_ms": round(self.mean, 3),
            "min_ms": round(self.min, 3),
            "max_ms": round(self.max, 3),
        }


def verdict(ratio: float, target: float) -> str:
    return f"≤ {target:g}×: {'met' if ratio <= target else 'not met'}"


# ---------------------------------------------------------------------------------------------------- machine


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "date": dt.date.today().isoformat(),
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
    }


# ---------------------------------------------------------------------------------------------------- fakes and bot


def set_fakes_tcp_nodelay(enabled: bool) -> None:
    """TCP_NODELAY on the fakes' sockets (stdlib `disable_nagle_algorithm`).

    The fakes write the headers and the body of a reply in two send() calls; with Nagle's algorithm on, the body
    waits for the client's delayed ACK of the headers (up to 40 ms on Linux), which would dwarf what we measure.
    Real servers do not add that stall, so the benches switch it off.
    """
    telegram_server._Handler.disable_nagle_algorithm = enabled
    anthropic_server._Handler.disable_nagle_algorithm = enabled


def _quiet_disconnects(server: object) -> None:
    """A client that hung up (a cancelled worker's request) is not an error worth a traceback on the bench's output."""
    report = server.handle_error

    def handle_error(request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            report(request, client_address)

    server.handle_error = handle_error


@contextlib.contextmanager
def running_fakes(tcp_nodelay: bool = True) -> Iterator[tuple[FakeTelegram, FakeAnthropic]]:
    """A started fake Telegram and fake Anthropic server on loopback (zero latency)."""
    set_fakes_tcp_nodelay(tcp_nodelay)
    with FakeTelegram() as tg, FakeAnthropic() as claude:
        _quiet_disconnects(tg._server)
        _quiet_disconnects(claude._server)
        yield tg, claude


class FakeAnthropicProcess:
    """The fake Anthropic server in a child process (bench/_fake_anthropic_process.py), answering `answer` to every
    request: its `url`, and once closed its own mean time per call (`own_ms`; `own_ms_by_kind`: of streamed and of
    not streamed requests)."""

    def __init__(self, answer: str) -> None:
        script = Path(__file__).with_name("_fake_anthropic_process.py")
        self.proc = subprocess.Popen(
            [sys.executable, str(script), answer], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        self.own_ms: float | None = None
        self.own_ms_by_kind: dict[str, float | None] = {}

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        line = self.proc.stdout.readline()
        self.proc.wait(10)
        figures = json.loads(line) if line.strip() else {}
        self.own_ms = figures.get("mean_ms")
        self.own_ms_by_kind = {
            f"{kind}_{figure}": figures.get(f"{kind}_{figure}_ms")
            for kind in ("streamed", "not_streamed")
            for figure in ("mean", "p50")
        }


@contextlib.contextmanager
def fake_anthropic_process(answer: str) -> Iterator[FakeAnthropicProcess]:
    fake = FakeAnthropicProcess(answer)
    try:
        yield fake
    finally:
        fake.close()


@contextlib.contextmanager
def temp_workspace() -> Iterator[Path]:
    """A temp folder holding `workspaces/calc` (one small git repository) and room for the bot's database."""
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-") as tmp:
        root = Path(tmp)
        (root / "workspaces").mkdir()
        make_repo(root / "workspaces" / "calc", SMALL_REPO)
        yield root


def agentlab_settings(tg: FakeTelegram, claude: FakeAnthropic, tmp: Path, **overrides: object) -> Settings:
    """The tests' settings: the fakes, a temp database, the temp workspace folder."""
    return make_settings(tg, claude, tmp, tmp / "workspaces", **overrides)


def quiet_logging() -> None:
    """Warnings only (the bot logs a line per missing speech model etc.); keeps the figures readable."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "telegram", "anthropic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


async def wait_transcriber_settled(runtime: object, timeout: float = 120.0) -> float:
    """agentlab loads whisper (torch import) in a thread once its first turn has its answer; start it now and wait
    until loaded or failed (seconds).

    Measuring while that import holds the GIL would charge it to the direct answers.
    """
    transcriber = getattr(runtime, "transcriber", None)
    started = time.perf_counter()
    start_up_done = getattr(runtime, "start_up_done", None)
    if start_up_done is not None:  # the load waits for the first turn: begin it now, and let it finish
        await start_up_done()
    while transcriber is not None and str(getattr(getattr(transcriber, "state", None), "value", "")) == "loading":
        if time.perf_counter() - started > timeout:
            break
        await asyncio.sleep(0.05)
    return time.perf_counter() - started


async def wait_indexing_idle(runtime: object) -> None:
    """The first turn starts indexing the workspaces in the background (symbol hints); let it finish before timing."""
    start_up_done = getattr(runtime, "start_up_done", None)
    if start_up_done is not None:  # start-up work (speech model, indexes) waits for a first turn: run it now
        await start_up_done()
    wait_idle = getattr(getattr(runtime, "hints", None), "wait_idle", None)
    if wait_idle is not None:
        await wait_idle()


# ---------------------------------------------------------------------------------------------------- server clocks


@dataclass
class ServerClock:
    """Hooks the fakes: when the first getUpdates arrived, and how long the fakes spend answering each call.

    Server time is the fakes' own work (parsing, validation, HTML entity parsing, the cache simulator); it is
    counted inside every measured latency, for agentlab and baseline alike.
    """

    tg: FakeTelegram
    claude: FakeAnthropic | FakeAnthropicProcess
    first_get_updates: float | None = None
    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self) -> ServerClock:
        handle_call = self.tg.handle_call
        answer = getattr(self.claude, "_answer", None)  # a fake in its own process times itself

        def timed_call(method: str, params: dict[str, Any], files: dict[str, Any]) -> Any:
            if method.lower() == "getupdates":
                with self._lock:
                    if self.first_get_updates is None:
                        self.first_get_updates = time.perf_counter()
                return handle_call(method, params, files)  # a long poll: its duration is waiting, not work
            started = time.perf_counter()
            try:
                return handle_call(method, params, files)
            finally:
                self._record(f"telegram.{method}", time.perf_counter() - started)

        def timed_answer(path: str, raw: bytes, headers: dict[str, str]) -> Any:
            started = time.perf_counter()
            try:
                return answer(path, raw, headers)
            finally:
                self._record(f"anthropic.{path}", time.perf_counter() - started)

        self.tg.handle_call = timed_call
        if answer is not None:
            self.claude._answer = timed_answer
        return self

    def _record(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name].append(seconds)

    def reset(self) -> None:
        with self._lock:
            self.first_get_updates = None
            self.seconds = defaultdict(list)

    def mean_ms(self) -> dict[str, float]:
        with self._lock:
            return {name: 1000 * sum(v) / len(v) for name, v in sorted(self.seconds.items()) if v}

    def total_seconds(self) -> float:
        """All the fakes' answering time recorded since the last reset (long polls excluded)."""
        with self._lock:
            return sum(sum(v) for v in self.seconds.values())

    def count(self, name: str) -> int:
        with self._lock:
            return len(self.seconds.get(name, []))


async def wait_first_get_updates(clock: ServerClock, started: float, timeout: float = 60.0) -> float:
    """Seconds from `started` (a perf_counter value) to the first getUpdates the fake saw."""
    deadline = time.perf_counter() + timeout
    while clock.first_get_updates is None:
        if time.perf_counter() > deadline:
            raise TimeoutError("no getUpdates within the timeout")
        await asyncio.sleep(0.001)
    return clock.first_get_updates - started


# ---------------------------------------------------------------------------------------------------- measuring


class LoopLagProbe:
    """How late the event loop wakes a 5 ms sleep: a direct measure of how busy the loop is (ms of lag)."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.lags_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lags_ms.append(1000 * (time.perf_counter() - started - self.interval))

    def __enter__(self) -> LoopLagProbe:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()

    def summary(self) -> LatencySummary:
        return LatencySummary.of(self.lags_ms or [0.0])


def _reply_to(tg: FakeTelegram, chat_id: int, message_id: int, start: int) -> Callable[[], bool]:
    def answered() -> bool:
        return any(m.reply_to_message_id == message_id for m in tg.messages(chat_id)[start:])

    return answered


def measure_replies_blocking(
    tg: FakeTelegram, user_id: int, texts: list[str], gap: float, timeout: float
) -> list[float]:
    """For each text, sequentially: inject it, block until the bot's reply to it is stored; latencies in ms."""
    latencies: list[float] = []
    for text in texts:
        if gap:
            time.sleep(gap)
        start = len(tg.messages(user_id))
        started = time.perf_counter()
        update = tg.send_text(user_id, text)
        tg.wait_for(_reply_to(tg, user_id, update["message"]["message_id"], start), timeout)
        latencies.append(1000 * (time.perf_counter() - started))
    return latencies


async def measure_replies(
    tg: FakeTelegram, texts: list[str], *, user_id: int = USER_ID, gap: float = 0.0, timeout: float = 30.0
) -> list[float]:
    """Run the measurement in a driver thread, leaving the event loop (and the bot on it) free."""
    return await asyncio.to_thread(measure_replies_blocking, tg, user_id, texts, gap, timeout)


def main_thread_cpu() -> float:
    """CPU seconds used so far by the main thread, where the bot's event loop runs (unaffected by other processes)."""
    return time.clock_gettime(time.pthread_getcpuclockid(threading.main_thread().ident))


def questions(count: int, first: int = 0) -> list[str]:
    return [QUESTION.format(n=first + i) for i in range(count)]


# ---------------------------------------------------------------------------------------------------- output


def parse_args(description: str, *flags: tuple[str, str]) -> argparse.Namespace:
    """--json, and each (flag, help) of the bench's own switches."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--json", action="store_true", help="also print the figures as one JSON object on the last line"
    )
    for flag, text in flags:
        parser.add_argument(flag, action="store_true", help=text)
    return parser.parse_args()


def emit_json(figures: dict[str, Any]) -> None:
    print(json.dumps(figures, sort_keys=True))
