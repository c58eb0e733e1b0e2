"""agentlab's own overhead per direct answer, beside a bare PTB + anthropic bot, each bot a process of its own.

Both bots run as real processes, started the way a user starts them: agentlab is `python -m telegram_bot` (its
settings from the environment, as tests/support/processes.py gives a bot process), the floor is a bare
python-telegram-bot + Anthropic SDK bot (bench/_bare_bot_process.py: one handler, one Messages call, one reply). Each
polls a fake Telegram of its own (served from this process, where the driver injects updates and reads the replies)
and calls a fake Anthropic of its own (a process of its own too, as the real API does not share the bot's
interpreter; `--fakes-in-process` serves it from this process instead). No bot shares an interpreter, a GIL or an
event loop with the bench, the fakes or the other bot.

For each bot, 5 warm-up messages (then a wait until the process is idle: agentlab indexes its workspaces and settles
its speech model after its first turn), then 100 sequential messages (each waits for its reply) in each of two
modes: idle (80 ms between a reply and the next message) and back-to-back (the next message right after the reply,
so whatever the bot still does after a reply is in the way of the next one); latency = from injecting the update
into the fake to the reply being stored by the fake. The bots take turns in alternating blocks, so load drift on
the machine hits both alike. The bare bot is the floor; the target is agentlab's p50 ≤ floor + 10 ms in both modes.
Also: each process's CPU time per answer (user + system of all its threads, from /proc: the steadiest figure on a
shared machine), and the start-up time from starting the process to its first getUpdates.

Two cases in one run, each with fresh fakes and its own pair of bot processes: a fresh database, and a populated
one that holds what a long-serving bot has stored (bench/_populate.py: thousands of messages, tasks, task events,
tool calls and usage rows, some of them the measured chat's earlier conversation), written before the bot starts; a
turn whose cost grows with the store shows as the populated case's gap to its floor exceeding the fresh case's.
`--fresh-only` skips the populated case. `--profile` runs agentlab under cProfile (bench/_profiled_bot.py: the
same entry point, profiled over the measured answers only; slower, so its latencies are not the figures) and prints
where its event loop's time went.

Run: .venv/bin/python bench/overhead.py [--json] [--fakes-in-process] [--fresh-only] [--profile]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pstats
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._harness import (  # noqa: E402
    ANSWER,
    FakeAnthropicProcess,
    LatencySummary,
    ServerClock,
    emit_json,
    fake_anthropic_process,
    machine,
    measure_replies,
    parse_args,
    questions,
    quiet_logging,
    running_fakes,
    temp_workspace,
    verdict,
)
from bench._populate import migrated, populate  # noqa: E402
from tests.conftest import MODEL, USER_ID  # noqa: E402
from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.support.processes import bot_env  # noqa: E402

WARMUP = 5
MESSAGES = 100
ROUNDS = 5  # the two bots take turns, ROUNDS blocks of MESSAGES/ROUNDS each, so load drift hits both alike
TARGET = 1.3
# Pause between messages (not counted). Both bots send ≤ 2 requests per answer; PTB's AIORateLimiter in agentlab
# allows 30 requests/s overall (Telegram's limit), so back-to-back answers faster than ~15/s would measure the
# limiter's deliberate waiting instead of overhead. A person does not send 10 messages a second.
GAP_SECONDS = 0.08
MODES = {"idle": GAP_SECONDS, "back_to_back": 0.0}  # mode → pause between a reply and the next message
TARGET_EXTRA_MS = 10.0  # agentlab's p50 at most the bare bot's (the floor) + this, in each mode
BARE_USER_ID = 2002  # the floor bot's chat
START_TIMEOUT_S = 120.0
# After the warm-up, a bot process counts as settled once it used at most this share of a core over SETTLE_WINDOW_S
# (agentlab's first turn starts its deferred start-up work: the workspaces' indexes, the speech model's load).
SETTLE_SHARE = 0.05
SETTLE_WINDOW_S = 1.0
SETTLE_TIMEOUT_S = 120.0
BARE_SCRIPT = Path(__file__).with_name("_bare_bot_process.py")
PROFILED_SCRIPT = Path(__file__).with_name("_profiled_bot.py")
TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread, and its children it has waited for) of process `pid`, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / TICKS  # utime, stime, cutime, cstime


async def wait_for_file(path: Path, timeout: float = 30.0) -> None:
    """Until `path` exists and has stopped growing (a process writing it), or the timeout."""
    deadline, size = time.perf_counter() + timeout, -1
    while time.perf_counter() < deadline:
        now = path.stat().st_size if path.exists() else -1
        if now > 0 and now == size:
            return
        size = now
        await asyncio.sleep(0.2)


@dataclass
class BotProcess:
    """One bot under measurement: its process, its own fakes, its chat, its samples."""

    name: str
    proc: subprocess.Popen[bytes]
    tg: FakeTelegram
    claude: FakeAnthropic | FakeAnthropicProcess
    clock: ServerClock
    user_id: int
    log: Path
    startup_s: float = 0.0
    samples: list[float] = field(default_factory=list)
    back_to_back: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    fakes_s: float = 0.0
    server_ms: list[dict[str, float]] = field(default_factory=list)

    async def first_poll(self, started: float) -> None:
        """Wait for the process's first getUpdates; the start-up time is from `started` (just before Popen)."""
        deadline = time.perf_counter() + START_TIMEOUT_S
        while self.clock.first_get_updates is None:
            self.alive()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{self.name}: no getUpdates within {START_TIMEOUT_S:g} s")
            await asyncio.sleep(0.002)
        self.startup_s = self.clock.first_get_updates - started

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.proc.returncode}): {self.log.read_text()[-3000:]}")

    async def settle(self) -> float:
        """Wait until the process is idle (see SETTLE_SHARE); the seconds waited."""
        started = time.perf_counter()
        while time.perf_counter() - started < SETTLE_TIMEOUT_S:
            self.alive()
            before = process_cpu_s(self.proc.pid)
            await asyncio.sleep(SETTLE_WINDOW_S)
            if process_cpu_s(self.proc.pid) - before <= SETTLE_SHARE * SETTLE_WINDOW_S:
                break
        return time.perf_counter() - started

    async def measure_block(self, count: int, first: int) -> None:
        await measure_replies(self.tg, questions(1, first), user_id=self.user_id, gap=GAP_SECONDS)  # after the switch
        self.clock.reset()
        cpu = process_cpu_s(self.proc.pid)
        self.samples += await measure_replies(
            self.tg, questions(count, first + 1), user_id=self.user_id, gap=GAP_SECONDS
        )
        self.cpu_s += process_cpu_s(self.proc.pid) - cpu
        self.fakes_s += self.clock.total_seconds()
        self.server_ms.append(self.clock.mean_ms())
        await asyncio.sleep(GAP_SECONDS)
        self.back_to_back += await measure_replies(
            self.tg, questions(count, first + 1 + count), user_id=self.user_id, gap=MODES["back_to_back"]
        )
        self.alive()

    def stop(self) -> None:
        """SIGTERM (both bots stop polling and exit on it), then SIGKILL to the process group if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    @property
    def cpu_ms_per_answer(self) -> float:
        return 1000 * self.cpu_s / len(self.samples)

    @property
    def fakes_ms_per_answer(self) -> float:
        return 1000 * self.fakes_s / len(self.samples)

    def server_means(self) -> dict[str, float]:
        keys = {key for block in self.server_ms for key in block}
        return {key: sum(b.get(key, 0.0) for b in self.server_ms) / len(self.server_ms) for key in sorted(keys)}


@contextlib.contextmanager
def bot_fakes(fakes_in_process: bool) -> Iterator[tuple[FakeTelegram, FakeAnthropic | FakeAnthropicProcess]]:
    """One bot's own fakes: a fake Telegram served from this process, a fake Anthropic answering ANSWER (in its own
    process unless `fakes_in_process`)."""
    with contextlib.ExitStack() as stack:
        tg, local = stack.enter_context(running_fakes())
        local.handler = lambda _body: claude_says.text(ANSWER)
        claude = local if fakes_in_process else stack.enter_context(fake_anthropic_process(ANSWER))
        yield tg, claude


async def start_bot(
    name: str,
    args: list[str],
    env: dict[str, str],
    folder: Path,
    tg: FakeTelegram,
    claude: FakeAnthropic | FakeAnthropicProcess,
    user_id: int,
) -> BotProcess:
    """Start the bot process, wait for its first poll, warm it up and let it settle."""
    clock = ServerClock(tg, claude).install()
    log = folder / f"{name}.log"
    started = time.perf_counter()
    with open(log, "w") as out:  # a file, not a pipe: a full pipe would stop the bot
        proc = subprocess.Popen(args, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    bot = BotProcess(name, proc, tg, claude, clock, user_id, log)
    try:
        await bot.first_poll(started)
        await measure_replies(tg, questions(WARMUP), user_id=user_id, gap=GAP_SECONDS)
        await bot.settle()
    except BaseException:
        bot.stop()
        raise
    return bot


def bare_env(tg: FakeTelegram, claude: FakeAnthropic | FakeAnthropicProcess) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "ANTHROPIC_"))}
    env.update(
        TELEGRAM_BOT_TOKEN=tg.token,
        TELEGRAM_API_BASE_URL=tg.url,
        ANTHROPIC_BASE_URL=claude.url,
        ORCHESTRATOR_MODEL=MODEL,
        PYTHONPATH=str(ROOT),
    )
    return env


async def run_bots(fakes_in_process: bool, populated: bool, profile: Path | None) -> tuple[BotProcess, BotProcess]:
    """Both bots on their own fakes, measured in alternating blocks; stopped before returning."""
    with (
        temp_workspace() as tmp,
        bot_fakes(fakes_in_process) as (bare_tg, bare_claude),
        bot_fakes(fakes_in_process) as (tg, claude),
    ):
        env = bot_env(tg, claude, tmp, tmp / "workspaces")  # type: ignore[arg-type]  # only its url is read
        database = Path(env["DATABASE_PATH"])
        database.parent.mkdir(parents=True, exist_ok=True)
        if populated:  # the store of a long-serving bot, written before the bot opens it
            await migrated(database)
            counts = await asyncio.to_thread(populate, database, USER_ID)
            print("  populated database: " + ", ".join(f"{n:,} {table}" for table, n in counts.items()))
        bots: list[BotProcess] = []
        try:
            # the floor first, so agentlab's start-up work cannot slow its start
            bots.append(
                await start_bot(
                    "bare",
                    [sys.executable, str(BARE_SCRIPT)],
                    bare_env(bare_tg, bare_claude),
                    tmp,
                    bare_tg,
                    bare_claude,
                    BARE_USER_ID,
                )
            )
            agentlab_args = [
                sys.executable,
                *([str(PROFILED_SCRIPT), str(profile)] if profile else ["-m", "telegram_bot"]),
            ]
            bots.append(await start_bot("agentlab", agentlab_args, env, tmp, tg, claude, USER_ID))
            bare, agentlab = bots
            await bare.settle()  # agentlab's start took the cores; the floor is idle again before timing
            if profile:
                agentlab.proc.send_signal(signal.SIGUSR1)  # the profile covers the measured answers only
            per_block = MESSAGES // ROUNDS
            for round_no in range(ROUNDS):
                order = (bare, agentlab) if round_no % 2 == 0 else (agentlab, bare)
                for bot in order:
                    await bot.measure_block(per_block, 1000 * (round_no + 1))
            if profile:
                agentlab.proc.send_signal(signal.SIGUSR2)
                await wait_for_file(profile)
        finally:
            for bot in bots:
                await asyncio.to_thread(bot.stop)
    return agentlab, bare


def print_server_times(name: str, server_ms: dict[str, float]) -> None:
    parts = ", ".join(f"{key} {value:.2f} ms" for key, value in server_ms.items())
    print(f"  {name:9s} fakes' own time per call (inside the latency): {parts}")


def print_profile(path: Path, answers: int, count: int = 30) -> None:
    """Where agentlab's event loop spent its time over the measured answers (`answers` of them): its own functions
    by cumulative time, then every function by own time. (A coroutine's times are those of its runs between awaits.)"""
    if not path.exists():
        print(f"  (no profile written at {path})")
        return
    stats = pstats.Stats(str(path))
    print(f"— agentlab's profile over its {answers} measured answers, its own code by cumulative time —")
    stats.sort_stats("cumulative").print_stats(r"(agents|telegram_bot)/", count)
    print("— every function by own time —")
    stats.sort_stats("tottime").print_stats(count)


async def main(fakes_in_process: bool = False, fresh_only: bool = False, profile: bool = False) -> dict:
    quiet_logging()
    figures = await measure_case(fakes_in_process, populated=False, profile=profile)
    if not fresh_only:
        populated = await measure_case(fakes_in_process, populated=True, profile=profile)
        figures["populated"] = {
            key: populated[key]
            for key in ("agentlab", "bare", "back_to_back", "idle_extra_p50_ms", "ratio_p50", "cpu_ms_per_answer")
        }
        print(
            f"Fresh vs populated database, agentlab's p50 minus the floor: idle +{figures['idle_extra_p50_ms']:.2f} ms "
            f"→ +{populated['idle_extra_p50_ms']:.2f} ms; back-to-back +{figures['back_to_back']['extra_p50_ms']:.2f} "
            f"ms → +{populated['back_to_back']['extra_p50_ms']:.2f} ms; agentlab's process CPU per answer "
            f"{figures['cpu_ms_per_answer']['agentlab']:.2f} ms → {populated['cpu_ms_per_answer']['agentlab']:.2f} ms"
        )
    return figures


async def measure_case(fakes_in_process: bool, populated: bool, profile: bool = False) -> dict:
    """One pair of bot processes on fresh fakes; agentlab's database fresh or `populated`."""
    case = "populated" if populated else "fresh"
    print(f"— {case} database —")
    profile_path = Path(f"/tmp/agentlab-overhead-{case}-{os.getpid()}.prof") if profile else None
    agentlab, bare = await run_bots(fakes_in_process, populated, profile_path)
    a, b = LatencySummary.of(agentlab.samples), LatencySummary.of(bare.samples)
    a2, b2 = LatencySummary.of(agentlab.back_to_back), LatencySummary.of(bare.back_to_back)
    ratio_p50, ratio_p95, ratio_mean = a.p50 / b.p50, a.p95 / b.p95, a.mean / b.mean
    info = machine()
    where = "in this process" if fakes_in_process else "in its own process"
    print(
        f"Direct-answer overhead, each bot a process of its own: {MESSAGES} sequential messages per bot ({ROUNDS} "
        f"alternating blocks, after {WARMUP} warm-up), {GAP_SECONDS * 1000:.0f} ms idle between messages, each bot's "
        f"fake Anthropic {where}; {info['date']}, {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}, "
        f"load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}"
        + (" — agentlab under cProfile: its latencies are the profiler's, not the figures" if profile else "")
    )
    print(f"  agentlab  {a.line()}")
    print(f"  bare      {b.line()}")
    print(f"  back-to-back (each message right after the previous reply, {a2.n} per bot):")
    print(f"  agentlab  {a2.line()}")
    print(f"  bare      {b2.line()}")
    for mode, (ours, floor) in {"idle": (a, b), "back-to-back": (a2, b2)}.items():
        extra = ours.p50 - floor.p50
        met = "met" if extra <= TARGET_EXTRA_MS else "not met"
        print(f"  {mode:13s} p50 floor + {extra:.2f} ms (target ≤ floor + {TARGET_EXTRA_MS:g} ms: {met})")
    print(
        f"  ratio agentlab/bare: p50 {ratio_p50:.2f}×   p95 {ratio_p95:.2f}×   mean {ratio_mean:.2f}×   "
        f"target {verdict(ratio_p50, TARGET)} (p50), {verdict(ratio_p95, TARGET)} (p95)"
    )
    own = {bot.name: getattr(bot.claude, "own_ms", None) for bot in (agentlab, bare)}
    if not fakes_in_process:
        print(
            "  each fake Anthropic (own process) spent per call: "
            + ", ".join(f"{name}'s {ms or 0:.2f} ms" for name, ms in own.items())
            + " (inside each latency, not subtracted: the real API's own time is not the bot's overhead)"
        )
    cpu_a, cpu_b = agentlab.cpu_ms_per_answer, bare.cpu_ms_per_answer
    print(
        f"  process CPU per answer (user + system, all threads; idle mode): agentlab {cpu_a:.2f} ms, "
        f"bare {cpu_b:.2f} ms, ratio {cpu_a / cpu_b:.2f}×"
    )
    print_server_times("agentlab", agentlab.server_means())
    print_server_times("bare", bare.server_means())
    print(
        f"  start-up, from starting the process to its first getUpdates: agentlab {agentlab.startup_s * 1000:.0f} ms,"
        f" bare {bare.startup_s * 1000:.0f} ms"
    )
    print(
        "  Note: the fakes answer with zero latency, so this ratio is an upper bound on the relative overhead; "
        f"with the real APIs (about 1 s or more per answer) the same +{a.p50 - b.p50:.0f} ms is around 1% of it."
    )
    if profile_path is not None:
        print_profile(profile_path, len(agentlab.samples) + len(agentlab.back_to_back) + ROUNDS)
        print(f"  (the profile is kept at {profile_path}: python -m pstats {profile_path})")
    return {
        "bench": "overhead",
        **info,
        "bots_as_processes": True,
        "messages": MESSAGES,
        "warmup": WARMUP,
        "rounds": ROUNDS,
        "gap_ms": GAP_SECONDS * 1000,
        "fakes_in_process": fakes_in_process,
        "database": case,
        "profiled": profile,
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "anthropic_fake_own_process_ms": {name: None if ms is None else round(ms, 3) for name, ms in own.items()},
        "agentlab": a.as_dict(),
        "bare": b.as_dict(),
        "back_to_back": {"agentlab": a2.as_dict(), "bare": b2.as_dict(), "extra_p50_ms": round(a2.p50 - b2.p50, 3)},
        "idle_extra_p50_ms": round(a.p50 - b.p50, 3),
        "target_extra_ms": TARGET_EXTRA_MS,
        "ratio_p50": round(ratio_p50, 3),
        "ratio_p95": round(ratio_p95, 3),
        "ratio_mean": round(ratio_mean, 3),
        "target_ratio": TARGET,
        "target_met": ratio_p95 <= TARGET and ratio_p50 <= TARGET,
        "fakes_ms_per_answer": {
            "agentlab": round(agentlab.fakes_ms_per_answer, 3),
            "bare": round(bare.fakes_ms_per_answer, 3),
        },
        "cpu_ms_per_answer": {"agentlab": round(cpu_a, 3), "bare": round(cpu_b, 3)},
        "startup_ms": {"agentlab": round(agentlab.startup_s * 1000, 1), "bare": round(bare.startup_s * 1000, 1)},
        "fake_server_ms": {
            "agentlab": {k: round(v, 3) for k, v in agentlab.server_means().items()},
            "bare": {k: round(v, 3) for k, v in bare.server_means().items()},
        },
    }


if __name__ == "__main__":
    args = parse_args(
        __doc__.splitlines()[0],
        ("--fakes-in-process", "each bot's fake Anthropic served from this process (not a process of its own)"),
        ("--fresh-only", "measure the fresh database only (not the populated one)"),
        (
            "--profile",
            "profile agentlab over the measured answers and print where its time went (latencies: not figures)",
        ),
    )
    figures = asyncio.run(main(args.fakes_in_process, args.fresh_only, args.profile))
    if args.json:
        emit_json(figures)
