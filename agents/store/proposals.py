"""Proposals: work the orchestrator offers, pending until a tap approves (creating its task) or declines it.

A decision is a compare-and-set on `status = 'pending'`, so a double tap decides once; approval and the task it
creates are one transaction, so a killed bot leaves both or neither (and `repair_approvals_without_task` mends what
an older bot left half done).
"""

from __future__ import annotations

from typing import Any

from agents.core.ids import valid_id
from agents.core.models import Proposal, ProposalStatus, Task, utcnow
from agents.store.connection import Connection, to_db
from agents.store.tasks import insert_task


class ProposalTable(Connection):
    """The `proposals` table; a part of `Store`."""

    async def add_proposal(self, proposal: Proposal) -> Proposal:
        proposal.id = await self.insert("proposals", proposal)
        return proposal

    async def get_proposal(self, proposal_id: int) -> Proposal | None:
        if not valid_id(proposal_id):  # e.g. a 20-digit number: SQLite cannot bind it, and no row has it
            return None
        return await self.fetch_one(Proposal, "SELECT * FROM proposals WHERE id = ?", (proposal_id,))

    async def update_proposal(self, proposal_id: int, **fields: Any) -> None:
        await self.update("proposals", proposal_id, fields)

    async def decide_proposal(self, proposal_id: int, status: ProposalStatus) -> bool:
        """Atomically take a pending proposal to `status`; False when it was no longer pending (a double tap)."""
        rows = await self.write(
            "UPDATE proposals SET status = ?, decided_at = ? WHERE id = ? AND status = ? RETURNING id",
            (status.value, to_db(utcnow()), proposal_id, ProposalStatus.PENDING.value),
        )
        return bool(rows)

    async def latest_proposal(self, chat_id: int) -> Proposal | None:
        return await self.fetch_one(
            Proposal, "SELECT * FROM proposals WHERE chat_id = ? ORDER BY id DESC LIMIT 1", (chat_id,)
        )

    async def pending_proposals(self, chat_id: int) -> list[Proposal]:
        return await self.fetch(
            Proposal,
            "SELECT * FROM proposals WHERE chat_id = ? AND status = ? ORDER BY id",
            (chat_id, ProposalStatus.PENDING.value),
        )

    async def approve_proposal(self, proposal_id: int, task: Task, criteria: list[str] | None = None) -> Task | None:
        """Approve a pending proposal and create its task in ONE transaction (a SIGKILL leaves both or neither).

        None when the proposal was no longer pending (a double tap); then no task is created.
        """
        async with self.transaction() as db:
            decided = await db.execute_fetchall(
                "UPDATE proposals SET status = ?, decided_at = ? WHERE id = ? AND status = ? RETURNING id",
                (ProposalStatus.APPROVED.value, to_db(utcnow()), proposal_id, ProposalStatus.PENDING.value),
            )
            if not decided:
                return None
            await insert_task(db, task, criteria)
            await db.execute_fetchall("UPDATE proposals SET task_id = ? WHERE id = ?", (task.id, proposal_id))
        return task

    async def repair_approvals_without_task(self) -> list[int]:
        """At start-up: proposals an older bot approved but was killed before creating their task go back to pending."""
        rows = await self.write(
            "UPDATE proposals SET status = ?, decided_at = NULL WHERE status = ? AND task_id IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.proposal_id = proposals.id) RETURNING id",
            (ProposalStatus.PENDING.value, ProposalStatus.APPROVED.value),
        )
        return sorted(int(row[0]) for row in rows)
