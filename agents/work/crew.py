"""The crew desk: what the orchestrator's work tools and the chat's buttons do to tasks and proposals.

`Crew` is the one implementation of the `WorkDesk` protocol plus the buttons, as a thin front over the parts that do
the work, each a class with one job:
- access.py: who may do what (owners and members, the conversation's own tasks and workspaces, the budget);
- work_starts.py: starting tasks (tools, schedules, follow-ups), every task made by one `new_task`;
- proposal_decisions.py: Approve / Reject of a research task's proposal;
- branch_decisions.py: Merge / Diff / Discard / Open PR / Fix CI / Resume of a task's branch;
- running_tasks.py: Cancel and notes for a running task;
- lookups.py: list_tasks, get_task, get_proposal;
- workspace_binding.py: a conversation's workspace, and new workspaces;
- schedules.py and standing.py: schedules and standing notes.
The tools' schemas come from the protocol's signatures (agents/tools/desk_tools.py), which each method here repeats
(tests/test_desk_tools.py checks), so a method of the front is one line of delegation.
"""

from __future__ import annotations

from typing import BinaryIO

from agents.core.models import Caller, Task
from agents.core.protocols import MessageModel, Notifier, Outbox, TaskEngine
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.git.diff import DiffReport
from agents.repo_map.maps import RepoMap
from agents.store.database import Store
from agents.store.delivery import Deliveries
from agents.work.access import Access
from agents.work.attempt_decisions import AttemptDecisions
from agents.work.attempts import Races, attempt_count
from agents.work.branch_decisions import BranchDecisions
from agents.work.lookups import Lookups, task_entries, task_line
from agents.work.proposal_decisions import ProposalDecisions
from agents.work.pull_requests import PullRequests
from agents.work.running_tasks import RunningTasks
from agents.work.schedules import Firing, ScheduleBook
from agents.work.standing import Notes
from agents.work.steering import Inboxes
from agents.work.work_starts import WorkStarts
from agents.work.workspace_binding import WorkspaceBinding
from agents.workspaces.folders import Workspaces

__all__ = ["Crew", "task_entries", "task_line"]  # a task's line (/status, the eval desk); /tasks' entries


