"""Attempt groups: N tasks racing on one request (agents/work/attempts.py). The group and its tasks are stored in one
transaction; its state moves by compare-and-set, so one summary is sent however many ends race to send it, and a
Merge under way (`merging`) is on record until the other attempts are discarded."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents.core.ids import valid_id
from agents.core.models import AttemptGroup, AttemptState, Delivery, Task
from agents.store.connection import Connection, insert_sql, to_db
from agents.store.tasks import insert_task


class AttemptGroups:
    """Reads and writes of `attempt_groups` and of the tasks that belong to each; `Store.attempts` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def add(
        self,
        group: AttemptGroup,
        tasks: list[Task],
        criteria: list[str] | None = None,
        attachments: Iterable[int] = (),
        save_attachments: bool = False,
    ) -> list[Task]:
        """The group and its tasks (attempt 1..N, each with the criteria and the handed files), all or none."""
        data = {k: to_db(v) for k, v in group.model_dump().items() if k != "id"}
        handed = list(attachments)
        async with self._store.transaction() as db:
            rows = await db.execute_fetchall(insert_sql("attempt_groups", data) + " RETURNING id", tuple(data.values()))
            group.id = int(next(iter(rows))[0])
            for number, task in enumerate(tasks, start=1):
                task.attempt_group, task.attempt, task.attempt_of = group.id, number, len(tasks)
                await insert_task(db, task, criteria, handed, save_attachments)
        return tasks

    async def get(self, group_id: int) -> AttemptGroup | None:
        if not valid_id(group_id):
            return None
        return await self._store.fetch_one(AttemptGroup, "SELECT * FROM attempt_groups WHERE id = ?", (group_id,))

    async def racing(self) -> list[AttemptGroup]:
        """The groups whose summary is not sent yet (a restart follows them again)."""
        return await self._store.fetch(
            AttemptGroup, "SELECT * FROM attempt_groups WHERE state = ? ORDER BY id", (AttemptState.RACING.value,)
        )

    async def merging(self) -> list[AttemptGroup]:
        """The groups whose Merge was under way when the bot stopped (a restart finishes each from what git shows)."""
        return await self._store.fetch(
            AttemptGroup, "SELECT * FROM attempt_groups WHERE state = ? ORDER BY id", (AttemptState.MERGING.value,)
        )

    async def members(self, group_id: int) -> list[Task]:
        """The group's tasks, attempt 1 first."""
        return await self._store.fetch(
            Task, "SELECT * FROM tasks WHERE attempt_group = ? ORDER BY attempt", (group_id,)
        )

    async def last_steps(self, group_id: int) -> dict[int, str]:
        """Each attempt's latest step (task id → its text), for the group's progress message: one query."""
        rows = await self._store.rows(
            "SELECT task_id, detail FROM task_events WHERE id IN (SELECT MAX(e.id) FROM task_events e "
            "JOIN tasks t ON t.id = e.task_id WHERE t.attempt_group = ? AND e.kind = 'step' GROUP BY e.task_id)",
            (group_id,),
        )
        return {int(row["task_id"]): str(row["detail"]) for row in rows}

    async def update(self, group_id: int, **fields: Any) -> None:
        await self._store.update("attempt_groups", group_id, fields)

    async def move(self, group_id: int, from_state: AttemptState, to: AttemptState, **fields: Any) -> bool:
        """Compare-and-set of the group's state (with `fields`); False when it was not in `from_state`."""
        sets = ", ".join(["state = ?", *(f"{k} = ?" for k in fields)])
        rows = await self._store.write(
            f"UPDATE attempt_groups SET {sets} WHERE id = ? AND state = ? RETURNING id",
            (to.value, *(to_db(v) for v in fields.values()), group_id, from_state.value),
        )
        return bool(rows)

    async def move_telling(
        self, group_id: int, from_state: AttemptState, to: AttemptState, notice: Delivery, **fields: Any
    ) -> Delivery | None:
        """`move`, and the message its chat is owed stored in the outbox in the same transaction (a Merge a kill cut
        short, finished at start-up): told once, and never not at all. None when the group was not in `from_state`."""
        sets = ", ".join(["state = ?", *(f"{k} = ?" for k in fields)])
        data = {k: to_db(v) for k, v in notice.model_dump().items() if k != "id"}
        async with self._store.transaction() as db:
            moved = await db.execute_fetchall(
                f"UPDATE attempt_groups SET {sets} WHERE id = ? AND state = ? RETURNING id",
                (to.value, *(to_db(v) for v in fields.values()), group_id, from_state.value),
            )
            if not moved:
                return None
            rows = await db.execute_fetchall(insert_sql("deliveries", data) + " RETURNING id", tuple(data.values()))
            notice.id = int(next(iter(rows))[0])
        return notice

    async def set_progress_message(self, group_id: int, message_id: int | None) -> None:
        """The group's one progress message, on the group and its tasks (a reply to it steers them)."""
        async with self._store.transaction() as db:
            await db.execute("UPDATE attempt_groups SET progress_message_id = ? WHERE id = ?", (message_id, group_id))
            await db.execute("UPDATE tasks SET progress_message_id = ? WHERE attempt_group = ?", (message_id, group_id))
