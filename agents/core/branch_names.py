"""The names the bot gives task branches (`agentlab/task-<id>-<slug>`), and whether a name is one of a task's: a
runner's word about a branch is taken only for its own task's (the workflow's takeover point, the bot's fetch)."""

from __future__ import annotations

import re

BRANCH_PREFIX = "agentlab/task-"


def slugify(title: str, max_length: int = 40) -> str:
    """A branch-safe slug: lower-case ASCII letters, digits and single dashes; `task` when nothing is left."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    slug = slug[:max_length].rstrip("-")
    return slug or "task"


def task_branch_name(task_id: int, title: str) -> str:
    return f"{BRANCH_PREFIX}{task_id}-{slugify(title)}"


def is_task_branch(branch: str, task_id: int, known: str | None = None) -> bool:
    """Whether `branch` is task #task_id's: the branch it already has (`known`: a resumed task's, a follow-up's), or a
    name the bot gives it (`task_branch_name`, maybe with the `-N` a taken name gets)."""
    if known is not None and branch == known:
        return True
    return re.fullmatch(rf"{re.escape(BRANCH_PREFIX)}{task_id}-[a-z0-9]+(?:-[a-z0-9]+)*", branch) is not None
