"""What the orchestrator looks up about the conversation's work: its recent tasks, one task whole, a proposal whole.
The texts are in crew_texts.py; `task_line` is also the /status and eval desks' line for a task."""

from __future__ import annotations

from datetime import datetime

from agents.core.errors import ToolError
from agents.core.models import Caller, Task, utcnow
from agents.core.text import outside_text
from agents.core.work_tools import ProposalId, TaskId, work_tool
from agents.store.database import Store
from agents.work import crew_texts
from agents.work.access import Access, task_number


def age(when: datetime | None) -> str:
    if when is None:
        return "?"
    seconds = int((utcnow() - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def task_line(t: Task) -> str:
    by = f" · by {outside_text(t.user_name)}" if t.user_name else ""
    return f"#{t.id} [{t.status.value}] {t.worker.value} · {t.workspace}{by} · {age(t.created_at)} ago · {t.title}"


def task_entries(tasks: list[Task]) -> list[str]:
    """One entry per task, and one per group of attempts with a line per attempt under it (in the list's order)."""
    entries: list[str] = []
    seen: set[int] = set()
    for t in tasks:
        group = t.attempt_group
        if group is None:
            entries.append(task_line(t))
            continue
        if group in seen:
            continue
        seen.add(group)
        members = sorted((m for m in tasks if m.attempt_group == group), key=lambda m: m.attempt or 0)
        head = f"attempts #{group} · {t.attempt_of or len(members)} ways · {t.worker.value} · {t.workspace}"
        entries.append(
            f"{head} · {t.title.partition(': ')[2] or t.title}"
            + "".join(f"\n  – attempt {m.attempt}: #{m.id} [{m.status.value}] {age(m.created_at)} ago" for m in members)
        )
    return entries


class Lookups:
    """list_tasks, get_task and get_proposal: the conversation's own work only."""

    def __init__(self, store: Store, access: Access) -> None:
        self.store, self.access = store, access

    @work_tool
    async def list_tasks(self, caller: Caller) -> str:
        """List this chat's recent tasks with their status."""
        tasks = await self.store.list_tasks(caller.chat_id, limit=15)
        return "\n".join(task_entries(tasks)) if tasks else "No tasks yet."

    @work_tool
    async def get_task(self, caller: Caller, task_id: TaskId) -> str:
        """Show one task: status, the worker's report, tests, files changed, branch and commit."""
        task = await self.access.shown_task(caller, task_id)
        task_id = task_number(task)
        events = await self.store.task_events(task_id)
        shown = await self.store.bot_message_about(caller.chat_id, "task", task_id)
        criteria = await self.store.criteria(task_id)
        return crew_texts.task_text(task, criteria, events, shown.content if shown else None)

    @work_tool
    async def get_proposal(self, caller: Caller, proposal_id: ProposalId = None) -> str:
        """Show a proposal whole (no id: the chat's pending one, or the newest)."""
        chat_id = caller.chat_id
        if proposal_id is not None:
            return crew_texts.proposal_text(await self.access.shown_proposal(caller, proposal_id))
        pending = [p for p in await self.store.pending_proposals(chat_id) if self.access.may_see_proposal(caller, p)]
        if len(pending) > 1:
            raise ToolError(crew_texts.which_proposal(pending))
        proposal = pending[0] if pending else await self.store.latest_proposal(chat_id)
        if proposal is None or not self.access.may_see_proposal(caller, proposal):
            raise ToolError("there is no proposal in this chat")
        return crew_texts.proposal_text(proposal)
