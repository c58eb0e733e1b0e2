"""What tracing a red test costs: the base run that says which functions a red test calls (agents/verify/tracer.py).

A fix task's red tests are run again at the base commit, traced, so the verdict knows what each of them runs. The
run is a real pytest run of the bot's own Python (`run_tests` with `trace=True`, not sandboxed: the sandbox's cost is
bench/sandbox.py's), on a suite whose collection imports a package of 60 modules of 40 functions each (what a real
project's test collection imports), with one red test named. Figures: the median wall time of the traced run and of
the same run untraced, alternating, and the difference (what the tracer adds).

Run: .venv/bin/python bench/traced_run.py [--json] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.verify.suite_env import detect_environment
from agents.verify.suite_run import run_tests

MODULES, FUNCTIONS, TEST_FILES = 60, 40, 20
RED = "tests/test_00.py::test_red"


def suite(root: Path) -> Path:
    """The fixture: `pkg` (MODULES modules, each calling its functions once at import), TEST_FILES test files."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("".join(f"from pkg import m{i}\n" for i in range(MODULES)))
    for i in range(MODULES):
        body = "".join(f"def f{j}(x):\n    return x + {j}\n\n\n" for j in range(FUNCTIONS))
        body += f"TOTAL = sum(globals()['f' + str(j)](1) for j in range({FUNCTIONS}))\n"
        (root / "pkg" / f"m{i}.py").write_text(body)
    (root / "tests").mkdir()
    for n in range(TEST_FILES):
        red = "def test_red():\n    assert pkg.m0.f1(1) == 3\n\n\n" if n == 0 else ""
        (root / "tests" / f"test_{n:02d}.py").write_text(
            f"import pkg\n\n\n{red}def test_green():\n    assert pkg.m{n}.f0(1) == 1\n"
        )
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\ntestpaths = ['tests']\n")
    return root


async def one(root: Path, trace: bool) -> float:
    env = detect_environment(root)
    assert env is not None
    started = time.perf_counter()
    outcome = await run_tests(root, 120, environment=env, ids=[RED], trace=trace)
    took = time.perf_counter() - started
    assert outcome.cases == {RED: "failed"}, outcome.output[-2000:]
    if trace:
        assert "pkg/m0.py::f1" in outcome.traced.get(RED, []), outcome.traced
    return took


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = suite(Path(folder) / "project")
        await one(root, True)  # bytecode written, caches warm
        traced, plain = [], []
        for _ in range(args.runs):
            traced.append(await one(root, True))
            plain.append(await one(root, False))
    figures = {
        "traced_ms": round(statistics.median(traced) * 1000),
        "untraced_ms": round(statistics.median(plain) * 1000),
    }
    figures["tracer_adds_ms"] = figures["traced_ms"] - figures["untraced_ms"]
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"one red test of {TEST_FILES} files importing {MODULES}×{FUNCTIONS} functions, median of {args.runs}:")
        for key, value in figures.items():
            print(f"  {key:16} {value} ms")


if __name__ == "__main__":
    asyncio.run(main())
