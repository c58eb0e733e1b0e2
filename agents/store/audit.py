"""The audit of tool calls: every call a model made (its arguments, result size, time and error), per task or chat."""

from __future__ import annotations

from agents.core.models import ToolCallRecord
from agents.store.connection import Connection


class ToolCallTable(Connection):
    """The `tool_calls` table; a part of `Store`."""

    async def record_tool_call(self, record: ToolCallRecord) -> None:
        record.id = await self.insert("tool_calls", record)

    async def tool_calls(self, task_id: int | None = None, chat_id: int | None = None) -> list[ToolCallRecord]:
        """A task's calls, or (without `task_id`) those of the chat's own turns."""
        if task_id is not None:
            return await self.fetch(
                ToolCallRecord, "SELECT * FROM tool_calls WHERE task_id = ? ORDER BY id", (task_id,)
            )
        return await self.fetch(
            ToolCallRecord, "SELECT * FROM tool_calls WHERE chat_id = ? AND task_id IS NULL ORDER BY id", (chat_id,)
        )
