"""A pytest plugin that records each test's CPU seconds (user + system: the test process and every process it starts).

Wall seconds (`--durations`) say little on a shared machine: a test waits longer when other jobs run, but burns the
same CPU. Pass it with `-p tests.support.cpu_seconds` and name a file in `CPU_SECONDS_FILE`; each xdist worker appends
one JSON line per test: {"test": nodeid, "cpu": seconds, "own": the test process's own share of them, "wall": seconds,
"end": epoch seconds, "worker": xdist id},
setup and teardown included (the end times and workers show how busy each worker was, e.g. at the run's tail).

Run as root where the cgroup-v1 `cpuacct` controller is mounted, each pytest process moves into a cgroup of its own,
which every process it starts inherits: a test's CPU is that cgroup's usage while it ran, daemons and orphans
included (pasta, Chromium's renderers, a workspace's test runner killed with its group). Elsewhere it falls back to
`getrusage` (the process and its children that ended and were waited for; an orphan's CPU is lost).

    CPU_SECONDS_FILE=/tmp/cpu.jsonl .venv/bin/python -m pytest -p tests.support.cpu_seconds tests/test_x.py
    .venv/bin/python -m tests.support.cpu_seconds /tmp/cpu.jsonl      # per module, most first
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
_group: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _group
    if not os.environ.get("CPU_SECONDS_FILE") or not (CPUACCT / "cpuacct.usage").exists():
        return
    group = CPUACCT / f"pytest-cpu-{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return
    _group = group


def pytest_unconfigure(config: pytest.Config) -> None:
    if _group is not None:
        with contextlib.suppress(OSError):
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            _group.rmdir()  # fails while a process the tests left behind still lives in it: left for it to end


def cpu_now() -> float:
    if _group is not None:
        return int((_group / "cpuacct.usage").read_text()) / 1e9
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def own_cpu() -> float:
    """The test process's own CPU (every thread of it: the in-process bot, the fakes), no child's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    target = os.environ.get("CPU_SECONDS_FILE")
    cpu, own, wall = cpu_now(), own_cpu(), time.monotonic()
    yield
    if target:
        line = {
            "test": item.nodeid,
            "cpu": round(cpu_now() - cpu, 3),
            "own": round(own_cpu() - own, 3),
            "wall": round(time.monotonic() - wall, 3),
            "end": round(time.time(), 3),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        }
        with open(target, "a") as out:
            out.write(json.dumps(line) + "\n")


def by_module(path: Path) -> dict[str, tuple[float, float, int]]:
    """module -> (CPU seconds, wall seconds, tests) summed from a file the plugin wrote."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for line in path.read_text().splitlines():
        row = json.loads(line)
        entry = sums[row["test"].split("::")[0]]
        entry[0] += row["cpu"]
        entry[1] += row["wall"]
        entry[2] += 1
    return {name: (cpu, wall, int(n)) for name, (cpu, wall, n) in sums.items()}


if __name__ == "__main__":
    modules = by_module(Path(sys.argv[1]))
    for name, (cpu, wall, n) in sorted(modules.items(), key=lambda kv: -kv[1][0]):
        print(f"{cpu:7.1f} cpu {wall:7.1f} wall {n:4d} tests  {name}")
    print(f"{sum(v[0] for v in modules.values()):7.1f} cpu in all")
