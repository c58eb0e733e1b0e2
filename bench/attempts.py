"""Attempts: "try three ways" against one try. Wall time from the request to the summary, memory and git processes.

The real bot (fake Telegram and Anthropic servers on loopback, real git, real pytest in the sandbox) on the buggy calc
workspace (`add` subtracts; `test_add` fails at the base). Each worker Messages call takes MODEL_SECONDS, like a fast
real model. With three attempts, attempt 2 fixes the bug and attempts 1 and 3 change it wrongly, get one correction
(MAX_CORRECTIONS=1) and end ✗; the single try plays attempt 1's part, the slowest of the three (first turn, report,
correction, each with a test run). Figures, each the median of RUNS runs, a fresh bot and workspace per run:
- wall seconds from the request to the summary (three attempts: the group's one summary; one try: its summary), and
  the three attempts' wall time over the single try's (the goal: within 15 %, not the sum);
- the bot's peak memory during a run, its own process and every process under it (sandboxes, pytest, git), above
  its memory just before the request, per attempt;
- git processes the bot started per attempt (every `git` the bot's asyncio code ran during the run, divided by N).

Run: .venv/bin/python bench/attempts.py [--json]
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._harness import (  # noqa: E402
    agentlab_settings,
    emit_json,
    machine,
    parse_args,
    quiet_logging,
    running_fakes,
)
from tests.conftest import CALC_BUGGY, USER_ID, make_repo, start_bot  # noqa: E402
from tests.fakes import anthropic_server as claude_says  # noqa: E402
from tests.scripted import RoleScript  # noqa: E402

MODEL_SECONDS = 1.0
RUNS = 3
ATTEMPT = re.compile(r"attempt (\d) of (\d)")
EDITS = {1: "a * b", 2: "a + b", 3: "abs(a - b)"}


def worker(body: dict[str, Any]) -> dict[str, Any]:
    """Every attempt's part (a single try plays attempt 1): its own first edit, a report, words for a correction."""
    content = body["messages"][0]["content"]
    first = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
    found = ATTEMPT.search(first)
    number = int(found.group(1)) if found else 1
    said = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if said == 0:
        edit = {"path": "calc.py", "old": "a - b", "new": EDITS[number]}
        return claude_says.tool_use("edit_file", edit, delay=MODEL_SECONDS)
    return claude_says.text(f"Attempt {number}: done.", delay=MODEL_SECONDS)


def tree_rss_kb(root: int) -> int:
    """Resident memory of `root` and every process under it (kB), from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        found = re.search(r"VmRSS:\s+(\d+)", status)
        rss[int(entry)] = int(found.group(1)) if found else 0
    total, wanted = 0, {root}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in wanted and pid not in wanted:
                wanted.add(pid)
                changed = True
    for pid in wanted:
        total += rss.get(pid, 0)
    return total


async def one_run(size: int, tmp: Path) -> dict[str, float]:
    from telegram_bot.app import stop_application

    (tmp / "workspaces").mkdir()
    make_repo(tmp / "workspaces" / "calc", CALC_BUGGY)
    git_runs = 0
    spawn = asyncio.create_subprocess_exec

    async def counted(program: Any, *args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        nonlocal git_runs
        if str(program) == "git":
            git_runs += 1
        return await spawn(program, *args, **kwargs)

    with running_fakes() as (tg, claude):
        model = RoleScript()
        claude.handler = model
        settings = agentlab_settings(tg, claude, tmp, max_corrections=1, max_concurrent_tasks=3)
        bot = await start_bot(settings, tg, claude)
        try:
            await bot.runtime.start_up_done()
            arguments = {"workspace": "calc", "worker": "code", "instructions": "Fix the bug in calc.py."}
            arguments |= {"background": True, "attempts": size} if size > 1 else {"background": True}
            model.add("orchestrator", claude_says.tool_use("start_task", arguments), claude_says.text("Started."))
            model.add("code", *[worker] * (3 * size))
            idle = tree_rss_kb(os.getpid())
            peak = idle
            asyncio.create_subprocess_exec = counted  # type: ignore[assignment]  # counts the git the bot runs
            started = time.monotonic()
            tg.send_text(USER_ID, "try three ways to fix calc" if size > 1 else "fix calc")
            wanted = "Attempts #1: 3 ways" if size > 1 else "Files:"
            while not any(wanted in (m.text or "") for m in tg.messages(USER_ID)):
                peak = max(peak, tree_rss_kb(os.getpid()))
                await asyncio.sleep(0.1)
            wall = time.monotonic() - started
        finally:
            asyncio.create_subprocess_exec = spawn  # type: ignore[assignment]  # the original back
            await stop_application(bot.app)  # type: ignore[arg-type]  # BotHarness keeps the PTB Application as an object
    return {"wall": wall, "peak_mb_per_attempt": (peak - idle) / 1024 / size, "git_per_attempt": git_runs / size}


async def main() -> dict[str, Any]:
    import tempfile

    results: dict[int, list[dict[str, float]]] = {1: [], 3: []}
    for _ in range(RUNS):
        for size in (1, 3):
            with tempfile.TemporaryDirectory(prefix="agentlab-bench-attempts-") as folder:
                results[size].append(await one_run(size, Path(folder)))

    def median(size: int, key: str) -> float:
        return round(statistics.median(r[key] for r in results[size]), 2)

    figures = {
        "single_wall_s": median(1, "wall"),
        "three_wall_s": median(3, "wall"),
        "three_over_single": round(median(3, "wall") / median(1, "wall"), 3),
        "single_peak_mb": median(1, "peak_mb_per_attempt"),
        "three_peak_mb_per_attempt": median(3, "peak_mb_per_attempt"),
        "single_git_processes": median(1, "git_per_attempt"),
        "three_git_processes_per_attempt": median(3, "git_per_attempt"),
    }
    print(f"machine: {machine()}")
    print(f"worker model calls take {MODEL_SECONDS} s; median of {RUNS} runs each")
    print(
        f"  wall, request to summary: one try {figures['single_wall_s']} s, three attempts "
        f"{figures['three_wall_s']} s ({figures['three_over_single']:.2f}× the slowest single attempt; goal ≤ 1.15)"
    )
    print(
        f"  peak memory above idle (bot + its processes): one try {figures['single_peak_mb']} MB, three attempts "
        f"{figures['three_peak_mb_per_attempt']} MB per attempt"
    )
    print(
        f"  git processes: one try {figures['single_git_processes']}, three attempts "
        f"{figures['three_git_processes_per_attempt']} per attempt"
    )
    return figures


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0])
    quiet_logging()
    figures = asyncio.run(main())
    if args.json:
        emit_json(figures)
