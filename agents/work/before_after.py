"""A frontend task's page before and after: the HTML page it changed, rendered at the base commit and with the task's
work, at the same phone viewport, by one Chromium in the task's sandbox (no network; its worktree, and the base
commit's files read-only, which its git history holds anyway), so the owner sees the change without opening
anything. The pair is kept for the review page and sent as one album with the summary.

Pages served by a dev server are not shown this way yet: only a page that is a file of the workspace (the first
changed `.html`, `index.html` preferred), which existed before the task.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path, PurePosixPath

from agents.core.errors import ToolError
from agents.core.models import Task, WorkerKind
from agents.git.command import GitError, git_text
from agents.git.repository import export_tree
from agents.git.worktrees import TaskWorktree
from agents.sandbox.temp_folders import temp_prefix
from agents.store.database import Store
from agents.tools.screenshot import VIEWPORTS, capture_all
from agents.work.task_sandbox import TaskSandboxes

log = logging.getLogger(__name__)

PAGE_SUFFIXES = (".html", ".htm")


def page_to_show(changed: list[str]) -> str | None:
    """The changed page a person would open first: an index.html nearest the root, else the first page."""
    pages = [p for p in changed if p.lower().endswith(PAGE_SUFFIXES)]
    if not pages:
        return None
    return min(pages, key=lambda p: (PurePosixPath(p).name.lower() != "index.html", p.count("/"), p))


class BeforeAfter:
    """Takes a frontend task's before/after pair (one per executor)."""

    def __init__(self, store: Store, sandboxes: TaskSandboxes, chromium: str | None) -> None:
        self.store, self.sandboxes, self.chromium = store, sandboxes, chromium

    async def take(self, task: Task, tree: TaskWorktree, repository: Path) -> list[tuple[str, bytes]]:
        """(caption, png) for before and after, kept with the task; [] when there is nothing to compare (not a
        frontend task, no changed page that existed before, no Chromium) or a picture could not be taken."""
        if task.worker is not WorkerKind.FRONTEND or self.chromium is None:
            return []
        try:
            changed = await git_text(
                "diff", "--name-only", "--no-renames", "--diff-filter=M", f"{tree.base_commit}..HEAD", cwd=tree.path
            )
        except GitError:
            return []
        page = page_to_show(changed.splitlines())
        if page is None:
            return []
        width, height = VIEWPORTS["phone"]
        try:
            with tempfile.TemporaryDirectory(prefix=temp_prefix("shot", "before")) as tmp:
                before_root = Path(tmp) / "before"
                await export_tree(repository, tree.base_commit, before_root)
                # one Chromium takes both: the task's sandbox, with the base commit's files beside it, read-only
                after_spec = self.sandboxes.spec(tree.path, repository, task=task)
                before, after = await capture_all(
                    self.chromium,
                    [((before_root / page).as_uri(), width, height), ((tree.path / page).as_uri(), width, height)],
                    sandbox=after_spec,
                    read_only=(before_root,),
                )
        except (ToolError, GitError, OSError) as err:
            log.warning("task %s: no before/after of %s: %s", task.id, page, err)
            return []
        pair = [
            (f"Before: {page} at the base commit ({width}px wide)", before),
            (f"After: {page} with task #{task.id} ({width}px wide)", after),
        ]
        for kind, (caption, png) in zip(("before", "after"), pair, strict=True):
            await self.store.reviews.add_picture(task.stored_id, caption, png, kind)
        return pair
