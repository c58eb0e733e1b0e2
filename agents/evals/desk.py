"""RecordingDesk: a WorkDesk for the routing eval that records every call and answers like the crew would, starting
no worker and writing to no repository."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.core.errors import ToolError
from agents.core.models import (
    Caller,
    Proposal,
    ProposalStatus,
    Task,
    TaskStatus,
    WorkerKind,
    utcnow,
)
from agents.evals.cases import WORKERS
from agents.store.database import Store
from agents.work import crew_texts
from agents.work.crew import task_line
from agents.workspaces.creation import workspace_name
from agents.workspaces.folders import Workspaces


@dataclass
class ToolCall:
    """A work tool call as the orchestrator made it."""

    name: str
    input: dict[str, Any]
    ok: bool = True  # False when the desk refused it (a wrong name, an id it could not take)


class RecordingDesk:
    """A WorkDesk that records every call and answers like the real crew would, without starting any worker.

    Workspace names and proposals are checked as the real desk checks them (a wrong name gets the same
    ToolError), so the model's follow-up behaves as it would in the bot.
    """

    def __init__(self, store: Store, workspaces: Workspaces) -> None:
        self.store = store
        self.workspaces = workspaces
        self.calls: list[ToolCall] = []
        self._task_ids = 0

    def _record(self, tool: str, /, **arguments: Any) -> None:
        """One call of `tool` (positional only: a tool's own argument may be called `name`)."""
        self.calls.append(ToolCall(tool, {k: v for k, v in arguments.items() if v is not None}))

    def _refused(self) -> None:
        self.calls[-1].ok = False

    def _next_task(self) -> int:
        self._task_ids += 1
        return self._task_ids

    async def _pick(self, chat_id: int, proposal_id: int | None) -> Proposal:
        """As the crew picks: an id, or the only pending proposal; never a guess."""
        try:
            pending = await self.store.pending_proposals(chat_id)
            if proposal_id is None:
                running = [
                    t
                    for t in await self.store.list_tasks(chat_id, statuses=[TaskStatus.IN_PROGRESS])
                    if t.worker is WorkerKind.RESEARCH
                ]
                if running:
                    raise ToolError(crew_texts.still_writing(running, pending))
                if not pending:
                    raise ToolError("there is no pending proposal in this chat")
                if len(pending) > 1:
                    raise ToolError(crew_texts.which_proposal(pending))
                return pending[0]
            for proposal in pending:
                if proposal.id == int(proposal_id):
                    return proposal
            raise ToolError(f"there is no pending proposal #{proposal_id} in this chat")
        except (ToolError, ValueError):
            self._refused()
            raise

    def _resolve(self, workspace: str | None) -> Any:
        try:
            return self.workspaces.resolve(workspace or "")
        except ToolError:
            self._refused()
            raise

    async def start_research(
        self,
        caller: Caller,
        workspace: str,
        request: str,
        refines: int | None = None,
        attachments: list[int] | None = None,
    ) -> str:
        self._record("start_research", workspace=workspace, request=request, refines=refines)
        ws = self._resolve(workspace)
        return crew_texts.research_started(self._next_task(), ws.name)

    async def start_task(
        self,
        caller: Caller,
        workspace: str,
        worker: str,
        instructions: str,
        background: bool,
        acceptance_criteria: list[str] | None = None,
        attachments: list[int] | None = None,
        save_attachments: bool = False,
        attempts: int | None = None,
        first_pass_wins: bool = False,
    ) -> str:
        self._record(
            "start_task",
            workspace=workspace,
            worker=worker,
            instructions=instructions,
            background=background,
            acceptance_criteria=acceptance_criteria,
            attempts=attempts,
        )
        kind = str(worker).strip().lower()
        if kind not in WORKERS:
            self._refused()
            raise ToolError(
                f"worker must be one of code, frontend, test (got {worker!r}); use start_research for research"
            )
        ws = self._resolve(workspace)
        return f"Task #{self._next_task()} ({kind} worker, workspace {ws.name}) started in the background."

    async def approve_proposal(self, caller: Caller, proposal_id: int | None = None, notes: str | None = None) -> str:
        self._record("approve_proposal", proposal_id=proposal_id, notes=notes)
        proposal = await self._pick(caller.chat_id, proposal_id)
        self.calls[-1].input["picked"] = proposal.id
        await self.store.update_proposal(proposal.stored_id, status=ProposalStatus.APPROVED, decided_at=utcnow())
        return (
            f"Proposal #{proposal.id} approved; code task #{self._next_task()} started on {proposal.workspace} "
            "in the background."
        )

    async def reject_proposal(self, caller: Caller, proposal_id: int | None = None, reason: str | None = None) -> str:
        self._record("reject_proposal", proposal_id=proposal_id, reason=reason)
        proposal = await self._pick(caller.chat_id, proposal_id)
        self.calls[-1].input["picked"] = proposal.id
        await self.store.update_proposal(proposal.stored_id, status=ProposalStatus.REJECTED, decided_at=utcnow())
        return f"Proposal #{proposal.id} rejected."

    async def list_tasks(self, caller: Caller) -> str:
        self._record("list_tasks")
        tasks = await self.store.list_tasks(caller.chat_id)
        return "\n".join(task_line(t) for t in tasks) if tasks else "No tasks yet."

    async def _task(self, chat_id: int, task_id: int) -> Task:
        task = await self.store.get_task(int(task_id))
        if task is None or task.chat_id != chat_id:
            self._refused()
            raise ToolError(crew_texts.no_such_task(task_id))
        return task

    async def cancel_task(self, caller: Caller, task_id: int) -> str:
        self._record("cancel_task", task_id=task_id)
        task = await self._task(caller.chat_id, task_id)
        return f"Task #{task.id} cancelled; every process it started was stopped."

    async def get_proposal(self, caller: Caller, proposal_id: int | None = None) -> str:
        self._record("get_proposal", proposal_id=proposal_id)
        pending = await self.store.pending_proposals(caller.chat_id)
        chosen = [p for p in pending if proposal_id is None or p.id == int(proposal_id)]
        if not chosen:
            raise ToolError(f"there is no proposal #{proposal_id} in this chat")
        return "\n\n".join(crew_texts.proposal_text(p) for p in chosen)

    async def get_task(self, caller: Caller, task_id: int) -> str:
        self._record("get_task", task_id=task_id)
        return crew_texts.task_text(await self._task(caller.chat_id, task_id), [], [], None)

    async def merge_task(self, caller: Caller, task_id: int) -> str:
        self._record("merge_task", task_id=task_id)
        raise ToolError(f"task #{task_id} is still running; merge it when it has ended")

    async def discard_task(self, caller: Caller, task_id: int) -> str:
        self._record("discard_task", task_id=task_id)
        task = await self._task(caller.chat_id, task_id)
        return f"Task #{task.id} was discarded."

    async def create_workspace(self, caller: Caller, name: str) -> str:
        self._record("create_workspace", name=name)
        return f"Created workspace {workspace_name(name)} (a new git repository); start work in it by that name."

    async def message_task(self, caller: Caller, task_id: int, text: str) -> str:
        self._record("message_task", task_id=task_id, text=text)
        raise ToolError(crew_texts.no_such_task(task_id))

    async def schedule_task(
        self,
        caller: Caller,
        workspace: str,
        worker: str,
        instructions: str,
        cron: str | None = None,
        at: str | None = None,
        every_minutes: int | None = None,
    ) -> str:
        self._record(
            "schedule_task",
            workspace=workspace,
            worker=worker,
            instructions=instructions,
            cron=cron,
            at=at,
            every_minutes=every_minutes,
        )
        ws = self._resolve(workspace)
        return f"Schedule #1 made: {worker} in {ws.name}. Next run: soon."

    async def list_schedules(self, caller: Caller) -> str:
        self._record("list_schedules")
        return "No schedules in this conversation."

    async def cancel_schedule(self, caller: Caller, schedule_id: int) -> str:
        self._record("cancel_schedule", schedule_id=schedule_id)
        self._refused()
        raise ToolError(f"there is no schedule #{schedule_id} in this conversation")

    async def pause_schedule(self, caller: Caller, schedule_id: int) -> str:
        self._record("pause_schedule", schedule_id=schedule_id)
        self._refused()
        raise ToolError(f"there is no schedule #{schedule_id} in this conversation")

    async def resume_schedule(self, caller: Caller, schedule_id: int) -> str:
        self._record("resume_schedule", schedule_id=schedule_id)
        self._refused()
        raise ToolError(f"there is no schedule #{schedule_id} in this conversation")

    async def remember(self, caller: Caller, text: str, workspace: str | None = None) -> str:
        self._record("remember", text=text, workspace=workspace)
        return f"Noted (note #1, {'in ' + workspace if workspace else 'everywhere'}): {text}"

    async def forget(self, caller: Caller, note_id: int) -> str:
        self._record("forget", note_id=note_id)
        return f"Note #{note_id} is forgotten."

    async def open_pull_request(self, caller: Caller, task_id: int) -> str:
        self._record("open_pull_request", task_id=task_id)
        raise ToolError(crew_texts.no_such_task(task_id))

    def turn_started(self, chat_id: int) -> None:
        """No foreground task ever runs here: nothing to wait on."""

    def stop_waiting(self, chat_id: int) -> None:
        """No foreground task ever runs here: nothing to stop."""

    def turn_ended(self, chat_id: int) -> list[Task]:
        """No task is ever stored here: the calls are recorded instead."""
        return []
