"""What a chat's commands show, read for them (the read side of the chat adapter's port; chat_actions.py acts).

/tasks and /cancel read the conversation's tasks, /task N and /log N one task, /history the stored conversation,
/usage the usage report, /workspace the conversation's workspace.

A task is looked up only within the conversation that asks (the crew's own check, Access.own_task): another
conversation's task is as good as absent, so the adapter never holds a record it may not show.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.core.errors import ToolError
from agents.core.models import Caller, ChatMessage, Task, TaskEvent, TaskStatus, ToolCallRecord, Usage
from agents.core.settings import Settings
from agents.llm.client import cost_usd
from agents.llm.usage import total, usage_report
from agents.store.database import Store
from agents.store.github import PullRequestRecord
from agents.work.access import Access
from agents.workspaces.folders import OwnersOnly

RECENT_TASKS = 15  # what /tasks lists, as the orchestrator's list_tasks does


@dataclass(frozen=True)
class TaskDetail:
    """/task N: the task, what it cost, its tool calls, its events and its pull request."""

    task: Task
    usage: Usage
    cost_usd: float
    tool_calls: list[ToolCallRecord]
    events: list[TaskEvent]
    pull_request: PullRequestRecord | None


@dataclass(frozen=True)
class TaskLog:
    """/log N: the task, its tool calls and the owner's answers to its network requests."""

    task: Task
    tool_calls: list[ToolCallRecord]
    network_decisions: list[TaskEvent]


class ChatQueries:
    """Read-only lookups for the chat's commands, each bounded to the conversation that asks."""

    def __init__(self, store: Store, settings: Settings, access: Access) -> None:
        self.store, self.settings, self.access = store, settings, access

    async def _task_here(self, caller: Caller, number: int) -> Task | None:
        """Task #number if it belongs to the caller's conversation, else None (absent and elsewhere read the same);
        OwnersOnly when the caller may not see it (Access.shown_task: a member and a task on `self`)."""
        try:
            return await self.access.shown_task(caller, number)
        except OwnersOnly:
            raise
        except ToolError:
            return None

    async def recent_tasks(self, conversation: int) -> list[Task]:
        return await self.store.list_tasks(conversation, limit=RECENT_TASKS)

    async def active_tasks(self, conversation: int) -> list[Task]:
        """The conversation's tasks that are still queued or running (what /cancel with no number may mean)."""
        return await self.store.list_tasks(conversation, statuses=TaskStatus.active())

    async def task_detail(self, caller: Caller, number: int) -> TaskDetail | None:
        """/task N in the caller's conversation; None when it has no task #N."""
        task = await self._task_here(caller, number)
        if task is None:
            return None
        used = total(await self.store.task_usage(task.stored_id))
        return TaskDetail(
            task=task,
            usage=used,
            cost_usd=cost_usd(used, self.settings),
            tool_calls=await self.store.tool_calls(task_id=task.id),
            events=await self.store.task_events(task.stored_id),
            pull_request=await self.store.github.pull_request(task.stored_id),
        )

    async def task_log(self, caller: Caller, number: int) -> TaskLog | None:
        """/log N in the caller's conversation; None when it has no task #N."""
        task = await self._task_here(caller, number)
        if task is None:
            return None
        events = await self.store.task_events(task.stored_id)
        return TaskLog(
            task=task,
            tool_calls=await self.store.tool_calls(task_id=task.id),
            network_decisions=[e for e in events if e.kind == "network"],
        )

    async def history(self, conversation: int) -> list[ChatMessage]:
        """/history: every message stored for this conversation, before and after any /new."""
        return await self.store.all_messages(conversation)

    async def usage_report(self, caller: Caller, *, private_chat: bool) -> str:
        """/usage: this conversation's usage, its tasks and its users; the whole bot's, per user, only for an owner in
        a private chat (agents/llm/usage.py says why)."""
        whole_bot = private_chat and self.access.is_owner(caller)
        return await usage_report(self.store, self.settings, caller.chat_id, whole_bot=whole_bot)

    async def bound_workspace(self, conversation: int) -> str | None:
        """The workspace this conversation works in (/workspace NAME set it, or a topic of that name), if any."""
        return await self.store.conversations.bound_workspace(conversation)
