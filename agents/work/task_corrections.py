"""The worker and corrections loop of a change task: the worker's turn is committed, then the bot's own test run
judges it; failing tests the worker caused go back to it as a correction turn, up to MAX_CORRECTIONS times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.core.models import Task, TaskEvent
from agents.git.commits import CommitResult
from agents.git.worktrees import TaskWorktree
from agents.store.database import Store
from agents.verify.task_tests import TaskTests
from agents.verify.test_verdict import Verdict
from agents.work.progress import Progress
from agents.work.task_checkout import TaskCheckouts
from agents.work.worker import Worker, WorkerResult


@dataclass
class ChangeRun:
    """What a change task's worker did: its last result, the last verdict, how many corrections, the commits."""

    result: WorkerResult
    verdict: Verdict | None = None
    corrections: int = 0
    commits: list[CommitResult] = field(default_factory=list)


class Corrections:
    """Runs a change task's worker with the bot's test run after each turn (one per executor)."""

    def __init__(self, store: Store, checkouts: TaskCheckouts, max_corrections: int) -> None:
        self.store, self.checkouts, self.max_corrections = store, checkouts, max_corrections

    async def run(
        self,
        task: Task,
        progress: Progress,
        worker: Worker,
        first: tuple[str, list[dict[str, Any]]],
        tree: TaskWorktree,
        checks: TaskTests,
    ) -> ChangeRun:
        """Run the worker on its first turn (text, attachments), then test and correct until the verdict needs no
        correction, the worker stops unfinished, or MAX_CORRECTIONS corrections were made; each turn is committed."""
        most = self.max_corrections
        text, attachments = first
        run = ChangeRun(await worker.run(text, attachments=attachments))
        commit = await self.checkouts.commit(task, tree)
        run.commits += [commit] if commit else []
        while run.result.finished:
            await progress.update("running tests", force=True)
            run.verdict = await checks.check(tree.path)
            await self.store.add_event(TaskEvent(task_id=task.stored_id, kind="tests", detail=run.verdict.detail()))
            if not run.verdict.needs_correction or run.corrections >= most:
                break
            run.corrections += 1
            await progress.update(f"correcting failed tests ({run.corrections}/{most})", force=True)
            run.result = await worker.run(run.verdict.correction(run.corrections, most))
            commit = await self.checkouts.commit(task, tree, f"correction {run.corrections}")
            run.commits += [commit] if commit else []
        return run
