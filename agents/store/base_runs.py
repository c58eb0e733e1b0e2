"""Kept base-commit test runs: the `base_runs` table, one row per (workspace, key), on the store's connection.

A row is the outcome (as JSON) of one run of a workspace's tests at a base commit, under one key that names
everything able to change it (agents/verify/base_run_cache.py computes it). Reading a row marks it used; keeping
a row drops the workspace's rows for the same commit under any other key (what they said no longer holds) and the
least recently used rows beyond the workspace's bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.core.models import utcnow

if TYPE_CHECKING:
    from agents.store.connection import Connection


class BaseRunRows:
    """Reads and writes of the `base_runs` table; outcomes and identities are JSON texts the caller makes."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def find(self, workspace: str, key: str) -> str | None:
        """The kept outcome under `key`, marked as just used; None when there is none."""
        rows = await self._store.write(
            "UPDATE base_runs SET used_at = ? WHERE workspace = ? AND key = ? RETURNING outcome",
            (utcnow().isoformat(), workspace, key),
        )
        return str(rows[0][0]) if rows else None

    async def keep(
        self, workspace: str, key: str, commit: str, command: str, identity: str, outcome: str, limit: int
    ) -> None:
        """Keep `outcome` under `key`: the commit's rows under other keys go, then the oldest beyond `limit`."""
        now = utcnow().isoformat()
        async with self._store.transaction() as db:
            await db.execute(
                "DELETE FROM base_runs WHERE workspace = ? AND base_commit = ? AND key != ?", (workspace, commit, key)
            )
            await db.execute(
                "INSERT OR REPLACE INTO base_runs (workspace, key, base_commit, command, identity, outcome, "
                "created_at, used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (workspace, key, commit, command, identity, outcome, now, now),
            )
            await db.execute(
                "DELETE FROM base_runs WHERE workspace = ? AND key NOT IN (SELECT key FROM base_runs WHERE "
                "workspace = ? ORDER BY used_at DESC, created_at DESC LIMIT ?)",
                (workspace, workspace, max(1, limit)),
            )

    async def forget(self, workspace: str, key: str) -> None:
        await self._store.write("DELETE FROM base_runs WHERE workspace = ? AND key = ?", (workspace, key))

    async def count(self, workspace: str) -> int:
        rows = await self._store.rows("SELECT COUNT(*) FROM base_runs WHERE workspace = ?", (workspace,))
        return int(rows[0][0])
