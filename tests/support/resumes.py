"""Taking up an interrupted task again: a task as a restart leaves it, and a model that can hold a worker mid-run."""

from __future__ import annotations

import threading
from typing import Any

from agents.core.models import Task, TaskStatus, WorkerKind
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import role_of


class HeldModel:
    """A model that answers every turn "Done." (once `hold` is set, while one is given) and records each request by
    role: a code worker's first turn (one message) is one run of a task."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.hold = hold
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.setdefault(role_of(body), []).append(body)
        if self.hold is not None:
            self.hold.wait(30)
        return claude_says.text("Done.")

    def release(self) -> None:
        """Let every held turn (and every later one) answer."""
        if self.hold is not None:
            self.hold.set()

    def runs(self, role: str = "code") -> int:
        return sum(len(body["messages"]) == 1 for body in self.requests.get(role, []))

    async def working(self) -> bool:
        """Whether a code worker has called the model (for `until`)."""
        return bool(self.requests.get("code"))


async def interrupted_task(bot: BotHarness, *, workspace: str = "calc") -> Task:
    """A code task of the owner's private chat as a restart leaves it: interrupted, no branch made yet."""
    store = bot.runtime.store
    task = await store.add_task(
        Task(
            chat_id=USER_ID,
            user_id=USER_ID,
            user_name="owner",
            workspace=workspace,
            worker=WorkerKind.CODE,
            title="notes",
            instructions="Write notes.md.",
        )
    )
    await store.update_task(task.stored_id, status=TaskStatus.INTERRUPTED)
    return await store.get_task(task.stored_id)


async def status_is(bot: BotHarness, task_id: int, status: TaskStatus) -> bool:
    task = await bot.runtime.store.get_task(task_id)
    return task is not None and task.status is status
