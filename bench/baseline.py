"""Time the base-commit test run adds to a task, cached and not.

A task's test phase is timed with the real machinery (`TaskTests`: environment detection, the baseline run in a
throw-away copy of the base commit started when the task starts, the run after the worker, the comparison) while a
stand-in worker works for W seconds (an asyncio sleep: the baseline runs in parallel with it). Three ways:
- without a baseline: the worker, then the tests (what a task cost without the base-commit run);
- baseline not cached: a fresh base commit every time (the cache directory is emptied);
- baseline cached: a consecutive task on the same commit.
Workspace: the small calc repository of the worker end-to-end benches, and a 300-test suite. The machine is shared,
so the test runs themselves are noisy: "time outside the after-run" (wall time minus the worker and minus the
after-run's own duration) isolates what the baseline machinery adds around it.

Run: .venv/bin/python bench/baseline.py [--json]
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.verify.task_tests import TaskTests  # noqa: E402
from agents.verify.test_baseline import BaselineRuns  # noqa: E402
from agents.verify.test_env import detect_environment  # noqa: E402
from agents.verify.test_runner import run_tests  # noqa: E402
from bench._harness import SMALL_REPO, emit_json, machine, parse_args  # noqa: E402
from tests.conftest import git, make_repo  # noqa: E402

REPEATS = 5
WORKER_SECONDS = (0.0, 5.0)
BIG_SUITE = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    **{
        f"tests/test_mod{i}.py": "from calc import add\n\n"
        + "".join(f"def test_{j}():\n    assert add({j}, 1) == {j + 1}\n\n" for j in range(30))
        for i in range(10)
    },
}


async def without_baseline(repo: Path, worker: float) -> tuple[float, float]:
    started = time.perf_counter()
    await asyncio.sleep(worker)
    env = detect_environment(repo)
    after = await run_tests(repo, 600, environment=env)
    return time.perf_counter() - started, after.duration


async def with_baseline(repo: Path, cache: BaselineRuns, worker: float) -> tuple[float, float]:
    commit = git(repo, "rev-parse", "HEAD").strip()
    started = time.perf_counter()
    checks = await TaskTests.start(repo, repo, commit, "bench", cache, 600)
    await asyncio.sleep(worker)
    verdict = await checks.check(repo)
    checks.close()
    assert verdict.after.status.value == "passed", verdict.after.summary
    return time.perf_counter() - started, verdict.after.duration


async def bench(name: str, files: dict[str, str], figures: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / name, files)
        cache_dir = Path(tmp) / "baselines"
        cache = BaselineRuns(cache_dir)
        for worker in WORKER_SECONDS:
            plain, cold, warm = [], [], []
            outside = {"plain": [], "uncached": [], "cached": []}  # wall time minus worker minus the after-run
            for _ in range(REPEATS):
                for label, runs, measure in (
                    ("plain", plain, lambda w=worker: without_baseline(repo, w)),
                    ("uncached", cold, lambda w=worker: with_baseline(repo, cache, w)),
                    ("cached", warm, lambda w=worker: with_baseline(repo, cache, w)),
                ):
                    if label == "uncached":
                        shutil.rmtree(cache_dir, ignore_errors=True)
                    total, after = await measure()
                    runs.append(total)
                    outside[label].append(total - worker - after)
            row = {
                "plain_s": statistics.median(plain),
                "uncached_s": statistics.median(cold),
                "cached_s": statistics.median(warm),
                "outside_run_plain_s": statistics.median(outside["plain"]),
                "outside_run_uncached_s": statistics.median(outside["uncached"]),
                "outside_run_cached_s": statistics.median(outside["cached"]),
            }
            row["added_uncached_s"] = row["uncached_s"] - row["plain_s"]
            row["added_cached_s"] = row["cached_s"] - row["plain_s"]
            figures[f"{name} worker={worker:g}s"] = row
            print(
                f"{name:<10} worker {worker:>4.1f} s | no baseline {row['plain_s']:6.2f} s | "
                f"uncached {row['uncached_s']:6.2f} s (+{row['added_uncached_s']:5.2f} s, "
                f"{100 * row['added_uncached_s'] / row['plain_s']:+5.1f}%) | cached {row['cached_s']:6.2f} s "
                f"(+{row['added_cached_s']:5.2f} s, {100 * row['added_cached_s'] / row['plain_s']:+5.1f}%)",
                flush=True,
            )
            print(
                f"{'':<10} {'':>13} | time outside the after-run (worker excluded): no baseline "
                f"{row['outside_run_plain_s']:5.2f} s · uncached {row['outside_run_uncached_s']:5.2f} s · cached "
                f"{row['outside_run_cached_s']:5.2f} s",
                flush=True,
            )


async def main() -> None:
    args = parse_args(__doc__)
    figures: dict = {}
    print(f"median of {REPEATS} runs each; {machine()}")
    await bench("calc", SMALL_REPO, figures)
    await bench("300 tests", BIG_SUITE, figures)
    if args.json:
        emit_json({"bench": "baseline", "machine": machine(), **figures})


if __name__ == "__main__":
    asyncio.run(main())
