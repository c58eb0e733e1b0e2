"""RecordingDesk: a WorkDesk for the routing eval that records every call and answers like the crew would, starting
no worker and writing to no repository.

Its tools are the crew's own definitions (the parts' `@work_tool` methods: the same names, descriptions and schemas,
agents/core/work_tools.py); only what a call runs is this desk's: `_<tool name>`, given the model's arguments."""

from __future__ import annotations

from collections.abc import Mapping
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
from agents.core.work_tools import WorkMethod, WorkTool, work_tool_definitions
from agents.evals.cases import WORKERS
from agents.store.database import Store
from agents.work import crew_texts
from agents.work.crew import TOOL_PARTS, task_line
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

    def work_tools(self) -> list[WorkTool]:
        """The crew's work tools, each answered here by `_<name>` after the call is recorded."""
        return [
            WorkTool(definition, self._recorded(name))
            for part in TOOL_PARTS
            for name, definition in work_tool_definitions(part).items()
        ]

    def _recorded(self, tool: str) -> WorkMethod:
        answer = getattr(self, f"_{tool}")

        async def call(caller: Caller, **arguments: Any) -> str:
            self.calls.append(ToolCall(tool, {k: v for k, v in arguments.items() if v is not None}))
            result: str = await answer(caller, arguments)
            return result

        return call

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

    async def _task(self, chat_id: int, task_id: int) -> Task:
        task = await self.store.get_task(int(task_id))
        if task is None or task.chat_id != chat_id:
            self._refused()
            raise ToolError(crew_texts.no_such_task(task_id))
        return task

    # ---- the answers, one per tool: (caller, the model's arguments) ----------------------------------------------
    async def _start_research(self, caller: Caller, given: Mapping[str, Any]) -> str:
        ws = self._resolve(given["workspace"])
        return crew_texts.research_started(self._next_task(), ws.name)

    async def _start_task(self, caller: Caller, given: Mapping[str, Any]) -> str:
        worker = given["worker"]
        kind = str(worker).strip().lower()
        if kind not in WORKERS:
            self._refused()
            raise ToolError(
                f"worker must be one of code, frontend, test (got {worker!r}); use start_research for research"
            )
        ws = self._resolve(given["workspace"])
        return f"Task #{self._next_task()} ({kind} worker, workspace {ws.name}) started in the background."

    async def _approve_proposal(self, caller: Caller, given: Mapping[str, Any]) -> str:
        proposal = await self._pick(caller.chat_id, given.get("proposal_id"))
        self.calls[-1].input["picked"] = proposal.id
        await self.store.update_proposal(proposal.stored_id, status=ProposalStatus.APPROVED, decided_at=utcnow())
        return (
            f"Proposal #{proposal.id} approved; code task #{self._next_task()} started on {proposal.workspace} "
            "in the background."
        )

    async def _reject_proposal(self, caller: Caller, given: Mapping[str, Any]) -> str:
        proposal = await self._pick(caller.chat_id, given.get("proposal_id"))
        self.calls[-1].input["picked"] = proposal.id
        await self.store.update_proposal(proposal.stored_id, status=ProposalStatus.REJECTED, decided_at=utcnow())
        return f"Proposal #{proposal.id} rejected."

    async def _list_tasks(self, caller: Caller, given: Mapping[str, Any]) -> str:
        tasks = await self.store.list_tasks(caller.chat_id)
        return "\n".join(task_line(t) for t in tasks) if tasks else "No tasks yet."

    async def _cancel_task(self, caller: Caller, given: Mapping[str, Any]) -> str:
        task = await self._task(caller.chat_id, given["task_id"])
        return f"Task #{task.id} cancelled; every process it started was stopped."

    async def _message_task(self, caller: Caller, given: Mapping[str, Any]) -> str:
        raise ToolError(crew_texts.no_such_task(given["task_id"]))

    async def _get_proposal(self, caller: Caller, given: Mapping[str, Any]) -> str:
        proposal_id = given.get("proposal_id")
        pending = await self.store.pending_proposals(caller.chat_id)
        chosen = [p for p in pending if proposal_id is None or p.id == int(proposal_id)]
        if not chosen:
            raise ToolError(f"there is no proposal #{proposal_id} in this chat")
        return "\n\n".join(crew_texts.proposal_text(p) for p in chosen)

    async def _get_task(self, caller: Caller, given: Mapping[str, Any]) -> str:
        return crew_texts.task_text(await self._task(caller.chat_id, given["task_id"]), [], [], None)

    async def _merge_task(self, caller: Caller, given: Mapping[str, Any]) -> str:
        raise ToolError(f"task #{given['task_id']} is still running; merge it when it has ended")

    async def _discard_task(self, caller: Caller, given: Mapping[str, Any]) -> str:
        task = await self._task(caller.chat_id, given["task_id"])
        return f"Task #{task.id} was discarded."

    async def _create_workspace(self, caller: Caller, given: Mapping[str, Any]) -> str:
        return (
            f"Created workspace {workspace_name(given['name'])} (a new git repository); start work in it by that name."
        )

    async def _schedule_task(self, caller: Caller, given: Mapping[str, Any]) -> str:
        ws = self._resolve(given["workspace"])
        return f"Schedule #1 made: {given['worker']} in {ws.name}. Next run: soon."

    async def _list_schedules(self, caller: Caller, given: Mapping[str, Any]) -> str:
        return "No schedules in this conversation."

    async def _no_schedule(self, given: Mapping[str, Any]) -> str:
        self._refused()
        raise ToolError(f"there is no schedule #{given['schedule_id']} in this conversation")

    async def _cancel_schedule(self, caller: Caller, given: Mapping[str, Any]) -> str:
        return await self._no_schedule(given)

    async def _pause_schedule(self, caller: Caller, given: Mapping[str, Any]) -> str:
        return await self._no_schedule(given)

    async def _resume_schedule(self, caller: Caller, given: Mapping[str, Any]) -> str:
        return await self._no_schedule(given)

    async def _remember(self, caller: Caller, given: Mapping[str, Any]) -> str:
        workspace, text = given.get("workspace"), given["text"]
        return f"Noted (note #1, {'in ' + workspace if workspace else 'everywhere'}): {text}"

    async def _forget(self, caller: Caller, given: Mapping[str, Any]) -> str:
        return f"Note #{given['note_id']} is forgotten."

    async def _open_pull_request(self, caller: Caller, given: Mapping[str, Any]) -> str:
        raise ToolError(crew_texts.no_such_task(given["task_id"]))

    def turn_started(self, chat_id: int, said: str = "", replied: tuple[str, int] | None = None) -> None:
        """No foreground task ever runs here: nothing to wait on."""

    def stop_waiting(self, chat_id: int) -> None:
        """No foreground task ever runs here: nothing to stop."""

    def turn_ended(self, chat_id: int) -> list[Task]:
        """No task is ever stored here: the calls are recorded instead."""
        return []
