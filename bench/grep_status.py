"""/status response time while a worker greps with the worst regexes we know, against the loopback fakes.

A code worker (scripted model) runs `grep` in a loop with catastrophic-backtracking patterns (`(a+)+$` and friends)
over a workspace holding lines of 31 `a`s and a `!`, a 100,000-character line of `a`s and a 4 MB file. Python's
`re` would hold the interpreter lock for minutes on the first one; ripgrep (agents/tools/ripgrep.py) runs each in its
own process. Meanwhile the owner sends /status again and again; printed: the /status latencies and each grep's duration.

Run: .venv/bin/python bench/grep_status.py
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

from agents.core.models import Caller

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._harness import LatencySummary  # noqa: E402
from telegram_bot.app import stop_application  # noqa: E402
from tests.conftest import USER_ID, make_repo, make_settings, start_bot  # noqa: E402
from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.scripted import RoleScript  # noqa: E402

PATTERNS = [r"(a+)+$", r"(a|aa)+$", r"(\w+\s?)*!x$", r"(.*a){25}x", r"^(([a-z])+.)+[A-Z]([a-z])+$"]
ROUNDS = 8  # each pattern this many times
STATUS_SAMPLES = 40


async def main() -> None:
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp, FakeTelegram() as tg, FakeAnthropic() as claude:
        tmp_path = Path(tmp)
        root = tmp_path / "workspaces"
        root.mkdir()
        make_repo(
            root / "evil",
            {"evil.txt": ("a" * 31 + "!\n") * 50 + "a" * 100_000 + "!\n", "big.txt": ("a" * 79 + "\n") * 50_000},
        )
        model = RoleScript()
        claude.handler = model
        model.add(
            "code",
            *[claude_says.tool_use("grep", {"pattern": p}) for _ in range(ROUNDS) for p in PATTERNS],
            claude_says.text("done grepping"),
        )
        bot = await start_bot(make_settings(tg, claude, tmp_path, root), tg, claude)
        try:
            await bot.runtime.crew.races.start_task(
                Caller(chat_id=USER_ID), "evil", "code", "grep with evil patterns", background=True
            )
            while not await bot.runtime.store.tool_calls(task_id=1):
                await asyncio.sleep(0.01)
            samples: list[float] = []
            for _ in range(STATUS_SAMPLES):
                seen = len([m for m in tg.messages(USER_ID) if "Active tasks" in (m.text or "")])
                started = time.perf_counter()
                tg.send_command(USER_ID, "/status")
                await tg.await_for(
                    lambda seen=seen: len([m for m in tg.messages(USER_ID) if "Active tasks" in (m.text or "")]) > seen,
                    timeout=120,
                )
                samples.append((time.perf_counter() - started) * 1000)
                await asyncio.sleep(0.05)
            greps_during = len(await bot.runtime.store.tool_calls(task_id=1))
            while not (await bot.runtime.store.get_task(1)).status.is_final:
                await asyncio.sleep(0.05)
            calls = await bot.runtime.store.tool_calls(task_id=1)
            print(f"/status while the worker greps ({greps_during} greps done during the {STATUS_SAMPLES} samples):")
            print("  " + LatencySummary.of(samples).line())
            by_pattern: dict[str, list[int]] = {}
            for call in calls:
                by_pattern.setdefault(call.arguments, []).append(call.duration_ms)
            print("grep durations (ms) per pattern, over evil.txt + big.txt (4 MB):")
            for args, durations in by_pattern.items():
                print(
                    f"  {args[:60]:60s} max {max(durations):5d}  mean {sum(durations) / len(durations):7.1f}"
                    f"  errors {sum(1 for c in calls if c.arguments == args and c.error)}"
                )
        finally:
            await stop_application(bot.app)


if __name__ == "__main__":
    asyncio.run(main())
