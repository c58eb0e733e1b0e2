"""A change task's checkout, start to end: its worktree made (or reused on resume) with the bot's test run started
at the base commit, the owner's repository guarded while the worker runs, its commits, and the checkout dropped.

The branch always stays: on an early end (cancelled, failed) what was done is committed on it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from agents.core.models import Task, TaskEvent
from agents.git.command import GitIdentity
from agents.git.commits import CommitLimits, CommitResult, commit_all
from agents.git.guard import RepositoryGuard
from agents.git.repository import ensure_repository
from agents.git.worktrees import (
    TaskWorktree,
    clear_stale_index_locks,
    create_task_worktree,
    park_worktree,
    remove_worktree_keep_branch,
)
from agents.verify.baseline import BaselineRuns
from agents.verify.task_tests import TaskTests
from agents.work.task_collaborators import Collaborators
from agents.work.task_sandbox import TaskSandboxes
from agents.workspaces.credential_files import mask_credential_files
from agents.workspaces.folders import Workspace

GUARD_EVENT = "guard"  # a task event: the worker changed the owner's repository, and the bot undid it
log = logging.getLogger(__name__)


class TaskCheckouts:
    """The worktrees of the change tasks running, and the guards on their owners' repositories."""

    def __init__(
        self,
        base: Collaborators,
        sandboxes: TaskSandboxes,
        baselines: BaselineRuns,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        s = base.settings
        self.stopping = stopping  # whether the bot is stopping (a task cancelled then is interrupted, kept to resume)
        self.base, self.sandboxes, self.baselines = base, sandboxes, baselines
        self.identity = GitIdentity(s.commits.git_author_name, s.commits.git_author_email)
        self.commit_limits = CommitLimits(s.commits.max_commit_file_bytes, s.commits.max_commit_task_bytes)
        self.guards: dict[int, RepositoryGuard] = {}  # task id → the guard of the owner's repository while it runs

    async def open(self, task: Task, workspace: Workspace) -> tuple[TaskWorktree, TaskTests]:
        """The task's worktree (its branch reused when an interrupted task resumes), recorded on the task; the
        bot's own test run started at its base commit; the owner's repository guarded from now on."""
        task_id = task.stored_id
        if await ensure_repository(workspace.path, self.identity):
            await self.base.notifier.send(
                task.chat_id, f"`{workspace.name}` was not a git repository; I initialised one."
            )
        tree = await create_task_worktree(
            workspace.path,
            task_id,
            task.title,
            self.identity,
            self.base.settings.paths.worktrees_dir,
            branch=task.branch,
            disk_budget=self.sandboxes.own_disk_budget(),  # a file system of its own, where the machine allows one
            start_point=task.base_commit,  # an attempt's: the race's base, whenever this attempt starts
        )
        try:
            return await self._set_up(task, workspace, tree)
        except BaseException as err:
            # cancelled or failed before the task's own clean-up takes over: as there, what was done is committed and
            # the checkout (with the file system mounted on it) goes now, even if cancelled again meanwhile; a bot that
            # is stopping keeps it for the resume
            if not (isinstance(err, asyncio.CancelledError) and self.stopping()):
                await asyncio.shield(self.drop_early(task, tree))
            raise

    async def _set_up(self, task: Task, workspace: Workspace, tree: TaskWorktree) -> tuple[TaskWorktree, TaskTests]:
        task_id = task.stored_id
        await self.base.store.update_task(
            task_id,
            branch=tree.branch,
            base_branch=tree.base_branch,
            base_commit=tree.base_commit,
            worktree=str(tree.path),
        )
        await clear_stale_index_locks(tree)  # a SIGKILL during the bot's own `git add` leaves one behind
        # `cat .npmrc` in a command then prints «masked», until the task ends (its bounds close its secrets' scope)
        bounds = self.sandboxes.bounds.get(task_id)
        scope = bounds.secrets if bounds is not None else None
        await mask_credential_files(tree.path, scope if scope is not None else self.base.secrets)
        checks = await TaskTests.start(
            workspace.path,
            tree.path,
            tree.base_commit,
            task.instructions,
            self.baselines,
            self.base.settings.tasks.test_timeout_seconds,  # the baseline runs while the worker works
            # the verdict's runs are not the task's processes: no task cgroup, no task network namespace (each run gets
            # one of its own from bwrap), so no service or process the worker started can reach them
            sandbox_for=lambda root, read_only: self.sandboxes.spec(root, workspace.path, read_only),
        )
        # after TaskTests.start: it hides the borrowed links in the repository's info/exclude, which the guard watches
        try:
            self.guards[task_id] = await RepositoryGuard.start(
                tree,
                pause=lambda: self.sandboxes.paused(task),
                activity=lambda: self.sandboxes.activity(task),
                label=f"#{task.id}",
            )
        except BaseException:
            checks.close()
            raise
        return tree, checks

    async def park(self, task: Task) -> None:
        """The bot is stopping: the task's kept worktree has its own file system unmounted (its image stays, and the
        next start mounts it again for the resume)."""
        stored = await self.base.store.get_task(task.stored_id)
        if stored is not None and stored.worktree:
            try:
                await park_worktree(Path(stored.worktree))
            except OSError as err:  # still mounted: the next start finds it as it is
                log.warning("task %s: its worktree stays mounted: %s", task.id, err)

    async def commit(self, task: Task, tree: TaskWorktree, note: str = "") -> CommitResult | None:
        """Commit what the worker changed (within the commit limits); `note` goes after the title in brackets."""
        title = f"{task.title} ({note})" if note else task.title
        async with self.sandboxes.paused(task):  # git reads the worktree by path: nothing of the task may swap it
            return await commit_all(tree, f"{title}\n\nagentlab task #{task.id}", self.identity, self.commit_limits)

    async def check(self, task: Task) -> list[str]:
        """Undo what the worker moved in the owner's repository; every warning so far (new ones become task events)."""
        guard = self.guards.get(task.stored_id)
        if guard is None:
            return []
        await guard.check()
        for warning in guard.unreported():
            await self.base.store.add_event(TaskEvent(task_id=task.stored_id, kind=GUARD_EVENT, detail=warning[:300]))
        return list(guard.warnings)

    def end_guard(self, task: Task) -> list[str]:
        """Stop guarding the task's repository (before its worktree goes); every warning the guard gave."""
        guard = self.guards.pop(task.stored_id, None)
        if guard is None:
            return []
        guard.close()
        return guard.warnings

    async def drop(self, task: Task, tree: TaskWorktree) -> None:
        """The task is over: its processes end (none may change the worktree while it is deleted), its guard ends,
        its checkout goes, its branch (and commits) stay."""
        await self.sandboxes.end_processes(task)
        self.end_guard(task)
        await remove_worktree_keep_branch(tree)

    async def drop_early(self, task: Task, tree: TaskWorktree) -> None:
        """Cancelled or failed: the task's processes end, what was done is committed on the branch, then the checkout
        goes (best effort)."""
        with contextlib.suppress(Exception):
            await self.sandboxes.end_processes(task)
            await self.commit(task, tree, "partial, task ended early")
            await self.drop(task, tree)
