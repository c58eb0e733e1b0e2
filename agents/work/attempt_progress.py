"""The progress of a race of attempts: one message for the group (not one per attempt), with a line per attempt.

Each attempt's executor keeps its steps as task events through a `QuietProgress` (the same `Progress`, minus the
message of its own); the group's follower (attempts.py) draws `group_text` from the store and edits the one message.
"""

from __future__ import annotations

import time

from agents.core.models import AttemptGroup, Task, TaskStatus
from agents.work.attempt_ranking import MARKS
from agents.work.progress import Progress
from agents.work.task_outcome import trim

RUNNING_MARKS = {TaskStatus.PENDING: "⏸ waiting", TaskStatus.IN_PROGRESS: "⏳", TaskStatus.INTERRUPTED: "⏸ interrupted"}


class QuietProgress(Progress):
    """An attempt's progress: its steps are stored (the group's message shows the latest), no message of its own."""

    async def open(self) -> None:
        """Nothing to send: the group's follower owns the one progress message."""

    async def _edit(self) -> None:
        """Never edits: the task's progress message id is its group's (so a reply to it steers), which this attempt's
        own text must not replace."""
        self._unshown.clear()

    async def close(self, final_line: str) -> None:
        self.stop()


def attempt_state(task: Task) -> str:
    if task.status.is_final:
        return f"{MARKS.get(task.status, '✗')} {task.status.value}"
    return RUNNING_MARKS.get(task.status, task.status.value)


def group_text(group: AttemptGroup, members: list[Task], last_steps: dict[int, str], started: float) -> str:
    """`⏳ 3 attempts · code worker · calc`, the title, the elapsed time, then one line per attempt."""
    first = members[0] if members else None
    kind = f" · {first.worker.value} worker · `{first.workspace}`" if first else ""
    elapsed = int(time.monotonic() - started)
    lines = [f"⏳ **{group.size} attempts**{kind}", trim(group.title, 120), f"⏱ {elapsed // 60}m{elapsed % 60:02d}s"]
    for task in members:
        step = last_steps.get(task.stored_id)
        tail = f" · {trim(step, 70)}" if step and not task.status.is_final else ""
        lines.append(f"{task.attempt}. #{task.id} {attempt_state(task)}{tail}")
    return "\n".join(lines)
