"""The cost of the sandbox (issue 11): a trivial command and a small real test-suite run, with and without bubblewrap.

Both go through `agents.tools.shell.run_command`, the way worker commands and the bot's test runs do; the two variants
alternate in the same run so load drift hits both alike. Figures: p50/p95 of `true` over 200 runs each, and the
median of 5 runs of a 20-test pytest suite each. Target: ≤ 15 ms added per command.

Run: .venv/bin/python bench/sandbox.py [--json]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.tools.sandbox import spec_for, unavailable_reason
from agents.tools.shell import run_command

RUNS = 200
SUITE_RUNS = 5
TARGET_MS = 15.0
SUITE = "\n".join(f"def test_{i}():\n    assert sum(range({i})) == {i * (i - 1) // 2}\n" for i in range(20))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(command: str, cwd: Path, sandboxed: bool, timeout: float = 120) -> float:
    started = time.perf_counter()
    result = await run_command(command, cwd=cwd, timeout=timeout, sandbox=spec_for(cwd) if sandboxed else None)
    elapsed = (time.perf_counter() - started) * 1000
    if not result.ok:
        raise SystemExit(f"{command!r} failed ({'sandbox' if sandboxed else 'plain'}): {result.output[-500:]}")
    return elapsed


async def main() -> dict:
    if reason := await unavailable_reason():
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-sandbox-") as folder:
        root = Path(folder)
        (root / "test_suite.py").write_text(SUITE)
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(5):  # warm-up
            for sandboxed in (False, True):
                await timed("true", root, sandboxed)
        for _ in range(RUNS):
            for sandboxed in (False, True):
                times[sandboxed].append(await timed("true", root, sandboxed))
        suite: dict[bool, list[float]] = {False: [], True: []}
        pytest = f"{sys.executable} -m pytest -q -p no:cacheprovider test_suite.py"
        for _ in range(SUITE_RUNS):
            for sandboxed in (False, True):
                suite[sandboxed].append(await timed(pytest, root, sandboxed))
    figures = {
        "plain_p50_ms": percentile(times[False], 0.5),
        "plain_p95_ms": percentile(times[False], 0.95),
        "sandbox_p50_ms": percentile(times[True], 0.5),
        "sandbox_p95_ms": percentile(times[True], 0.95),
        "suite_plain_ms": statistics.median(suite[False]),
        "suite_sandbox_ms": statistics.median(suite[True]),
    }
    figures["added_p50_ms"] = figures["sandbox_p50_ms"] - figures["plain_p50_ms"]
    figures["added_p95_ms"] = figures["sandbox_p95_ms"] - figures["plain_p95_ms"]
    print(f"trivial command (`true`, {RUNS} runs each, interleaved)")
    print(f"  plain    p50 {figures['plain_p50_ms']:6.1f} ms   p95 {figures['plain_p95_ms']:6.1f} ms")
    print(f"  sandbox  p50 {figures['sandbox_p50_ms']:6.1f} ms   p95 {figures['sandbox_p95_ms']:6.1f} ms")
    print(
        f"  added    p50 {figures['added_p50_ms']:6.1f} ms   p95 {figures['added_p95_ms']:6.1f} ms "
        f"(target ≤ {TARGET_MS:g} ms: {'met' if figures['added_p50_ms'] <= TARGET_MS else 'NOT met'} at p50)"
    )
    print(f"pytest, 20 tests (median of {SUITE_RUNS})")
    print(
        f"  plain {figures['suite_plain_ms']:.0f} ms · sandbox {figures['suite_sandbox_ms']:.0f} ms · "
        f"added {figures['suite_sandbox_ms'] - figures['suite_plain_ms']:.0f} ms"
    )
    return figures


if __name__ == "__main__":
    result = asyncio.run(main())
    if "--json" in sys.argv[1:]:
        print(json.dumps({"bench": "sandbox", **result}))
