"""Tasks and what belongs to each: its events (the audit of its course) and its acceptance criteria.

A task's status moves only by compare-and-set (`transition_task`, `claim_next_task`), so two runners or a double
tap never both take it. A runner keeps a copy of the bot's task under the bot's number (`mirror_task`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import aiosqlite

from agents.core.ids import valid_id
from agents.core.models import Criterion, Task, TaskEvent, TaskStatus, utcnow
from agents.store.connection import Connection, insert_sql, to_db


async def insert_task(
    db: aiosqlite.Connection,
    task: Task,
    criteria: list[str] | None,
    attachments: Iterable[int] = (),
    save_attachments: bool = False,
) -> None:
    """Insert a task, its criteria and the attachments handed to it, inside the caller's transaction; sets `task.id`."""
    data = {k: to_db(v) for k, v in task.model_dump().items() if k != "id"}
    rows = await db.execute_fetchall(insert_sql("tasks", data) + " RETURNING id", tuple(data.values()))
    task.id = int(next(iter(rows))[0])
    await db.executemany(
        "INSERT INTO task_criteria (task_id, idx, text) VALUES (?, ?, ?)",
        [(task.id, idx, text) for idx, text in enumerate(criteria or [], start=1)],
    )
    await db.executemany(
        "INSERT OR IGNORE INTO task_attachments (task_id, attachment_id, save_as_file) VALUES (?, ?, ?)",
        [(task.id, a, int(save_attachments)) for a in attachments],
    )


