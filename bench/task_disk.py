"""The cost of a task's worktree as a file system of its own (SANDBOX_DISK_FS=auto) against a plain folder.

Per task: `create_task_worktree` then `remove_worktree_keep_branch` on a 200-file repository, plain and with its own
file system (a 1 GB budget: mkfs.ext4 of the sparse image, mount, umount, delete), alternated, 20 runs each; CPU
seconds of the bot and its child processes, and wall time. Per command: a sandboxed task command that writes and
deletes 500 small files in the worktree, on the plain folder and on the worktree's file system (median of 10), so a
slower file system would show. What a worktree holds: 8 MB reservations (fallocate) into a new worktree's file
system with a 1 GB budget until one is refused, against the budget. Only where the machine allows the mount (root,
loop devices, mkfs.ext4).

Run: .venv/bin/python bench/task_disk.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core.secrets_filter import SecretsFilter
from agents.git.worktrees import TaskWorktree, create_task_worktree, remove_worktree_keep_branch
from agents.sandbox import task_disk
from agents.sandbox.bwrap import SandboxProbe, spec_for
from agents.sandbox.shell import run_command
from agents.sandbox.task_limits import DiskBudget, TaskBounds
from bench._git_repo import cpu_seconds, make_repo  # noqa: E402

PROBE = SandboxProbe()  # the bench's one bwrap probe, carried by its specs

RUNS, COMMAND_RUNS = 20, 10
BUDGET = 1 << 30
WRITE_FILES = "for i in $(seq 500); do echo $i > f$i.txt; done; rm -f f*.txt"


async def per_task(repo: Path, worktrees: Path) -> dict[str, list[tuple[float, float]]]:
    figures: dict[str, list[tuple[float, float]]] = {"plain": [], "own file system": []}
    for i in range(RUNS):
        for name, budget in (("plain", None), ("own file system", BUDGET)):
            cpu, wall = cpu_seconds(), time.perf_counter()
            tree = await create_task_worktree(
                repo, 1000 + 2 * i + (budget is not None), "b", None, worktrees, None, budget
            )
            await remove_worktree_keep_branch(tree)
            figures[name].append((cpu_seconds() - cpu, time.perf_counter() - wall))
    return figures


async def per_command(tree: TaskWorktree) -> float:
    root = tree.path.resolve()
    bounds = TaskBounds("bench", 1 << 30, 512, DiskBudget(root, BUDGET))
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, root), task=bounds)
    times = []
    try:
        for _ in range(COMMAND_RUNS):
            started = time.perf_counter()
            result = await run_command(WRITE_FILES, root, 60, sandbox=spec)
            assert result.exit_code == 0, result.output
            times.append(time.perf_counter() - started)
    finally:
        await bounds.close()
    return statistics.median(times)


async def held(worktrees: Path) -> int:
    """Bytes reserved in a new worktree's file system (no checkout) before the next 8 MB reservation is refused."""
    tree = worktrees / "holds"
    assert await task_disk.make(tree, task_disk.BLOCK, 1, BUDGET)
    try:
        fill = await asyncio.create_subprocess_exec(
            "sh", "-c", "i=0; while fallocate -l 8M f$i 2>/dev/null; do i=$((i+1)); done",
            cwd=tree,
        )  # fmt: skip
        await fill.wait()
        return sum(f.stat().st_blocks * 512 for f in tree.iterdir() if f.is_file())
    finally:
        await task_disk.release(tree)


async def main() -> None:
    found = task_disk.support()
    if not found.available:
        print(f"no file system of its own per task here: {found.reason}")
        return
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-disk-") as folder:
        repo, worktrees = make_repo(Path(folder) / "repo"), Path(folder) / "worktrees"
        figures = await per_task(repo, worktrees)
        print(f"per task: create + remove a worktree of 200 files ({RUNS} runs each, interleaved; medians)")
        for name, runs in figures.items():
            cpu = statistics.median(c for c, _ in runs) * 1000
            wall = statistics.median(w for _, w in runs) * 1000
            print(f"  {name:16} CPU {cpu:6.1f} ms   wall {wall:6.1f} ms")
        holds = await held(worktrees)
        print(f"what a worktree holds: {holds / (1 << 20):,.0f} MB of 8 MB reservations, budget {BUDGET >> 20:,} MB")
        if (reason := await PROBE.unavailable_reason()) is not None:
            print(f"per command: skipped ({reason})")
            return
        print(f"per command: sandboxed, writes and deletes 500 small files (median of {COMMAND_RUNS})")
        for name, budget in (("plain", None), ("own file system", BUDGET)):
            tree = await create_task_worktree(repo, 9000 + (budget is not None), "c", None, worktrees, None, budget)
            try:
                mounted = os.path.ismount(tree.path)
                print(
                    f"  {name:16} {await per_command(tree) * 1000:6.1f} ms{'' if mounted == bool(budget) else ' (?)'}"
                )
            finally:
                await remove_worktree_keep_branch(tree)


if __name__ == "__main__":
    asyncio.run(main())
