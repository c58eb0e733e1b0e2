"""Bounds that hold by construction, measured: what the hostile inputs they bound cost the bot's event loop.

- A CLAUDE.md of 15,000 `@imports` that resolve to nothing (160 KB, under the 256 KB a file may have): the characters
  the worker's first turn gets of the repository's instructions (REPO_INSTRUCTIONS_MAX_CHARS = 2,000) and the
  longest the event loop was blocked while they were read (`RepoRules.for_task` on a real git repository).
- `schedule_task(cron="59 23 31 2,4,6,9,11 *")`, a cron that never fires: the longest block of the event loop while
  the timing is checked (`parse_when`).

The longest block is the largest gap a 1 ms ticker on the same loop saw (median of 5 runs).

Run: .venv/bin/python bench/bounds.py [--json]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core.errors import ToolError  # noqa: E402
from agents.work.repo_rules import RepoRules  # noqa: E402
from agents.work.schedule_timing import parse_when  # noqa: E402

RUNS = 5


async def longest_block(work: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    """`work`'s result and the largest gap between two ticks of a 1 ms ticker meanwhile (seconds)."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = loop.time()
        while not done:
            await asyncio.sleep(0.001)
            now = loop.time()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    try:
        result = await work()
    finally:
        done = True
        await ticking
    return result, max(gaps, default=0.0)


def flood_repo(path: Path) -> str:
    path.mkdir()
    imports = " ".join(f"@gone/{i}.md" for i in range(15_000))
    (path / "CLAUDE.md").write_text(f"RULES\n\n{imports}\n")
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*ident, "commit", "-qm", "flood"]):
        subprocess.run(["git", *args], cwd=path, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True, text=True).stdout


async def never_firing_cron() -> str:
    try:
        parse_when("59 23 31 2,4,6,9,11 *", None, None, ZoneInfo("Europe/Berlin"), datetime.now(UTC))
    except ToolError as err:
        return str(err)
    return "accepted"


async def main() -> None:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-bounds-") as folder:
        repo = Path(folder) / "flood"
        commit = flood_repo(repo).strip()
        chars, blocks = 0, []
        for _ in range(RUNS):
            found, block = await longest_block(lambda: RepoRules(2000).for_task(repo, commit, "tidy"))
            chars = len(found.text)
            blocks.append(block)
        figures["guidance_chars"], figures["guidance_block_ms"] = chars, statistics.median(blocks) * 1000
        print("CLAUDE.md of 15,000 unresolvable @imports, REPO_INSTRUCTIONS_MAX_CHARS=2000:")
        block = figures["guidance_block_ms"]
        print(f"  first turn's instructions {chars:,} characters; event loop blocked {block:.0f} ms")
    blocks = []
    said = ""
    for _ in range(RUNS):
        said, block = await longest_block(never_firing_cron)
        blocks.append(block)
    figures["cron_block_ms"] = statistics.median(blocks) * 1000
    print("schedule_task(cron='59 23 31 2,4,6,9,11 *'):")
    print(f"  event loop blocked {figures['cron_block_ms']:.0f} ms; answer: {said}")
    if "--json" in sys.argv:
        print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
