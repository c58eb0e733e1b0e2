"""What a worker is told before it starts: the request, its criteria, the repository's instructions, the user's
standing notes, the repository map and the files handed over with the task.

Reading these never fails a task: a part that cannot be read is left out (and logged).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agents.core.models import Criterion, Task
from agents.core.settings import Settings
from agents.core.text import fenced
from agents.inputs.attachments import Attachments
from agents.repo_map.maps import RepoMap
from agents.store.database import Store
from agents.store.standing import StandingNotes
from agents.work.repo_rules import FolderRules, RepoRules
from agents.workspaces.folders import Workspace, Workspaces

log = logging.getLogger(__name__)


def first_turn(task: Task, criteria: list[Criterion], context: str = "") -> str:
    """The worker's first turn: the request, its acceptance criteria (numbered), then `context`."""
    text = task.instructions
    if criteria:
        listed = "\n".join(f"{c.idx}. {c.text}" for c in criteria)
        text += (
            f"\n\nAcceptance criteria (when one holds, call verify_criterion with its number and the "
            f"evidence; the task is only done when all are verified):\n{listed}"
        )
    return text + context


class Briefing:
    """Reads what the worker's first turn carries besides the request."""

    def __init__(self, settings: Settings, store: Store, workspaces: Workspaces, repo_map: RepoMap | None) -> None:
        self.settings, self.store, self.workspaces, self.repo_map = settings, store, workspaces, repo_map
        self.attachments = Attachments.from_settings(settings)
        self.rules = RepoRules(settings.briefing.repo_instructions_max_chars)  # AGENTS.md & co., cached per commit
        self.carried_notes: dict[int, list[str]] = {}  # task id → standing notes sent along (a runner's tasks)

    async def repository_map(self, task: Task, workspace: Workspace, worktree: Path | None = None) -> str:
        """The token-bounded map for this request ('' when there is none): of the task's worktree (its own index,
        seeded from the workspace's), or of the workspace for research. A workspace index still being built is
        waited for within REPO_MAP_WAIT_SECONDS, drawing included; then the map shows what is indexed so far."""
        if self.repo_map is None or self.settings.briefing.repo_map_tokens <= 0:
            return ""
        try:
            text = await self.repo_map.task_map(
                workspace.name,
                workspace.path,
                task.instructions,
                self.settings.briefing.repo_map_tokens,
                self.settings.briefing.repo_map_wait_seconds,
                task_index=task_index(task) if worktree is not None else None,
                task_root=worktree,
            )
        except Exception as err:  # the map helps; its absence must not fail the task
            log.warning("task %s: no repository map: %s", task.id, err)
            return ""
        return f"\n\nRepository map (most relevant files first, with signatures):\n{fenced(text)}" if text else ""

    async def guidance(self, task: Task, repository: Path, commit: str | None) -> tuple[str, FolderRules | None]:
        """The repository's instructions for agents at `commit` and the user's standing notes for the task's
        workspace, for the worker's first turn; and the folders with an AGENTS.md the first turn did not show."""
        text, rules = "", None
        if commit:
            try:
                found = await self.rules.for_task(repository, commit, task.instructions)
            except Exception as err:  # the guidance helps; its absence must not fail the task
                log.warning("task %s: the repository's instructions could not be read: %s", task.id, err)
            else:
                text = "\n\n" + found.text if found.text else ""
                rules = FolderRules(found.agents_folders, set(found.shown_agents))
        carried = self.carried_notes.pop(task.stored_id, None)
        if carried is None:
            kept = await StandingNotes(self.store).applying(
                task.user_id, self.settings.users.is_owner, task.workspace, about_self=self.workspaces.is_self
            )
            carried = [n.text for n in kept]
        if carried:
            listed = "\n".join(f"- {n}" for n in carried)
            text += (
                "\n\n## Standing notes (the user's wishes for their tasks here; a later note wins over an earlier one)"
                f"\n{listed}"
            )
        return text, rules

    async def handed_over(self, task: Task, worktree: Path | None = None) -> tuple[list[dict[str, Any]], str]:
        """The photos and files handed to the task: content blocks for the worker's first turn, and a line naming
        the copies saved under the worktree's ignored attachments folder (when start_task asked for that)."""
        rows = await self.store.task_attachments(task.stored_id)
        if not rows:
            return [], ""
        blocks = await self.attachments.blocks_of([a for a, _ in rows])
        to_save = [a for a, save in rows if save]
        paths, problem = (
            await self.attachments.copy_into(to_save, worktree) if to_save and worktree is not None else ([], None)
        )
        note = (
            (
                "\n\nThe user's files are saved in the worktree (ignored by git; "
                "copy what the project needs into it): "
                f"{', '.join(paths)}"
            )
            if paths
            else ""
        )
        if problem:  # the files are still in this message; only the copies in the worktree are missing
            note += f"\n\nThe user's files could not all be saved in the worktree: {problem}. They are shown above."
        return blocks, note


def task_index(task: Task) -> str:
    """The name of the worker's own look-up index (its worktree's), dropped when the task ends."""
    return f"{task.workspace}@task-{task.id}"
