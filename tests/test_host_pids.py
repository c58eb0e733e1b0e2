"""`host_pids`, the tests' view of what a task left running: this test process's processes (whatever ran in between,
a sandbox or a sandboxed pytest), and orphans that no test run holds; never another test run's processes with the
same port or script in their command line (an xdist worker beside this one, a second suite on the same machine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.processes import host_pids, own_sleep

WORKER_START = "import sys;exec(eval(sys.stdin.readline()))"  # how xdist starts a worker (execnet's bootstrap)


def _every_pid(argument: str) -> list[int]:
    """Every process on the host with `argument` among its arguments, whoever started it."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if argument.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _until(check: Callable[[], list[int]], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "not true within the time allowed"
        time.sleep(0.02)
    return found


def _detached(argv: list[str], line: str | None = None) -> None:
    """Start `argv` from a short-lived launcher, so that it is reparented away from this process (as a process of
    another test run, or an escapee, is): `line` is written to its standard input."""
    launcher = (
        "import subprocess, sys; "
        f"p = subprocess.Popen({argv!r}, stdin=subprocess.PIPE, start_new_session=True); "
        f"p.stdin.write({(line or '').encode()!r}); p.stdin.close()"
    )
    subprocess.run([sys.executable, "-c", launcher], check=True, timeout=30)


@pytest.fixture
def marks() -> Iterator[dict[str, str]]:
    names = ("other-run", "orphan", "child", "under-a-pytest")
    marks = {name: own_sleep(f"{n}1") for n, name in enumerate(names, start=1)}  # digits: `sleep` reads a number
    yield marks
    for mark in marks.values():
        for pid in _every_pid(mark):
            os.kill(pid, signal.SIGKILL)


def test_another_test_runs_processes_are_left_out_and_orphans_and_our_own_are_kept(marks: dict[str, str]) -> None:
    sleep_in = "import subprocess; subprocess.run(['sleep', {!r}])"
    # a process of another test run: its worker (started as xdist starts one) is no descendant of this process
    _detached([sys.executable, "-u", "-c", WORKER_START], repr(sleep_in.format(marks["other-run"])) + "\n")
    # an orphan that no test run holds (what a sandbox's escapee would be): it may be this test's, so it counts
    _detached(["sleep", marks["orphan"]])
    # this process's own child, and a sleeper under a pytest that this process started (as the bot's test runs are)
    own = subprocess.Popen(["sleep", marks["child"]])
    under = subprocess.Popen(
        [sys.executable, "-c", sleep_in.format(marks["under-a-pytest"]), "-m", "pytest"], start_new_session=True
    )
    try:
        other = _until(lambda: _every_pid(marks["other-run"]))
        _until(lambda: _every_pid(marks["orphan"]) and _every_pid(marks["under-a-pytest"]))
        assert host_pids(marks["other-run"]) == [], f"{other} belongs to another test run"
        assert host_pids(marks["orphan"]) == _every_pid(marks["orphan"])
        assert host_pids(marks["child"]) == [own.pid]
        assert host_pids(marks["under-a-pytest"]) == _every_pid(marks["under-a-pytest"])
    finally:
        for process in (own, under):
            process.kill()
            process.wait()
