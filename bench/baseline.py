"""What the kept base run saves: the time from "worker done" to the verdict, first task vs second task on one base.

Every task compares its tests with the same tests at its base commit. The first task on a commit runs the suite
there (in a throw-away copy, started with the task, beside the worker); its outcome is kept in the store, keyed by
commit, command, `.agentlab.toml` and the environment's identity, and a second task on the same base reuses it.
Measured with the real machinery (`TaskTests` with `BaselineRuns` and `KeptBaseRuns` on a real store): a stand-in
worker adds a file and works for WORKER_SECONDS (an asyncio sleep; the base run goes on beside it), then the task's
checks run (the suite after the worker, in a clean room of the task's commit: a fresh export of it, the comparison,
the verdict). "Worker done → verdict" is what the user waits on after the worker's last word; "whole task" is the
task's wall time, the figure the clean room must not raise by more than about 10%. Each round starts from an empty
store, so its first task runs the base.

Fixtures, sized like two real projects' suites:
- flask-sized: 480 pytest tests in 24 files (the bot's own Python: the workspace has no environment);
- express-sized: 1,200 `node --test` tests in 12 files (an npm test script).

Run: .venv/bin/python bench/baseline.py [--json] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.store.database import Store  # noqa: E402
from agents.verify.base_run_cache import KeptBaseRuns, KeptOutcome  # noqa: E402
from agents.verify.baseline import BaselineRuns  # noqa: E402
from agents.verify.clean_room import clean_room  # noqa: E402
from agents.verify.suite_env import detect_environment  # noqa: E402
from agents.verify.task_tests import TaskTests  # noqa: E402
from bench._harness import emit_json, machine  # noqa: E402
from tests.conftest import git, make_repo  # noqa: E402

WORKER_SECONDS = 0.5
ROUNDS = 3
ROOMS = 10  # clean rooms made and removed, per fixture, for the room's own cost


def flask_sized() -> dict[str, str]:
    files = {
        "app/__init__.py": "",
        "app/routing.py": (
            "def match(rule, path):\n"
            "    parts, given = rule.strip('/').split('/'), path.strip('/').split('/')\n"
            "    if len(parts) != len(given):\n        return None\n"
            "    found = {}\n"
            "    for p, g in zip(parts, given):\n"
            "        if p.startswith('<'):\n            found[p[1:-1]] = g\n"
            "        elif p != g:\n            return None\n"
            "    return found\n"
        ),
        "tests/conftest.py": "",
    }
    for i in range(24):
        body = "from app.routing import match\n\n"
        for j in range(20):
            body += (
                f"def test_rule_{j}():\n"
                f"    for n in range(20):\n"
                f"        assert match('/a/<x>/b{j}', f'/a/{{n}}/b{j}') == {{'x': str(n)}}\n"
                f"    assert match('/a/b', '/a/c') is None\n\n"
            )
        files[f"tests/test_routing_{i}.py"] = body
    return files


def express_sized() -> dict[str, str]:
    files = {
        "package.json": '{"name": "web", "private": true, "scripts": {"test": "node --test"}}\n',
        "lib/route.js": (
            "exports.match = (rule, path) => {\n"
            "  const parts = rule.split('/'), given = path.split('/');\n"
            "  if (parts.length !== given.length) return null;\n"
            "  const found = {};\n"
            "  for (let i = 0; i < parts.length; i++) {\n"
            "    if (parts[i].startsWith(':')) found[parts[i].slice(1)] = given[i];\n"
            "    else if (parts[i] !== given[i]) return null;\n"
            "  }\n  return found;\n};\n"
        ),
    }
    for i in range(12):
        body = "const test = require('node:test');\nconst assert = require('node:assert');\n"
        body += "const { match } = require('../lib/route');\n\n"
        for j in range(100):
            body += (
                f"test('route {j}', () => {{\n"
                f"  for (let n = 0; n < 20; n++) assert.deepStrictEqual(match('/a/:x/b{j}', `/a/${{n}}/b{j}`), "
                f"{{ x: String(n) }});\n}});\n"
            )
        files[f"test/route{i}.test.js"] = body
    return files


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def one_task(
    repo: Path, commit: str, baselines: BaselineRuns, tree: Path
) -> tuple[float, float, float, bool, str]:
    """(worker done → verdict, whole task, CPU seconds of its test runs, base reused, the verdict's line) of one
    harmless task."""
    git(repo, "worktree", "add", "-q", "--detach", str(tree), commit)
    cpu = children_cpu()
    started = time.perf_counter()
    checks = await TaskTests.start(repo, tree, commit, "Add a note.", baselines, 600)
    (tree / "NOTE.md").write_text("a note\n")
    await asyncio.sleep(WORKER_SECONDS)
    git(tree, "add", "-A")  # the bot commits the worker's turn before its checks (they judge committed content)
    git(tree, "commit", "-qm", "a note")
    done = time.perf_counter()
    verdict = await checks.check(tree, git(tree, "rev-parse", "HEAD").strip())
    ended = time.perf_counter()
    cpu = children_cpu() - cpu
    checks.close()
    git(repo, "worktree", "remove", "--force", str(tree))
    assert verdict.after.status.value == "passed", verdict.after.summary
    return ended - done, ended - started, cpu, isinstance(verdict.base, KeptOutcome), verdict.line()


async def room_cost(repo: Path, commit: str, folder: Path) -> float:
    """Median milliseconds to make and remove one clean room of `commit` (what each check adds)."""
    env = detect_environment(repo)
    assert env is not None
    times = []
    for _ in range(ROOMS):
        started = time.perf_counter()
        async with clean_room(repo, commit, env, folder):
            pass
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def bench(name: str, files: dict[str, str], rounds: int, figures: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / name, files)
        commit = git(repo, "rev-parse", "HEAD").strip()
        waits: dict[str, list[float]] = {"first": [], "second": []}
        totals: dict[str, list[float]] = {"first": [], "second": []}
        cpus: dict[str, list[float]] = {"first": [], "second": []}
        reused = {"first": 0, "second": 0}
        line = ""
        for round_ in range(rounds):
            store = await Store.open(Path(tmp) / f"state-{round_}.db")  # empty: the round's first task runs the base
            baselines = BaselineRuns(Path(tmp) / "runs", KeptBaseRuns(store))
            for label in ("first", "second"):
                wait, total, cpu, was_reused, line = await one_task(repo, commit, baselines, Path(tmp) / f"t-{label}")
                waits[label].append(wait)
                cpus[label].append(cpu)
                totals[label].append(total)
                reused[label] += was_reused
            await store.close()
            shutil.rmtree(Path(tmp) / "runs", ignore_errors=True)
        row = {
            "first_wait_s": statistics.median(waits["first"]),
            "second_wait_s": statistics.median(waits["second"]),
            "first_total_s": statistics.median(totals["first"]),
            "second_total_s": statistics.median(totals["second"]),
            "first_cpu_s": statistics.median(cpus["first"]),
            "second_cpu_s": statistics.median(cpus["second"]),
            "first_base_runs": rounds - reused["first"],
            "second_base_runs": rounds - reused["second"],
            "rounds": rounds,
        }
        row["clean_room_ms"] = await room_cost(repo, commit, Path(tmp) / "rooms")
        figures[name] = row
        print(
            f"{name:<14} worker done → verdict: first task {row['first_wait_s']:5.2f} s · second task "
            f"{row['second_wait_s']:5.2f} s | whole task (worker {WORKER_SECONDS:g} s): {row['first_total_s']:5.2f} s "
            f"→ {row['second_total_s']:5.2f} s | CPU of the test runs {row['first_cpu_s']:5.2f} s → "
            f"{row['second_cpu_s']:5.2f} s | base runs: first tasks {row['first_base_runs']}/{rounds}, "
            f"second tasks {row['second_base_runs']}/{rounds}",
            flush=True,
        )
        print(f"{'':<14} {line}", flush=True)
        print(f"{'':<14} one clean room (export of the commit, borrowed links, removal): {row['clean_room_ms']:.0f} ms")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    figures: dict = {}
    print(f"median of {args.rounds} rounds (each: a first and a second task on one base); {machine()}")
    await bench("flask-sized", flask_sized(), args.rounds, figures)
    if shutil.which("node"):
        await bench("express-sized", express_sized(), args.rounds, figures)
    else:
        print("express-sized: skipped (node is not installed)")
    if args.json:
        emit_json({"bench": "baseline", "machine": machine(), "worker_s": WORKER_SECONDS, **figures})


if __name__ == "__main__":
    asyncio.run(main())
