"""The git side of one change task, without the model, the sandbox or the tests: CPU and git processes per task.

Per task, as `agents/work/task_checkout.py` and the steps after it run them: `ensure_repository`, the task's branch
and worktree (`create_task_worktree`), the credential scan of its base commit, the test configuration read at the
base (`file_at`), the instruction files' listing (`repo_rules.list_tree`), one file changed and committed
(`commit_all`), the worktree removed (its branch kept). On a 200-file repository whose objects are packed, as in any
clone; 30 tasks after 3 not counted. CPU seconds of this process and its child processes (git), and the git
processes started, per task.

Run: .venv/bin/python bench/git_task.py [--json]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.core.secrets_filter import SecretsFilter
from agents.git.commits import commit_all
from agents.git.repository import ensure_repository, file_at
from agents.git.worktrees import create_task_worktree, remove_worktree_keep_branch
from agents.work.repo_rules import list_tree
from agents.workspaces.credential_files import mask_credential_files
from bench._git_repo import cpu_seconds, make_repo  # noqa: E402

WARM, RUNS = 3, 30


async def one_task(repo: Path, worktrees: Path, task_id: int) -> None:
    await ensure_repository(repo)
    tree = await create_task_worktree(repo, task_id, "Change a file", None, worktrees)
    await mask_credential_files(tree.path, SecretsFilter())
    await file_at(repo, tree.base_commit, ".agentlab.toml")
    await list_tree(repo, tree.base_commit)
    (tree.path / "file1.txt").write_text(f"changed by task {task_id}\n")
    result = await commit_all(tree, f"Task {task_id}")
    assert result is not None and result.committed
    await remove_worktree_keep_branch(tree)


async def main(as_json: bool) -> None:
    processes = 0
    spawn = asyncio.create_subprocess_exec

    async def counted(program: Any, *args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        nonlocal processes
        processes += 1
        return await spawn(program, *args, **kwargs)

    asyncio.create_subprocess_exec = counted  # type: ignore[assignment]  # counts every process the tasks start
    with tempfile.TemporaryDirectory(prefix="bench-git-task-") as folder:
        repo = make_repo(Path(folder) / "repo", packed=True)
        worktrees = Path(folder) / "worktrees"
        for i in range(WARM):
            await one_task(repo, worktrees, 1 + i)
        cpu: list[float] = []
        started_processes, wall = processes, time.perf_counter()
        for i in range(RUNS):
            before = cpu_seconds()
            await one_task(repo, worktrees, 100 + i)
            cpu.append(cpu_seconds() - before)
        wall = time.perf_counter() - wall
        per_task = (processes - started_processes) / RUNS
    figures = {
        "cpu_ms_per_task_median": round(statistics.median(cpu) * 1000, 1),
        "cpu_ms_per_task_mean": round(statistics.mean(cpu) * 1000, 1),
        "git_processes_per_task": per_task,
        "wall_ms_per_task": round(wall / RUNS * 1000, 1),
    }
    print(f"one change task's git side, {RUNS} tasks on a packed 200-file repository:")
    print(
        f"  CPU per task (this process + git): median {figures['cpu_ms_per_task_median']} ms, "
        f"mean {figures['cpu_ms_per_task_mean']} ms"
    )
    print(f"  git processes per task: {per_task:g}; wall per task {figures['wall_ms_per_task']} ms")
    if as_json:
        print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main("--json" in sys.argv))
