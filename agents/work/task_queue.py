"""The local task queue: claims pending tasks from the store (priority, then age), at most N at once; a claimed task
that may not start any more (its `refusal`: the starter no longer allowed) ends failed with the reason."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from agents.core.models import Task, TaskEvent, TaskStatus, utcnow
from agents.store.database import Store

log = logging.getLogger(__name__)

Execute = Callable[[Task], Awaitable[None]]
Refusal = Callable[[Task], Awaitable[str | None]]  # why a claimed task may not start any more (None: it may)


class TaskQueue:
    """Each claimed task runs in its own asyncio task, kept referenced and awaited on shutdown. `refusal`, asked of
    each claimed task before it runs, ends one that may not start any more failed with its reason."""

    def __init__(self, store: Store, execute: Execute, max_concurrent: int, refusal: Refusal | None = None) -> None:
        self.store = store
        self.execute = execute
        self.refusal = refusal
        self.max_concurrent = max_concurrent
        self.running: dict[int, asyncio.Task[None]] = {}
        self._done: dict[int, asyncio.Event] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._claim_loop(), name="task-queue")

    def wake(self) -> None:
        """Call after adding a pending task."""
        self._wake.set()

    def done_event(self, task_id: int) -> asyncio.Event:
        return self._done.setdefault(task_id, asyncio.Event())

    def _ended(self, task_id: int) -> None:
        """Wake the task's waiters and forget its event: a bot that lives long runs many thousands of tasks, and
        the event of one that has ended must not stay (a later waiter reads the task's status instead)."""
        event = self._done.pop(task_id, None)
        if event is not None:
            event.set()

    async def wait(self, task_id: int) -> None:
        """Wait until the task has ended (any final status) and its run is over. The event is taken before the store
        is read, so an end that comes meanwhile sets it; a task that nothing runs and that has ended before this
        wait (or that a restart interrupted) is not waited for."""
        event = self.done_event(task_id)
        task = await self.store.get_task(task_id)
        over = task is None or task.status.is_final or task.status is TaskStatus.INTERRUPTED
        if over and task_id not in self.running:
            if not event.is_set() and self._done.get(task_id) is event:
                del self._done[task_id]  # nothing will end it: it must not stay
            return
        await event.wait()

    def adopt(self, task: Task) -> None:
        """Run a task that is already in progress (an engine re-attaching to it after a restart), as if claimed."""
        self.running[task.stored_id] = asyncio.create_task(self._run(task), name=f"task-{task.stored_id}")

    async def reattach(self, tasks: list[Task]) -> set[int]:
        """The local engine has nothing to re-attach to: a stopped bot's tasks stopped with it (Resume restarts)."""
        return set()

    async def drop_branch(self, task: Task) -> str | None:
        """Local tasks' branches live in the owner's checkout only (Discard deletes them there)."""
        return None

    async def _claim_loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                while len(self.running) < self.max_concurrent and not self._stopping:
                    task = await self.store.claim_next_task()
                    if task is None:
                        break
                    self.running[task.stored_id] = asyncio.create_task(self._run(task), name=f"task-{task.stored_id}")
                    await self.store.add_event(TaskEvent(task_id=task.id, kind="status", detail=TaskStatus.IN_PROGRESS))
            except Exception:  # a store hiccup must not stop the queue for good
                log.exception("claiming tasks failed; retrying in 5 s")
                await asyncio.sleep(5)
                continue
            await self._wake.wait()

    async def _run(self, task: Task) -> None:
        try:
            why = await self.refusal(task) if self.refusal is not None else None
            if why is not None:
                await self._finish_refused(task.stored_id, why)
                return
            await self.execute(task)
        except asyncio.CancelledError:
            if not self._stopping:
                await self._finish_cancelled(task.stored_id)
            raise
        except Exception:  # the executor reports its own failures; this is the last line of defence
            log.exception("task %s crashed", task.id)
            await self.store.update_task(
                task.stored_id,
                status=TaskStatus.FAILED,
                error="internal error (see the bot's log)",
                finished_at=utcnow(),
            )
            await self.store.add_event(TaskEvent(task_id=task.id, kind="status", detail=TaskStatus.FAILED))
        finally:
            self.running.pop(task.stored_id, None)
            self._ended(task.stored_id)
            self._wake.set()

    async def _finish_refused(self, task_id: int, why: str) -> None:
        await self.store.update_task(task_id, status=TaskStatus.FAILED, error=why, finished_at=utcnow())
        await self.store.add_event(TaskEvent(task_id=task_id, kind="status", detail=f"failed: {why}"))

    async def _finish_cancelled(self, task_id: int) -> None:
        """Cancelled, unless the task reached its end first (a cancel landing just after its final status, with its
        summary owed, must not turn a finished task into a cancelled one)."""
        unfinished = [s for s in TaskStatus if not s.is_final]
        if not await self.store.transition_task(task_id, unfinished, TaskStatus.CANCELLED):
            return
        await self.store.update_task(task_id, finished_at=utcnow())
        await self.store.add_event(TaskEvent(task_id=task_id, kind="status", detail=TaskStatus.CANCELLED))

    async def cancel(self, task_id: int) -> bool:
        """Cancel a running or pending task. Running: its asyncio task is cancelled, which kills its process groups."""
        running = self.running.get(task_id)
        if running is not None:
            await _cancel_until_done(running)
            return True
        if await self.store.transition_task(
            task_id, [TaskStatus.PENDING, TaskStatus.INTERRUPTED], TaskStatus.CANCELLED
        ):
            await self.store.update_task(task_id, finished_at=utcnow())
            await self.store.add_event(TaskEvent(task_id=task_id, kind="status", detail=TaskStatus.CANCELLED))
            self._ended(task_id)
            return True
        running = self.running.get(task_id)  # claimed between our look and our update
        if running is not None:
            await _cancel_until_done(running)
            return True
        return False

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Stop claiming; cancel running workers (they become `interrupted`, resumable after a restart)."""
        self._stopping = True
        self._wake.set()
        if self._loop_task:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = list(self.running.items())
        for _, t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait([t for _, t in tasks], timeout=timeout)
        for task_id, _ in tasks:
            task = await self.store.get_task(task_id)
            if task is not None and task.status is TaskStatus.IN_PROGRESS:  # one that just finished keeps its status
                await self.store.update_task(task_id, status=TaskStatus.INTERRUPTED)
                await self.store.add_event(
                    TaskEvent(task_id=task_id, kind="status", detail="interrupted (bot stopped)")
                )


CANCEL_RETRY_SECONDS = 10.0  # longer than a clean-up (partial commit, worktree removal) takes


async def _cancel_until_done(running: asyncio.Task[None]) -> None:
    """Cancel a task's asyncio task and wait for its clean-up. A cancellation swallowed on the way (Python 3.11's
    wait_for can do that when it races a completion) is sent again, so /cancel never hangs on a live worker."""
    while not running.done():
        running.cancel()
        await asyncio.wait({running}, timeout=CANCEL_RETRY_SECONDS)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        running.result()
