"""A hostile worker exhausting what the bot or the machine holds, and the bounds that hold it: a plain-folder
worktree's disk budget sees files nested deeper than the walk goes and charges every inode (sixty thousand empty files
are not free), the bot never reads a huge test report or trace file whole, and a git status of long paths costs the
bot memory in proportion to the disk the worker was charged. Sizes are small: what is tested is that a bound exists."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import spec_for
from agents.sandbox.shell import CommandResult, run_command
from agents.sandbox.task_limits import DiskBudget, TaskBounds, allocated_bytes
from tests.support.sandbox import PROBE

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"), reason="needs bubblewrap (bwrap)"
)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """On a disk file system (a RAM one would count files as memory)."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_DISK_TMPDIR"), ignore_cleanup_errors=True) as folder:
        yield Path(folder).resolve()


async def _run_within_budget(root: Path, budget: int, command: str, timeout: float) -> tuple[CommandResult, bool]:
    """`command` run in a task's sandbox of `root` whose disk budget is `budget` bytes; with whether the budget
    counted itself over once the command ended (the task's bounds closed after)."""
    bounds = TaskBounds(f"probe-{os.getpid()}", 1 << 30, 512, DiskBudget(root, budget))
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, root), task=bounds)
    try:
        result = await run_command(command, root, timeout, sandbox=spec)
        return result, await bounds.disk.over(force=True) if bounds.disk is not None else False
    finally:
        await bounds.close()


# ---------------------------------------------------------------------------------------------------------------------
# 1. The disk budget of a plain-folder worktree (no own file system: a bot that is not root): files placed deeper than
#    safe_paths.WALK_DEPTH (512), where the walk does not go, are not hidden: such a folder counts as a gigabyte.


@needs_bwrap
async def test_files_below_the_walk_depth_count_against_the_disk_budget(tmp_path: Path) -> None:
    root = tmp_path / "wt"
    root.mkdir()
    budget = 8 << 20
    deep = "/".join(["d"] * 520)
    # three 6 MB files (each under the 8 MB per-file limit) = 18 MB against an 8 MB budget, then time for two polls
    command = (
        f"mkdir -p {deep} && cd {deep} && for i in 1 2 3; do head -c 6M /dev/urandom > f$i || exit 1; done; "
        "sleep 2; echo ALL''-WRITTEN"
    )
    result, over = await _run_within_budget(root, budget, command, 60)
    # The folder below the walk depth counts as a gigabyte from the moment it exists, so on a busy machine the first
    # poll may stop the command before much is written: what must exist is that folder, not the 18 MB.
    assert (root / deep).is_dir(), f"probe set-up: the deep folder was not made: {result.output[-300:]}"
    held = sum(os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, files in os.walk(root) for f in files)
    assert result.stopped is not None and "ALL-WRITTEN" not in result.output, (
        f"{held >> 20} MB below depth 512 passed an 8 MB budget unseen (over={over}): {result.output[-300:]}"
    )


# ---------------------------------------------------------------------------------------------------------------------
# 2. Empty files and fast symlinks take an inode each and no block: each entry is charged ENTRY_BYTES at least, so a
#    task cannot use up the host file system's inodes within its byte budget.


@needs_bwrap
async def test_inodes_count_against_the_disk_budget(tmp_path: Path) -> None:
    root = tmp_path / "wt"
    root.mkdir()
    budget = 4 << 20
    # 60,000 empty files in 250 folders: ~1 MB of folder blocks, 60,000 inodes (15 MB of inode tables at 256 B each)
    make = (
        "import os\n"
        "for d in range(250):\n"
        "    os.mkdir(f'g{d}')\n"
        "    for f in range(240):\n"
        "        os.close(os.open(f'g{d}/{f}', os.O_CREAT | os.O_WRONLY))\n"
        "print('MADE', flush=True)\n"
        # time for the budget's polls to see them: a stopped command never waits it out, so a wide window costs a
        # passing run nothing (one second was too short for a poll on a loaded machine)
        "import time; time.sleep(10)\n"
        "print('ALL' '-KEPT')\n"
    )
    result, _ = await _run_within_budget(root, budget, f"python3 - <<'EOF'\n{make}EOF", 120)
    files = sum(len(f) for _, _, f in os.walk(root))
    assert result.stopped is not None and files < 60_000, (
        f"{files} inodes were made and kept within a 4 MB budget (counted: {allocated_bytes(root) >> 10} KB): "
        f"{result.output[-300:]}"
    )


# ---------------------------------------------------------------------------------------------------------------------
# 3. The tests write their reports and trace files (up to the per-file limit each): one over MAX_REPORT_BYTES (or
#    MAX_COVERAGE_BYTES) is never read, so the bot holds no such file whole (the run then cannot be judged).


def test_a_huge_junit_report_is_not_read_whole_into_the_bots_memory(tmp_path: Path) -> None:
    from agents.verify.suite_reports import read_junit

    report = tmp_path / "junit.xml"
    with open(report, "wb") as out:
        out.write(b'<?xml version="1.0"?><testsuites><testsuite name="pytest">')
        out.write(b'<testcase classname="t" name="a"><failure message="x">')
        chunk = b"A" * (1 << 20)
        for _ in range(64):  # a 64 MB failure text
            out.write(chunk)
        out.write(b"</failure></testcase></testsuite></testsuites>")
    tracemalloc.start()
    try:
        read_junit(report, tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"reading a 64 MB JUnit report took {peak >> 20} MB of the bot's memory"


def test_huge_trace_files_are_not_read_whole_into_the_bots_memory(tmp_path: Path) -> None:
    from agents.verify.tracer import read_traces

    traces = tmp_path / "trace"
    traces.mkdir()
    entry = '"' + "x" * 4000 + '"'
    with open(traces / "trace-1.json", "w") as out:  # 20,000 distinct 4 KB entries: 80 MB
        out.write('{"t::a": [' + ",".join(f'"{i}{entry[1:]}' for i in range(20_000)) + "]}")
    tracemalloc.start()
    try:
        read_traces(traces)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 48 << 20, f"reading an 80 MB trace file took {peak >> 20} MB of the bot's memory"


# ---------------------------------------------------------------------------------------------------------------------
# 4. Long paths amplify: a file whose path is ~4,000 bytes costs ~210 bytes of folder entry on disk and ~4,000 bytes
#    of `git status` output in the bot (read whole by agents/git/command._exec_git at every commit): with each entry
#    charged ENTRY_BYTES against the disk budget, that output stays within a small multiple of what was charged.


def _long_path_tree(root: Path, files: int) -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(15):
            name = f"{level:02d}" + "p" * 248
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        for i in range(files):
            os.close(os.open(f"{i:06d}" + "f" * 194, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


async def test_git_status_of_long_paths_is_bounded_in_the_bots_memory(tmp_path: Path) -> None:
    from agents.git.commits import _pending_and_head

    root = tmp_path / "repo"
    root.mkdir()
    git = ["git", "-c", "user.name=p", "-c", "user.email=p@p", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    before = allocated_bytes(root)
    _long_path_tree(root, 6000)
    spent = allocated_bytes(root) - before
    tracemalloc.start()
    try:
        _, changes, _ = await _pending_and_head(root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(changes) >= 6000, f"probe set-up: git listed {len(changes)} files"
    assert peak < 8 * spent + (4 << 20), (
        f"the worker spent {spent >> 10} KB of disk; one git status of it took {peak >> 20} MB of the bot's memory"
    )
