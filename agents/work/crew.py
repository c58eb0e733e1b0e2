"""The crew: what the orchestrator's work tools and the chat's buttons do to tasks and proposals.

`Crew` builds the parts that do the work, each a class with one job, and offers the parts' `@work_tool` methods as
the orchestrator's tools (the `WorkDesk` protocol); the buttons, commands and GitHub's inbox call the parts:
- access.py: who may do what (owners and members, the conversation's own tasks and workspaces, the budget);
- work_starts.py: starting tasks (tools, schedules, follow-ups), every task made by one `new_task`;
- attempts.py: start_task, one attempt or several racing on one request;
- proposal_decisions.py: Approve / Reject of a research task's proposal;
- attempt_decisions.py: Cancel, notes and Merge of a task, an attempt's being its group's;
- branch_decisions.py: Merge / Diff / Discard / Open PR / Fix CI / Resume of a task's branch;
- running_tasks.py: Cancel and notes for a running task;
- lookups.py: list_tasks, get_task, get_proposal;
- workspace_binding.py: a conversation's workspace, and new workspaces;
- schedule_book.py and standing.py: schedules and standing notes.
Each tool is written once, as its part's method: its docstring and typed signature are what the model sees
(agents/tools/desk_tools.py), and the routing eval's desk answers the same definitions (agents/evals/desk.py).
"""

from __future__ import annotations

from agents.core.models import Task
from agents.core.protocols import MessageModel, Notifier, Outbox, TaskEngine
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.core.work_tools import WorkTool, bound_work_tools
from agents.repo_map.maps import RepoMap
from agents.store.database import Store
from agents.store.delivery import Deliveries
from agents.work.access import Access
from agents.work.attempt_decisions import AttemptDecisions
from agents.work.attempts import Races
from agents.work.branch_decisions import BranchDecisions
from agents.work.lookups import Lookups, task_entries, task_line
from agents.work.proposal_decisions import ProposalDecisions
from agents.work.pull_requests import PullRequests
from agents.work.running_tasks import RunningTasks
from agents.work.schedule_book import Firing, ScheduleBook
from agents.work.standing import Notes
from agents.work.steering import Inboxes
from agents.work.work_starts import WorkStarts
from agents.work.workspace_binding import WorkspaceBinding
from agents.workspaces.folders import Workspaces

__all__ = ["TOOL_PARTS", "Crew", "task_entries", "task_line"]  # a task's line (/status, the eval desk); /tasks' entries

# the parts whose `@work_tool` methods are the orchestrator's tools → the crew's attribute holding each
TOOL_PARTS: dict[type, str] = {
    WorkStarts: "starts",
    Races: "races",
    ProposalDecisions: "proposals",
    Lookups: "lookups",
    AttemptDecisions: "attempts",
    BranchDecisions: "branches",
    WorkspaceBinding: "binding",
    ScheduleBook: "schedules",
    Notes: "notes",
}


class Crew:
    """Implements the WorkDesk protocol of agents/core/protocols.py with its parts' tools. The schedule book is built
    here over the crew's `WorkStarts` (the book starts each run as its maker would), so it has what it starts runs
    through from its construction on."""

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
        self.notes = Notes(settings, store, workspaces, notifier)  # standing notes (agents/work/standing.py)
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
            secrets,
            model,
            pull_requests,
        )
        self.attempts = AttemptDecisions(store, engine, self.access, self.branches, self.running)

    def work_tools(self) -> list[WorkTool]:
        """The orchestrator's work tools: the parts' `@work_tool` methods (agents/core/work_tools.py)."""
        return bound_work_tools(*(getattr(self, attribute) for attribute in TOOL_PARTS.values()))

    # the turn's hooks (WorkDesk): a foreground start_task waits until the chat's next message
    def turn_started(self, chat_id: int, said: str = "", replied: tuple[str, int] | None = None) -> None:
        self.starts.turn_started(chat_id, said, replied)

    def turn_ended(self, chat_id: int) -> list[Task]:
        return self.starts.turn_ended(chat_id)

    def stop_waiting(self, chat_id: int) -> None:
        self.starts.stop_waiting(chat_id)