class Crew:
    """Implements the WorkDesk protocol of agents/core/protocols.py and the buttons; every method answers with text
    for the model or the user. The schedule book is built here over the crew's `WorkStarts` (the book starts each
    run as its maker would), so it has what it starts runs through from its construction on."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        workspaces: Workspaces,
        engine: TaskEngine,
        notifier: Notifier,
        secrets: SecretsFilter,
        inboxes: Inboxes | None = None,
        repo_map: RepoMap | None = None,
        pull_requests: PullRequests | None = None,
        firing: Firing | None = None,
        deliveries: Outbox | None = None,
        model: MessageModel | None = None,
    ) -> None:
        self.settings, self.store, self.workspaces, self.engine = settings, store, workspaces, engine
        self.notifier = notifier
        self.access = Access(settings, store, workspaces, notifier, secrets)
        self.starts = WorkStarts(settings, store, engine, self.access)
        self.proposals = ProposalDecisions(store, self.access, self.starts)
        self.branches = BranchDecisions(self.access, self.starts, settings, store, workspaces, engine, pull_requests)
        self.running = RunningTasks(store, engine, inboxes or Inboxes(), self.access)
        self.lookups = Lookups(store, self.access)
        self.binding = WorkspaceBinding(settings, store, workspaces, self.access, repo_map)
        self.schedules = ScheduleBook(settings, store, workspaces, self.starts, notifier, firing)
        self.notes = Notes(settings, store, workspaces)  # standing notes (agents/work/standing.py)
        # attempts: N tasks racing on one request, one summary (attempts.py); `model` compares two ✔ diffs
        self.races = Races(
            settings,
            store,
            engine,
            notifier,
            deliveries or Deliveries(store, notifier),
            self.access,
            self.starts,
            workspaces,
            model,
            pull_requests,
        )
        self.attempts = AttemptDecisions(store, engine, self.access, self.branches, self.running)

    # ---- roles, conversations, turns ------------------------------------------------------------------------------
    def is_owner(self, caller: Caller) -> bool:
        return self.access.is_owner(caller)

    async def bind_workspace(self, caller: Caller, name: str) -> str:
        return await self.binding.bind(caller, name)

    async def auto_bind(self, conversation: int, topic_name: str) -> None:
        await self.binding.auto_bind(conversation, topic_name)

    def stop_waiting(self, chat_id: int) -> None:
        self.starts.stop_waiting(chat_id)

    def turn_started(self, chat_id: int) -> None:
        self.starts.turn_started(chat_id)

    # ---- the orchestrator's tools (WorkDesk) ----------------------------------------------------------------------
    async def start_research(
        self,
        caller: Caller,
        workspace: str,
        request: str,
        refines: int | None = None,
        attachments: list[int] | None = None,
    ) -> str:
        return await self.starts.start_research(caller, workspace, request, refines, attachments)

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
        size = attempt_count(attempts)  # 0, 5 or "three": one sentence, nothing started
        if size > 1 or (attempts is not None and str(worker).strip().lower() == "research"):
            return await self.races.start(
                caller,
                workspace,
                worker,
                instructions,
                size,
                acceptance_criteria,
                attachments,
                save_attachments,
                first_pass_wins,
            )
        return await self.starts.start_task(
            caller, workspace, worker, instructions, background, acceptance_criteria, attachments, save_attachments
        )

    async def approve_proposal(self, caller: Caller, proposal_id: int | None = None, notes: str | None = None) -> str:
        return await self.proposals.approve(caller, proposal_id, notes)

    async def reject_proposal(self, caller: Caller, proposal_id: int | None = None, reason: str | None = None) -> str:
        return await self.proposals.reject(caller, proposal_id, reason)

    async def list_tasks(self, caller: Caller) -> str:
        return await self.lookups.list_tasks(caller)

    async def cancel_task(self, caller: Caller, task_id: int) -> str:
        return await self.attempts.cancel(caller, await self.access.task_for(caller, task_id))  # an attempt: all

    async def message_task(self, caller: Caller, task_id: int, text: str) -> str:
        return await self.attempts.message(caller, await self.access.task_for(caller, task_id), text)

    async def get_proposal(self, caller: Caller, proposal_id: int | None = None) -> str:
        return await self.lookups.get_proposal(caller, proposal_id)

    async def get_task(self, caller: Caller, task_id: int) -> str:
        return await self.lookups.get_task(caller, task_id)

    async def merge_task(self, caller: Caller, task_id: int) -> str:
        return await self.merge(caller, int(task_id))

    async def discard_task(self, caller: Caller, task_id: int) -> str:
        return await self.branches.discard(caller, int(task_id))

    async def create_workspace(self, caller: Caller, name: str) -> str:
        return await self.binding.create(caller, name)

    async def open_pull_request(self, caller: Caller, task_id: int) -> str:
        return await self.branches.open_pr(caller, int(task_id))

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
        return await self.schedules.make(caller, workspace, worker, instructions, cron, at, every_minutes)

    async def list_schedules(self, caller: Caller) -> str:
        return await self.schedules.list_text(caller)

    async def cancel_schedule(self, caller: Caller, schedule_id: int) -> str:
        return await self.schedules.cancel(caller, schedule_id)

    async def pause_schedule(self, caller: Caller, schedule_id: int) -> str:
        return await self.schedules.pause(caller, schedule_id)

    async def resume_schedule(self, caller: Caller, schedule_id: int) -> str:
        return await self.schedules.resume(caller, schedule_id)

    async def remember(self, caller: Caller, text: str, workspace: str | None = None) -> str:
        return await self.notes.remember(caller, text, workspace)

    async def forget(self, caller: Caller, note_id: int) -> str:
        return await self.notes.forget(caller, note_id)

    # ---- the buttons (Merge, Diff, Discard, Open PR, Fix CI, Resume) and GitHub follow-ups ----------------------
    async def merge(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> str:
        """An attempt's merge is its group's: the others are discarded with it."""
        if (group := await self.attempts.group_of(task_id)) is not None:
            return await self.attempts.merge(caller, group.stored_id, task_id, anywhere=anywhere)
        return await self.branches.merge(caller, task_id, anywhere=anywhere)

    async def merge_attempts(self, caller: Caller, group_id: int, *, anywhere: bool = False) -> str:
        return await self.attempts.merge(caller, group_id, anywhere=anywhere)

    async def discard_attempts(self, caller: Caller, group_id: int, *, anywhere: bool = False) -> str:
        return await self.attempts.discard(caller, group_id, anywhere=anywhere)

    async def diff(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> tuple[bytes, str]:
        return await self.branches.diff(caller, task_id, anywhere=anywhere)

    async def write_diff(
        self, caller: Caller, task_id: int, out: BinaryIO, *, max_bytes: int
    ) -> tuple[Task, DiffReport]:
        return await self.branches.write_diff(caller, task_id, out, max_bytes=max_bytes)

    async def discard(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> str:
        return await self.branches.discard(caller, task_id, anywhere=anywhere)

    async def open_pr(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> str:
        return await self.branches.open_pr(caller, task_id, anywhere=anywhere)

    async def fix_ci(self, caller: Caller, task_id: int) -> str:
        return await self.branches.fix_ci(caller, task_id)

    async def resume(self, caller: Caller, task_id: int) -> str:
        return await self.branches.resume(caller, task_id)

    async def continue_task(self, caller: Caller, task_id: int, instructions: str, title: str | None = None) -> Task:
        return await self.starts.continue_task(caller, task_id, instructions, title)
