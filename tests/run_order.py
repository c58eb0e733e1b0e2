"""The order the suite runs in under pytest-xdist's `worksteal` scheduler, so every worker starts on long tests.

`worksteal` hands each worker one contiguous chunk of the collected list (the first of N items gets N // workers,
the next an equal share of the rest, ...), then lets idle workers steal from the tail of the busiest one. So the list
is built as one share per chunk, each exactly the chunk's length: the heavy modules (seconds per test at least
`HEAVY_SECONDS_PER_TEST`) dealt longest first to the share with the least seconds so far, then light tests filling each
share to its length (a light module may be split between two shares). What is stolen at the end is light.

Modules that pay the same expensive start in each worker that runs them travel together (`TOGETHER`): the whisper
modules (torch and whisper imported, ~2.5 s of CPU in each worker) and the Temporal modules (a dev server per
worker, the SDK's worker machinery). One worker then pays once what three would each pay.

A module's seconds come from `module_seconds.json` (written by `pytest --store-module-seconds`, the summed
setup + call + teardown of its tests) or, for a module not in it, an estimate from its markers. Whole heavy modules
move (a module-scoped fixture is set up once per worker); the order within a module stays. Every worker computes the
same order, as xdist requires.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

SECONDS_FILE = Path(__file__).with_name("module_seconds.json")
HEAVY_SECONDS_PER_TEST = 0.1
ESTIMATE = {"slow": 1.5, "e2e": 1.5, "unit": 0.05}  # seconds per test of a module not in SECONDS_FILE
TOGETHER = (
    ("test_voice.py", "test_voice_e2e.py"),
    (
        "test_temporal_e2e.py",
        "test_schedules_temporal_e2e.py",
        "test_github_temporal_e2e.py",
        "test_temporal_workflow.py",
        "test_runner_guidance_e2e.py",
        "test_attempts_temporal_e2e.py",
        "test_temporal_reports_e2e.py",
        "test_temporal_cancel_e2e.py",
        "test_temporal_budget_e2e.py",
    ),
)


def recorded_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(SECONDS_FILE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def module_seconds(path: Path, tests: list[pytest.Item], recorded: dict[str, float]) -> float:
    if path.name in recorded:
        return recorded[path.name]
    kind = "slow" if tests[0].get_closest_marker("slow") else "e2e" if tests[0].get_closest_marker("e2e") else "unit"
    return ESTIMATE[kind] * len(tests)


def chunk_sizes(total: int, workers: int) -> list[int]:
    """The lengths of the chunks `worksteal` first hands out (xdist's `WorkStealingScheduling.check_schedule`)."""
    sizes, left = [], total
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def run_order(items: list[pytest.Item], workers: int, recorded: dict[str, float] | None = None) -> list[pytest.Item]:
    recorded = recorded_seconds() if recorded is None else recorded
    by_path: dict[Path, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_path[item.path].append(item)
    group_of = {name: group[0] for group in TOGETHER for name in group}
    modules: dict[Path, list[pytest.Item]] = defaultdict(list)  # a module, or the modules that travel together
    seconds: dict[Path, float] = defaultdict(float)
    for path, tests in by_path.items():
        unit = path.with_name(group_of.get(path.name, path.name))
        modules[unit].extend(tests)
        seconds[unit] += module_seconds(path, tests, recorded)
    by_weight = sorted(modules, key=lambda path: -seconds[path])
    heavy = [p for p in by_weight if seconds[p] / len(modules[p]) >= HEAVY_SECONDS_PER_TEST]
    light = [item for p in by_weight if p not in heavy for item in modules[p]]

    sizes = chunk_sizes(len(items), max(1, workers))
    shares: list[list[pytest.Item]] = [[] for _ in sizes]
    loads = [0.0 for _ in sizes]
    for path in heavy:
        fits = [i for i in range(len(sizes)) if len(shares[i]) + len(modules[path]) <= sizes[i]] or range(len(sizes))
        target = min(fits, key=lambda i: loads[i])
        shares[target].extend(modules[path])
        loads[target] += seconds[path]
    for i, size in enumerate(sizes):
        room = max(0, size - len(shares[i]))
        shares[i].extend(light[:room])
        del light[:room]
    shares[-1].extend(light)
    return [item for share in shares for item in share]


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-module-seconds",
        action="store_true",
        help=f"write each module's summed test seconds to {SECONDS_FILE.name} (the run order's weights)",
    )


class SecondsRecorder:
    """Sums each module's setup + call + teardown seconds from the test reports (in xdist's controller, too)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[Path(report.nodeid.split("::")[0]).name] += report.duration

    def pytest_sessionfinish(self) -> None:
        ordered = {name: round(value, 1) for name, value in sorted(self.seconds.items())}
        SECONDS_FILE.write_text(json.dumps(ordered, indent=0) + "\n")
