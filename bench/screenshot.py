"""The frontend worker's `screenshot` (desktop and phone) in a task's sandbox: CPU seconds and wall seconds of one
Chromium taking both pictures (what the tool does) against one Chromium per picture (what it did before).

CPU is that of every process the screenshot starts (bwrap, the driver, Chromium and its children), read from a cgroup-v1
`cpuacct` group the bench moves itself into (run as root where that controller is mounted, as
tests/support/cpu_seconds.py does); elsewhere from `getrusage`, which misses what the sandbox does not hand back. The
two ways are interleaved; median over the runs.

Run: .venv/bin/python bench/screenshot.py [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core.secrets_filter import SecretsFilter  # noqa: E402
from agents.sandbox.bwrap import SandboxProbe, spec_for  # noqa: E402
from agents.tools.screenshot import VIEWPORTS, capture_all, find_chromium  # noqa: E402

PAGE = "<!doctype html><html><body><h1>Shop</h1><p>Everything half price.</p></body></html>\n"


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def cpu_counter() -> Callable[[], float]:
    """CPU seconds of this process and everything it starts, from now on."""
    group = CPUACCT / f"bench-screenshot-{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
        atexit.register(leave, group)
        return lambda: int((group / "cpuacct.usage").read_text()) / 1e9
    except OSError:

        def rusage() -> float:
            own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

        return rusage


def leave(group: Path) -> None:
    with contextlib.suppress(OSError):
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()


cpu_now = cpu_counter()


async def measure(take: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    cpu, wall = cpu_now(), time.monotonic()
    await take()
    return cpu_now() - cpu, time.monotonic() - wall


async def main(runs: int) -> dict[str, dict[str, float]]:
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no Chromium here (Debian: apt install chromium)")
    with tempfile.TemporaryDirectory(prefix="bench-shot-") as tmp:
        root = Path(tmp)
        (root / "index.html").write_text(PAGE)
        sandbox = spec_for(SecretsFilter(), SandboxProbe(), root)
        shots = [((root / "index.html").as_uri(), width, height) for width, height in VIEWPORTS.values()]

        async def one_chromium() -> object:
            return await capture_all(chromium, shots, sandbox=sandbox)

        async def chromium_per_picture() -> object:
            return [await capture_all(chromium, [shot], sandbox=sandbox) for shot in shots]

        ways = {"one Chromium for both pictures": one_chromium, "one Chromium per picture": chromium_per_picture}
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        await one_chromium()  # warm the page cache: neither way pays for the first read of Chromium's files
        for _ in range(runs):
            for name, take in ways.items():
                figures[name].append(await measure(take))
    return {
        name: {
            "cpu_s": statistics.median(cpu for cpu, _ in rows),
            "wall_s": statistics.median(wall for _, wall in rows),
        }
        for name, rows in figures.items()
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args.runs))
    for name, row in result.items():
        print(f"{name:32} CPU {row['cpu_s']:.2f} s   wall {row['wall_s']:.2f} s   (median of {args.runs})")
    if args.json:
        print(json.dumps(result))
