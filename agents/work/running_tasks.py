"""What is done to a task while it runs: Cancel stops it and every process it started, a note steers its worker
(read before the worker's next step). Members act on the tasks they started, owners on every task."""

from __future__ import annotations

from agents.core.errors import ToolError
from agents.core.models import Caller, TaskEvent, TaskStatus
from agents.core.protocols import TaskEngine
from agents.store.database import Store
from agents.work.access import Access, task_number
from agents.work.steering import NOTE_CHARS, NOTE_EVENT, Inboxes


class RunningTasks:
    """Cancel and steer, for the tools, the buttons and a reply to a task's progress message."""

    def __init__(self, store: Store, engine: TaskEngine, inboxes: Inboxes, access: Access) -> None:
        self.store, self.engine, self.inboxes, self.access = store, engine, inboxes, access

    async def cancel(self, caller: Caller, task_id: int) -> str:
        task = await self.access.task_for(caller, task_id)
        self.access.starter_or_owner(caller, task, "cancel")
        task_id = task_number(task)
        if not task.status.is_cancellable:
            return f"Task #{task_id} is already {task.status.value}; nothing to cancel."
        if not await self.engine.cancel(task_id):
            now = await self.access.task(task_id)
            return f"Task #{task_id} is {now.status.value}; it could not be cancelled."
        task = await self.access.task(task_id)
        kept = " What it did is kept on its branch (Discard deletes it)." if task.branch else ""
        return f"Task #{task_id} cancelled; every process it started was stopped.{kept}"

    async def message(self, caller: Caller, task_id: int, text: str) -> str:
        """A note for a running worker, read before its next step; a task that is not running gets a clear no."""
        task = await self.access.task_for(caller, task_id)
        self.access.starter_or_owner(caller, task, "steer")
        task_id = task_number(task)
        text = str(text).strip()
        if not text:
            raise ToolError("the note is empty")
        if task.status is not TaskStatus.IN_PROGRESS or not await self.inboxes.post(task_id, text):
            state = "has not started yet" if task.status is TaskStatus.PENDING else f"is {task.status.value}"
            raise ToolError(
                f"task #{task_id} {state}, so no worker is running to read a note; only a running task takes notes"
            )
        await self.store.add_event(TaskEvent(task_id=task_id, kind=NOTE_EVENT, detail=text[:NOTE_CHARS]))
        return f"Note passed to task #{task_id}; its worker reads it before its next step."