class TaskTable(Connection):
    """The `tasks`, `task_events` and `task_criteria` tables; a part of `Store`."""

    async def add_task(
        self,
        task: Task,
        criteria: list[str] | None = None,
        attachments: Iterable[int] = (),
        save_attachments: bool = False,
    ) -> Task:
        """Insert a task, its acceptance criteria and attachments in one transaction (a runner sees all or none)."""
        async with self.transaction() as db:
            await insert_task(db, task, criteria, attachments, save_attachments)
        return task

    async def transition_task(
        self, task_id: int, from_statuses: Iterable[TaskStatus], to: TaskStatus, **fields: Any
    ) -> bool:
        """Atomically move a task from one of `from_statuses` to `to`, setting `fields` with it (a runner claiming it
        meanwhile sees both or neither); False when it was in none of them."""
        values = [s.value for s in from_statuses]
        sets = "".join(f", {k} = ?" for k in fields)
        rows = await self.write(
            f"UPDATE tasks SET status = ?{sets} WHERE id = ? AND status IN ({', '.join('?' for _ in values)}) "
            "RETURNING id",
            (to.value, *(to_db(v) for v in fields.values()), task_id, *values),
        )
        return bool(rows)

    async def get_task(self, task_id: int) -> Task | None:
        if not valid_id(task_id):  # e.g. a 20-digit number: SQLite cannot bind it, and no row has it
            return None
        return await self.fetch_one(Task, "SELECT * FROM tasks WHERE id = ?", (task_id,))

    async def task_by_progress_message(self, chat_id: int, message_id: int) -> Task | None:
        return await self.fetch_one(
            Task, "SELECT * FROM tasks WHERE chat_id = ? AND progress_message_id = ?", (chat_id, message_id)
        )

    async def task_by_message(self, chat_id: int, message_id: int) -> Task | None:
        """The task whose progress message (or request) is this chat message."""
        return await self.fetch_one(
            Task,
            "SELECT * FROM tasks WHERE chat_id = ? AND (progress_message_id = ? OR reply_to_message_id = ?) "
            "ORDER BY id DESC LIMIT 1",
            (chat_id, message_id, message_id),
        )

    async def update_task(self, task_id: int, **fields: Any) -> None:
        await self.update("tasks", task_id, fields)

    async def task_of_schedule_since(self, schedule_id: int, since: datetime) -> Task | None:
        """The newest task schedule #schedule_id started at or after `since` (a run of the slot due then)."""
        return await self.fetch_one(
            Task,
            "SELECT * FROM tasks WHERE schedule_id = ? AND created_at >= ? ORDER BY id DESC LIMIT 1",
            (schedule_id, to_db(since)),
        )

    async def list_tasks(
        self, chat_id: int | None = None, statuses: Iterable[TaskStatus] | None = None, limit: int | None = 20
    ) -> list[Task]:
        """The tasks, newest first: at most `limit` (None: all of them)."""
        where: list[str] = []
        params: list[Any] = []
        if chat_id is not None:
            where.append("chat_id = ?")
            params.append(chat_id)
        if statuses is not None:
            values = [s.value for s in statuses]
            where.append(f"status IN ({', '.join('?' for _ in values)})")
            params.extend(values)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        most = -1 if limit is None else limit  # SQLite: a negative LIMIT is none
        return await self.fetch(Task, f"SELECT * FROM tasks {clause} ORDER BY id DESC LIMIT ?", (*params, most))

    async def claim_next_task(self) -> Task | None:
        """Atomically move the best pending task (priority, then age) to in_progress and return it."""
        now = to_db(utcnow())
        rows = await self.write(
            "UPDATE tasks SET status = ?, started_at = ? WHERE id = ("
            " SELECT id FROM tasks WHERE status = ? ORDER BY priority DESC, id ASC LIMIT 1"
            ") AND status = ? RETURNING *",
            (TaskStatus.IN_PROGRESS.value, now, TaskStatus.PENDING.value, TaskStatus.PENDING.value),
        )
        return Task.model_validate(dict(rows[0])) if rows else None

    async def mirror_task(self, task: Task, criteria: list[str] | None = None) -> None:
        """A runner's copy of a task the bot stored: inserted, or replaced whole, under the bot's number,
        with its acceptance criteria afresh."""
        data = {k: to_db(v) for k, v in task.model_dump().items()}
        async with self.transaction() as db:
            await db.execute("DELETE FROM task_criteria WHERE task_id = ?", (task.id,))
            await db.execute(insert_sql("tasks", data, "INSERT OR REPLACE"), tuple(data.values()))
            await db.executemany(
                "INSERT INTO task_criteria (task_id, idx, text) VALUES (?, ?, ?)",
                [(task.id, idx, text) for idx, text in enumerate(criteria or [], start=1)],
            )

    async def interrupt_running_tasks(self) -> list[Task]:
        """At start-up: tasks left in_progress by a killed bot become interrupted."""
        stuck = await self.list_tasks(statuses=[TaskStatus.IN_PROGRESS], limit=1000)
        for task in stuck:
            if task.id is not None:  # always so for a row read back (its type allows a record not yet stored)
                await self.update_task(task.id, status=TaskStatus.INTERRUPTED)
                await self.add_event(TaskEvent(task_id=task.id, kind="status", detail=TaskStatus.INTERRUPTED.value))
        return stuck

    # ---- events and acceptance criteria ------------------------------------------------------------------------
    async def add_event(self, event: TaskEvent) -> TaskEvent:
        event.id = await self.insert("task_events", event)
        return event

    async def count_tasks(self, chat_id: int, statuses: Iterable[TaskStatus]) -> int:
        """How many of the conversation's tasks are in one of `statuses`."""
        values = [s.value for s in statuses]
        rows = await self.rows(
            f"SELECT count(*) FROM tasks WHERE chat_id = ? AND status IN ({', '.join('?' for _ in values)})",
            (chat_id, *values),
        )
        return int(rows[0][0])

    async def task_events(self, task_id: int) -> list[TaskEvent]:
        return await self.fetch(TaskEvent, "SELECT * FROM task_events WHERE task_id = ? ORDER BY id", (task_id,))

    async def tasks_with_unclosed_event(self, kind: str, opened: str, closed: str) -> list[Task]:
        """The tasks with an event `kind` reading "<opened> X" and none reading "<closed> X" (a step begun and never
        finished, as the Temporal engine's "recorded <run>" without "ended <run>")."""
        return await self.fetch(
            Task,
            "SELECT * FROM tasks WHERE id IN (SELECT e.task_id FROM task_events e WHERE e.kind = ? "
            "AND e.detail LIKE ? || ' %' AND NOT EXISTS (SELECT 1 FROM task_events f WHERE f.task_id = e.task_id "
            "AND f.kind = e.kind AND f.detail = ? || ' ' || substr(e.detail, length(?) + 2))) ORDER BY id",
            (kind, opened, closed, opened),
        )

    async def criteria(self, task_id: int) -> list[Criterion]:
        return await self.fetch(Criterion, "SELECT * FROM task_criteria WHERE task_id = ? ORDER BY idx", (task_id,))

    async def verify_criterion(self, task_id: int, idx: int, evidence: str) -> bool:
        rows = await self.write(
            "UPDATE task_criteria SET verified = 1, evidence = ? WHERE task_id = ? AND idx = ? RETURNING idx",
            (evidence, task_id, idx),
        )
        return bool(rows)
