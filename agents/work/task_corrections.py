"""The worker and corrections loop of a change task: the worker's turn is committed, then the bot's own test run
judges it; failing tests the worker caused go back to it as a correction turn, up to MAX_CORRECTIONS times.

Endings that recover: a worker stopped by its step limit is asked for its report (no more tools) and its work is
still tested; a worker that finished with acceptance criteria unverified gets one turn to verify them. A correction
carries, besides the failures, the command that re-runs only them, what the task changed so far, and from the second
on a prompt to step back (agents/work/turn_notes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agents.core.models import Task, TaskEvent
from agents.git.commits import CommitResult
from agents.git.worktrees import TaskWorktree, branch_head
from agents.store.database import Store
from agents.verify.task_tests import TaskTests
from agents.verify.verdict import Verdict
from agents.work.progress import Progress
from agents.work.task_checkout import TaskCheckouts
from agents.work.turn_notes import correction_notes, criteria_nudge, diffstat, rerun_command
from agents.work.worker import Ending, Worker, WorkerResult

LONG_TEST_SECONDS = 240.0  # a test run this long outlasts most of the prompt cache's default five minutes


def cache_ttl_for(test_seconds: float) -> Literal["5m", "1h"]:
    """The cache lifetime of the worker's next turns: one hour when the bot's test run (which each correction waits
    on) takes long enough that a five-minute cache would be gone when the correction arrives."""
    return "1h" if test_seconds >= LONG_TEST_SECONDS else "5m"


@dataclass
class ChangeRun:
    """What a change task's worker did: its last result, the last verdict, how many corrections, the commits."""

    result: WorkerResult
    verdict: Verdict | None = None
    corrections: int = 0
    commits: list[CommitResult] = field(default_factory=list)
    nudged: bool = False  # the worker had its one turn for unverified criteria


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
        run = ChangeRun(await worker.wrap_up(await worker.run(text, attachments=attachments)))
        commit = await self.checkouts.commit(task, tree)
        run.commits += [commit] if commit else []
        while run.result.finished or run.result.stop is Ending.STEP_LIMIT:
            await progress.update("running tests", force=True)
            run.verdict = await checks.check(tree.path, await branch_head(tree))
            worker.loop.keep_cache_for(cache_ttl_for(run.verdict.after.duration))
            await self.store.add_event(TaskEvent(task_id=task.stored_id, kind="tests", detail=run.verdict.detail()))
            if not run.result.finished:  # out of steps: its report and this test run are its ending
                break
            if not run.verdict.needs_correction:
                if not await self._nudge(task, progress, worker, tree, run):
                    break
                continue
            if run.corrections >= most:
                break
            run.corrections += 1
            await progress.update(f"correcting failed tests ({run.corrections}/{most})", force=True)
            async with self.checkouts.sandboxes.paused(task):  # git reads the worktree by path, as for a commit
                changed = await diffstat(tree.path, tree.base_commit)
            turn = self.correction_turn(run.verdict, run.corrections, most, changed, checks)
            run.result = await worker.wrap_up(await worker.run(turn))
            commit = await self.checkouts.commit(task, tree, f"correction {run.corrections}")
            run.commits += [commit] if commit else []
        return run

    @staticmethod
    def correction_turn(verdict: Verdict, attempt: int, most: int, changed: str, checks: TaskTests) -> str:
        """The correction's text: the verdict's failures, then the quick re-run, the diffstat (`changed`) and (from
        the second attempt) the prompt to step back."""
        rerun = rerun_command(checks.environment, verdict)
        return verdict.correction(attempt, most) + correction_notes(attempt, rerun, changed)

    async def _nudge(self, task: Task, progress: Progress, worker: Worker, tree: TaskWorktree, run: ChangeRun) -> bool:
        """One turn for the acceptance criteria the worker left unverified (once per task); whether it ran."""
        unverified = [c for c in await self.store.criteria(task.stored_id) if not c.verified]
        if run.nudged or not unverified:
            return False
        run.nudged = True
        await progress.update("asking the worker to verify its criteria", force=True)
        run.result = await worker.wrap_up(await worker.run(criteria_nudge(unverified)))
        commit = await self.checkouts.commit(task, tree, "criteria")
        run.commits += [commit] if commit else []
        return True
