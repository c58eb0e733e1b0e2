"""A task's progress message: elapsed time, criteria verified, the latest steps, a Cancel button; edited at most
once per interval (Telegram limits edits), and every step shows within that interval."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

from agents.core.actions import Action, Button, button
from agents.core.errors import MessageGone
from agents.core.models import Task, TaskEvent
from agents.core.protocols import Notifier
from agents.store.database import Store
from agents.work.task_outcome import trim

log = logging.getLogger(__name__)

PROGRESS_INTERVAL = 5.0  # default of PROGRESS_INTERVAL_SECONDS: a new step shows within this, at most one edit per
PROGRESS_REFRESH = 15.0  # default of PROGRESS_REFRESH_SECONDS: the elapsed time is refreshed at least this often
PROGRESS_STEPS = 3  # the progress message shows this many of the latest steps


def cancel_button(task_id: int) -> list[list[Button]]:
    return [[button("✖ Cancel", Action.CANCEL, task_id)]]


class Progress:
    """One progress message per task: elapsed time, criteria verified, the latest steps. Edited at most once per
    `interval` (Telegram limits edits); a step that arrives sooner is shown by the ticker when the interval is up, so
    every step shows within `interval`. With no step, the ticker refreshes the elapsed time every `refresh` seconds."""

    def __init__(
        self,
        notifier: Notifier,
        store: Store,
        task: Task,
        interval: float = PROGRESS_INTERVAL,
        refresh: float = PROGRESS_REFRESH,
    ) -> None:
        self.notifier, self.store, self.task = notifier, store, task
        self.interval, self.refresh = interval, refresh
        self.started = time.monotonic()
        self.steps: deque[str] = deque(["starting"], maxlen=PROGRESS_STEPS)
        self._started_steps = False
        self.last_edit = 0.0
        self.message_id = task.progress_message_id
        self.criteria = ""  # e.g. "2/5 criteria verified" (`criteria_verified`)
        self._ticker: asyncio.Task[None] | None = None
        self._unshown = asyncio.Event()  # set while a step waits for the interval to be up

    def criteria_verified(self, done: int, total: int) -> None:
        """The message says `done` of the task's `total` acceptance criteria are verified (from its next edit on)."""
        self.criteria = f"{done}/{total} criteria verified"

    def text(self) -> str:
        t = self.task
        elapsed = int(time.monotonic() - self.started)
        return (
            f"⏳ **Task #{t.id}** · {t.worker.value} worker · `{t.workspace}`\n{trim(t.title, 120)}\n"
            f"⏱ {elapsed // 60}m{elapsed % 60:02d}s"
            + (f" · {self.criteria}" if self.criteria else "")
            + "".join(f"\n• {trim(step, 90)}" for step in self.steps)
        )

    async def open(self) -> None:
        if self.message_id is None:
            try:
                self.message_id = await self.notifier.send(
                    self.task.chat_id,
                    self.text(),
                    buttons=cancel_button(self.task.stored_id),
                    reply_to=self.task.reply_to_message_id,
                )
            except Exception as err:  # no progress message is no reason to lose the task
                log.warning("task %s: progress message not sent: %s", self.task.id, err)
            await self.store.update_task(self.task.stored_id, progress_message_id=self.message_id)
        if self.message_id is not None:
            self._ticker = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        """Edits when a held-back step's interval is up, or when nothing edited the message for `refresh` seconds;
        the next due time is counted from the last edit, whoever made it, and a new step wakes it up early."""
        while True:
            if self._unshown.is_set():
                due = self.last_edit + self.interval
            else:
                due = max(self.last_edit, self.started) + self.refresh
            wait = due - time.monotonic()
            if wait <= 0:
                await self._edit()
            elif self._unshown.is_set():
                await asyncio.sleep(wait)
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._unshown.wait()

    async def _edit(self) -> None:
        self.last_edit = time.monotonic()
        self._unshown.clear()  # the text is built now: it shows every step so far
        if self.message_id is None:
            return
        try:
            await self.notifier.edit(
                self.task.chat_id, self.message_id, self.text(), buttons=cancel_button(self.task.stored_id)
            )
        except MessageGone:  # the user deleted it: a new one shows the steps and Cancel again, the old one is let be
            log.info("task %s: its progress message is gone; sending a new one", self.task.id)
            await self._replace()
        except Exception as err:  # a progress edit must never break the task
            log.debug("task %s: progress edit failed: %s", self.task.id, err)

    async def _replace(self) -> None:
        """A new progress message in place of one that is gone (none, where it cannot be sent: no more edits)."""
        try:
            self.message_id = await self.notifier.send(
                self.task.chat_id, self.text(), buttons=cancel_button(self.task.stored_id)
            )
        except Exception as err:
            log.warning("task %s: progress message not sent again: %s", self.task.id, err)
            self.message_id = None
        await self.store.update_task(self.task.stored_id, progress_message_id=self.message_id)

    async def update(self, step: str, force: bool = False) -> None:
        if not self._started_steps:  # the first real step replaces "starting"
            self.steps.clear()
            self._started_steps = True
        self.steps.append(step)
        await self.store.add_event(TaskEvent(task_id=self.task.id, kind="step", detail=step[:300]))
        if force or time.monotonic() - self.last_edit >= self.interval:
            await self._edit()
        else:
            self._unshown.set()  # the ticker shows it when the interval is up

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()

    async def close(self, final_line: str) -> None:
        self.stop()
        if self.message_id is None:
            return
        t = self.task
        try:
            await self.notifier.edit(
                t.chat_id,
                self.message_id,
                f"**Task #{t.id}** · {t.worker.value} · `{t.workspace}`\n{trim(t.title, 120)}\n{final_line}",
            )
        except Exception as err:
            log.debug("progress close failed: %s", err)
