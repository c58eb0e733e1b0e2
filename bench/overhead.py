"""agentlab's own overhead per direct answer, beside a bare PTB + anthropic bot, against the same zero-latency fakes.

Both bots poll the same fake Telegram server and call the same fake Anthropic server in one run. For each, 5 warm-up
messages, then 100 sequential messages (each waits for its reply) in each of two modes: idle (80 ms between a reply
and the next message) and back-to-back (the next message right after the reply, so whatever the bot still does
after a reply is in the way of the next one); latency = from injecting the update into the fake to the reply being
stored by the fake. The bare bot is the floor; the target is agentlab's p50 ≤ floor + 10 ms in both modes. Also
the start-up time: from building the application to the first getUpdates.

The fake Anthropic server runs in a process of its own (bench/_fake_anthropic_process.py), as the real API does not
share the bot's interpreter: in-process, its parsing, validation, cache simulation and SSE framing of agentlab's
17 KB requests competed with the bot for the GIL inside every measured latency (up to a 5 ms switch interval
each time). `--fakes-in-process` measures the old way (both fakes as threads of this process), for comparison.
The fake Telegram server stays in-process either way (the driver injects updates and reads replies through it).

Two cases in one run, each with fresh fakes and its own pair of bots: a fresh database, and a populated one that holds
what a long-serving bot has stored (bench/_populate.py: thousands of messages, tasks, task events, tool calls and
usage rows, some of them the measured chat's earlier conversation); a turn whose cost grows with the store shows as
the populated case's gap to its floor exceeding the fresh case's. `--fresh-only` skips the populated case.

Run: .venv/bin/python bench/overhead.py [--json] [--fakes-in-process] [--fresh-only]
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
from telegram import Update  # noqa: E402
from telegram.ext import Application, ApplicationBuilder, ContextTypes, MessageHandler, filters  # noqa: E402

from bench._harness import (  # noqa: E402
    ANSWER,
    LatencySummary,
    ServerClock,
    agentlab_settings,
    emit_json,
    fake_anthropic_process,
    machine,
    main_thread_cpu,
    measure_replies,
    parse_args,
    questions,
    quiet_logging,
    running_fakes,
    temp_workspace,
    verdict,
    wait_first_get_updates,
    wait_indexing_idle,
    wait_transcriber_settled,
)
from bench._populate import migrated, populate  # noqa: E402
from telegram_bot.app import stop_polling  # noqa: E402
from tests.conftest import MODEL, USER_ID, start_bot  # noqa: E402
from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402

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
BARE_USER_ID = 2002  # the baseline's chat, apart from agentlab's


def bare_application(tg: FakeTelegram, claude: FakeAnthropic) -> tuple[Application, anthropic.AsyncAnthropic]:
    """The minimal bot: one handler, one Messages call, one reply. No rate limiter, no store, no rendering."""
    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=claude.url, max_retries=0)

    async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        response = await client.messages.create(
            model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": update.message.text}]
        )
        answer = "".join(block.text for block in response.content if block.type == "text")
        await update.message.reply_text(answer, do_quote=True)

    app = ApplicationBuilder().token(tg.token).base_url(tg.base_url).base_file_url(tg.base_file_url).build()
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, on_text))
    return app, client


async def resume_polling(app: Application) -> None:
    await app.updater.start_polling(poll_interval=0.0, timeout=1, allowed_updates=Update.ALL_TYPES)


@dataclass
class Contender:
    """One bot under measurement: its app, its chat, its samples."""

    name: str
    app: Application
    user_id: int
    startup_s: float
    samples: list[float] = field(default_factory=list)
    back_to_back: list[float] = field(default_factory=list)
    loop_cpu_s: float = 0.0
    fakes_s: float = 0.0
    server_ms: list[dict[str, float]] = field(default_factory=list)

    async def measure_block(self, tg: FakeTelegram, clock: ServerClock, count: int, first: int) -> None:
        await resume_polling(self.app)
        await measure_replies(tg, questions(1, first), user_id=self.user_id, gap=GAP_SECONDS)  # after the switch
        clock.reset()
        cpu = main_thread_cpu()
        self.samples += await measure_replies(tg, questions(count, first + 1), user_id=self.user_id, gap=GAP_SECONDS)
        self.loop_cpu_s += main_thread_cpu() - cpu
        self.fakes_s += clock.total_seconds()
        self.server_ms.append(clock.mean_ms())
        await asyncio.sleep(GAP_SECONDS)
        gap = MODES["back_to_back"]
        self.back_to_back += await measure_replies(
            tg, questions(count, first + 1 + count), user_id=self.user_id, gap=gap
        )
        await self.app.updater.stop()

    @property
    def loop_cpu_ms_per_answer(self) -> float:
        return 1000 * self.loop_cpu_s / len(self.samples)

    @property
    def fakes_ms_per_answer(self) -> float:
        return 1000 * self.fakes_s / len(self.samples)

    def server_means(self) -> dict[str, float]:
        keys = {key for block in self.server_ms for key in block}
        return {key: sum(b.get(key, 0.0) for b in self.server_ms) / len(self.server_ms) for key in sorted(keys)}


async def start_agentlab(
    tg: FakeTelegram, claude: FakeAnthropic, clock: ServerClock, tmp: Path, populated: bool
) -> tuple[Contender, float]:
    settings = agentlab_settings(tg, claude, tmp)
    if populated:  # the store of a long-serving bot, written before the bot opens it
        await migrated(settings.database_path)
        counts = populate(settings.database_path, USER_ID)
        print("  populated database: " + ", ".join(f"{n:,} {table}" for table, n in counts.items()))
    clock.reset()
    started = time.perf_counter()
    bot = await start_bot(settings, tg, claude)
    startup = await wait_first_get_updates(clock, started)
    speech_settle = await wait_transcriber_settled(bot.runtime)
    await measure_replies(tg, questions(WARMUP), gap=GAP_SECONDS)
    await wait_indexing_idle(bot.runtime)
    await bot.app.updater.stop()
    return Contender("agentlab", bot.app, USER_ID, startup), speech_settle


async def start_bare(
    tg: FakeTelegram, claude: FakeAnthropic, clock: ServerClock
) -> tuple[Contender, anthropic.AsyncAnthropic]:
    clock.reset()
    started = time.perf_counter()
    app, client = bare_application(tg, claude)
    await app.initialize()
    await app.start()
    await resume_polling(app)
    startup = await wait_first_get_updates(clock, started)
    await measure_replies(tg, questions(WARMUP), user_id=BARE_USER_ID, gap=GAP_SECONDS)
    await app.updater.stop()
    return Contender("bare", app, BARE_USER_ID, startup), client


async def run_contenders(
    tg: FakeTelegram, claude: FakeAnthropic, tmp: Path, populated: bool
) -> tuple[Contender, Contender, float]:
    clock = ServerClock(tg, claude).install()
    bare, client = await start_bare(tg, claude, clock)  # first, so agentlab's whisper import cannot slow it
    agentlab = None
    try:
        agentlab, speech_settle = await start_agentlab(tg, claude, clock, tmp, populated)
        per_block = MESSAGES // ROUNDS
        for round_no in range(ROUNDS):
            order = (bare, agentlab) if round_no % 2 == 0 else (agentlab, bare)
            for contender in order:
                await contender.measure_block(tg, clock, per_block, 1000 * (round_no + 1))
    finally:
        if agentlab is not None:
            await stop_polling(agentlab.app)
        await bare.app.stop()
        await bare.app.shutdown()
        await client.close()
    return agentlab, bare, speech_settle


def print_server_times(name: str, server_ms: dict[str, float]) -> None:
    parts = ", ".join(f"{key} {value:.2f} ms" for key, value in server_ms.items())
    print(f"  {name:9s} fakes' own time per call (inside the latency): {parts}")


async def main(fakes_in_process: bool = False, fresh_only: bool = False) -> dict:
    quiet_logging()
    figures = await measure_case(fakes_in_process, populated=False)
    if not fresh_only:
        populated = await measure_case(fakes_in_process, populated=True)
        figures["populated"] = {
            key: populated[key] for key in ("agentlab", "bare", "back_to_back", "idle_extra_p50_ms", "ratio_p50")
        }
        figures["populated"]["loop_cpu_ms_per_answer"] = populated["loop_cpu_ms_per_answer"]
        print(
            f"Fresh vs populated database, agentlab's p50 minus the floor: idle +{figures['idle_extra_p50_ms']:.2f} ms "
            f"→ +{populated['idle_extra_p50_ms']:.2f} ms; back-to-back +{figures['back_to_back']['extra_p50_ms']:.2f} "
            f"ms → +{populated['back_to_back']['extra_p50_ms']:.2f} ms"
        )
    return figures


async def measure_case(fakes_in_process: bool, populated: bool) -> dict:
    """One pair of bots on fresh fakes; agentlab's database fresh or `populated`."""
    print(f"— {'populated' if populated else 'fresh'} database —")
    with contextlib.ExitStack() as stack:
        tg, local = stack.enter_context(running_fakes())
        tmp = stack.enter_context(temp_workspace())
        local.handler = lambda _body: claude_says.text(ANSWER)
        claude = local if fakes_in_process else stack.enter_context(fake_anthropic_process(ANSWER))
        agentlab, bare, speech_settle = await run_contenders(tg, claude, tmp, populated)
    own_process_ms = None if fakes_in_process else claude.own_ms

    a, b = LatencySummary.of(agentlab.samples), LatencySummary.of(bare.samples)
    a2, b2 = LatencySummary.of(agentlab.back_to_back), LatencySummary.of(bare.back_to_back)
    ratio_p50, ratio_p95, ratio_mean = a.p50 / b.p50, a.p95 / b.p95, a.mean / b.mean
    info = machine()
    where = "threads of this process" if fakes_in_process else "fake Anthropic in its own process"
    print(
        f"Direct-answer overhead: {MESSAGES} sequential messages per bot ({ROUNDS} alternating blocks, after "
        f"{WARMUP} warm-up), {GAP_SECONDS * 1000:.0f} ms idle between messages, fakes: {where}; {info['date']}, "
        f"{info['nproc']} CPUs, {info['cpu']}, Python {info['python']}"
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
    fakes_extra = agentlab.fakes_ms_per_answer - bare.fakes_ms_per_answer
    print(
        f"  agentlab's extra time per answer: p50 +{a.p50 - b.p50:.2f} ms, p95 +{a.p95 - b.p95:.2f} ms; of which "
        f"+{fakes_extra:.2f} ms is the in-process fakes' own work on agentlab's bigger requests (validation, cache "
        "simulation)"
    )
    by_kind = {} if fakes_in_process else claude.own_ms_by_kind
    if own_process_ms is not None:
        print(
            f"  the fake Anthropic (own process) spent {own_process_ms:.2f} ms per call, both bots' calls together; "
            + ", ".join(
                f"{who}'s calls: mean {by_kind.get(f'{kind}_mean') or 0:.2f} ms, "
                f"p50 {by_kind.get(f'{kind}_p50') or 0:.2f} ms"
                for who, kind in (("agentlab", "streamed"), ("the bare bot", "not_streamed"))
            )
            + " (inside each latency, not subtracted: the real API's own time is not the bot's overhead)"
        )
    cpu_a, cpu_b = agentlab.loop_cpu_ms_per_answer, bare.loop_cpu_ms_per_answer
    print(
        f"  event-loop CPU per answer (main thread; not disturbed by other processes): agentlab {cpu_a:.2f} ms, "
        f"bare {cpu_b:.2f} ms, ratio {cpu_a / cpu_b:.2f}×"
    )
    print_server_times("agentlab", agentlab.server_means())
    print_server_times("bare", bare.server_means())
    print(
        f"  start-up to first getUpdates: agentlab {agentlab.startup_s * 1000:.0f} ms, "
        f"bare {bare.startup_s * 1000:.0f} ms "
        f"(agentlab's speech process, started at start only with VOICE_PRELOAD, settled {speech_settle:.1f} s later)"
    )
    print(
        "  Note: the fakes answer with zero latency, so this ratio is an upper bound on the relative overhead; "
        f"with the real APIs (about 1 s or more per answer) the same +{a.p50 - b.p50:.0f} ms is around 1% of it."
    )
    return {
        "bench": "overhead",
        **info,
        "messages": MESSAGES,
        "warmup": WARMUP,
        "rounds": ROUNDS,
        "gap_ms": GAP_SECONDS * 1000,
        "fakes_in_process": fakes_in_process,
        "database": "populated" if populated else "fresh",
        "anthropic_fake_own_process_ms": None if own_process_ms is None else round(own_process_ms, 3),
        "anthropic_fake_own_process_ms_by_kind": {
            kind: None if ms is None else round(ms, 3) for kind, ms in by_kind.items()
        },
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
        "loop_cpu_ms_per_answer": {"agentlab": round(cpu_a, 3), "bare": round(cpu_b, 3)},
        "startup_ms": {"agentlab": round(agentlab.startup_s * 1000, 1), "bare": round(bare.startup_s * 1000, 1)},
        "fake_server_ms": {
            "agentlab": {k: round(v, 3) for k, v in agentlab.server_means().items()},
            "bare": {k: round(v, 3) for k, v in bare.server_means().items()},
        },
    }


if __name__ == "__main__":
    args = parse_args(
        __doc__.splitlines()[0],
        ("--fakes-in-process", "both fakes as threads of this process (the method before 2026-11-24)"),
        ("--fresh-only", "measure the fresh database only (not the populated one)"),
    )
    figures = asyncio.run(main(args.fakes_in_process, args.fresh_only))
    if args.json:
        emit_json(figures)
