"""The owners' decisions on a task's branch under way (Merge, Discard): a row from just before the git work starts
until it has ended. A row left at start-up is a decision a kill cut short: the bot asks git what became of the branch
(the row says only what was asked, never what happened) and tells the task's chat
(agents/work/branch_decisions.py `cut_short`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from agents.core.models import Delivery, TaskEvent, utcnow
from agents.store.connection import insert_sql, to_db

if TYPE_CHECKING:
    from agents.store.connection import Connection


class OpenDecision(BaseModel):
    task_id: int
    decision: str  # "merge" | "discard": own_words' verb of the decision


class OpenDecisions:
    """Reads and writes of the `open_decisions` table; `Store.open_decisions` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def begin(self, task_id: int, decision: str) -> None:
        """`decision` on task #task_id is about to start its git work (one per task: the branch lock allows one)."""
        await self._store.write(
            "INSERT OR REPLACE INTO open_decisions (task_id, decision, started_at) VALUES (?, ?, ?)",
            (task_id, decision, utcnow().isoformat()),
        )

    async def is_open(self, task_id: int) -> bool:
        """Whether a decision on task #task_id is on record now."""
        return bool(await self._store.rows("SELECT 1 FROM open_decisions WHERE task_id = ?", (task_id,)))

    async def cut_short(self) -> list[OpenDecision]:
        """At start-up: the decisions a stop or a kill left under way, oldest first."""
        rows = await self._store.rows("SELECT task_id, decision FROM open_decisions ORDER BY started_at, task_id")
        return [OpenDecision(task_id=row[0], decision=row[1]) for row in rows]

    async def end(
        self, task_id: int, event: TaskEvent | None = None, notice: Delivery | None = None
    ) -> Delivery | None:
        """The decision has ended: what it did to the task (`event`, a merge) and what its chat is owed (`notice`,
        at start-up), stored and the row forgotten in one transaction, so a stop between them neither loses the
        notice nor tells it twice."""
        async with self._store.transaction() as db:
            for table, record in (("task_events", event), ("deliveries", notice)):
                if record is None:
                    continue
                data = {k: to_db(v) for k, v in record.model_dump().items() if k != "id"}
                rows = await db.execute_fetchall(insert_sql(table, data) + " RETURNING id", tuple(data.values()))
                record.id = int(next(iter(rows))[0])
            await db.execute_fetchall("DELETE FROM open_decisions WHERE task_id = ?", (task_id,))
        return notice
