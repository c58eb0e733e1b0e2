"""A runner's pushes of a task's branch to the remote the bot fetches from: while the task runs (each new commit,
so a runner taking over after this one is lost starts from it, and the workflow is told) and at its end.

While the task runs the branch is polled every heartbeat/4. A poll looks at the branch's loose ref file first
(`branch_stamp`) and starts git only when that file changed, so an idle task costs no git process."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from temporalio.client import Client

from agents.core.models import Task
from agents.engine.workflow import AgentTask
from agents.git.command import GitError
from agents.git.ref_files import git_dirs
from agents.git.remote import has_remote, push_branch
from agents.git.repository import rev_parse
from agents.store.database import Store
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)


class BranchPushes:
    """The pushes of one runner's task branches to `remote` (the runner's clones' name for the shared remote)."""

    def __init__(self, remote: str, store: Store, workspaces: Workspaces, client: Client) -> None:
        self.remote, self.store, self.workspaces, self.client = remote, store, workspaces, client
        self.stamps: dict[int, BranchStamp] = {}  # task id → its branch's ref file when last looked at

    def forget(self, task_id: int) -> None:
        """The task's run ended: its branch is not polled any more."""
        self.stamps.pop(task_id, None)

    async def progress(self, task_id: int, wf_id: str, pushed: str | None) -> str | None:
        """While the task runs: a new commit on its branch is pushed, and the workflow told, so a runner taking over
        after this one is lost starts from it. Returns the commit pushed last."""
        row = await self.store.get_task(task_id)
        if row is None or not row.branch or not row.status.is_active:
            return pushed
        workspace = self.workspaces.resolve(row.workspace)
        stamp = branch_stamp(workspace.path, row.branch)  # looked at before git: a commit after it shows next time
        if stamp is not None and stamp == self.stamps.get(task_id):
            return pushed  # the branch has not moved since it was last looked at: no git process
        try:
            head = await rev_parse(workspace.path, f"refs/heads/{row.branch}")
            if head in (pushed, row.base_commit) or not await has_remote(workspace.path, self.remote):
                if stamp is not None:
                    self.stamps[task_id] = stamp
                return pushed
            await push_branch(workspace.path, row.branch, self.remote)
            await self.client.get_workflow_handle(wf_id).signal(AgentTask.pushed, row.branch)
        except Exception as err:  # the next heartbeat tries again; the task goes on either way
            log.warning("task %s: progress not pushed: %s", task_id, err)
            return pushed
        if stamp is not None:
            self.stamps[task_id] = stamp
        return head

    async def final(self, task: Task) -> tuple[bool, str | None]:
        """At the task's end: its branch pushed whole; (pushed, why not)."""
        workspace = self.workspaces.resolve(task.workspace)
        if not await has_remote(workspace.path, self.remote):
            return False, f"the runner's clone of {workspace.name} has no remote {self.remote!r}"
        try:
            await push_branch(workspace.path, task.branch or "", self.remote)
        except GitError as err:
            return False, str(err)[:300]
        return True, None


BranchStamp = tuple[int, int, int]


def branch_stamp(repo: Path, branch: str) -> BranchStamp | None:
    """The loose ref file of `branch` in `repo`'s shared git folder as (inode, mtime in ns, size), read without a git
    process; None where git keeps the ref otherwise (packed, a reftable) or the folders are not plain: then only git
    can say.

    Git moves a ref by renaming a new file over the old one, so a moved branch has another stamp: the progress push
    polls the stamp and asks git (a process) only when it changed."""
    dirs = git_dirs(repo)
    if dirs is None or os.path.lexists(dirs[1] / "reftable"):
        return None
    try:
        info = (dirs[1] / "refs" / "heads" / branch).lstat()
    except (OSError, ValueError):
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size) if stat.S_ISREG(info.st_mode) else None
