"""The crew desk: what the orchestrator's work tools and the chat's buttons do to tasks and proposals.

Why one module over 500 lines: it is the one implementation of the `WorkDesk` protocol plus the buttons, and the
roles (owners and members) are checked inside each of those methods, next to what they guard; the texts
the crew answers with live in crew_texts.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tempfile
from datetime import datetime
from pathlib import Path

from agents.core.actions import Buttons
from agents.core.errors import ToolError
from agents.core.models import (
    Caller,
    Proposal,
    ProposalStatus,
    Schedule,
    Task,
    TaskEvent,
    TaskStatus,
    WorkerKind,
    utcnow,
)
from agents.core.protocols import Notifier, TaskEngine
from agents.core.settings import Settings
from agents.core.text import human_size, literal_block, markdown_literal, secret_warning
from agents.git import diff as git_diff
from agents.git.command import GitIdentity
from agents.git.merge import merge_task_branch
from agents.git.worktrees import TaskWorktree, discard_task_worktree
from agents.llm.usage import budget_exceeded
from agents.repo_map.maps import RepoMap
from agents.store.database import Store
from agents.work import crew_texts
from agents.work.pull_requests import PullRequests
from agents.work.schedules import ScheduleBook
from agents.work.standing import Notes
from agents.work.steering import Inboxes
from agents.work.task_outcome import branch_buttons, pull_request_buttons
from agents.workspaces.creation import create_workspace
from agents.workspaces.folders import Workspace, Workspaces

# The chat message that asked for the work; progress and summaries reply to it.

FOREGROUND_PRIORITY = 10


def git_identity(settings: Settings) -> GitIdentity:
    return GitIdentity(settings.git_author_name, settings.git_author_email)


def title_of(text: str, limit: int = 80) -> str:
    first = " ".join(text.strip().splitlines()[0].split()) if text.strip() else "task"
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def plan_criteria(proposal: str) -> list[str]:
    """The numbered steps of a proposal's `## Plan` section, which become the code task's acceptance criteria."""
    criteria: list[str] = []
    in_plan = False
    for line in proposal.splitlines():
        if line.startswith("#"):
            in_plan = line.lstrip("#").strip().lower().startswith("plan")
            continue
        match = re.match(r"\s*\d+[.)]\s+(.*\S)", line) if in_plan else None
        if match:
            criteria.append(match.group(1))
    return criteria


def age(when: datetime | None) -> str:
    if when is None:
        return "?"
    seconds = int((utcnow() - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def task_line(t: Task) -> str:
    by = f" · by {markdown_literal(t.user_name)}" if t.user_name else ""
    return f"#{t.id} [{t.status.value}] {t.worker.value} · {t.workspace}{by} · {age(t.created_at)} ago · {t.title}"


class Crew:
    """Implements the WorkDesk protocol of tool_sets.py; every method answers with text for the model or the user."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        workspaces: Workspaces,
        engine: TaskEngine,
        notifier: Notifier,
        inboxes: Inboxes | None = None,
        repo_map: RepoMap | None = None,
        pull_requests: PullRequests | None = None,
    ) -> None:
        self.settings, self.store, self.workspaces = settings, store, workspaces
        self.pull_requests = pull_requests  # GitHub: Open PR and follow-ups on a pull request's branch
        self.repo_map = repo_map  # a new workspace is indexed in the background at once
        self.engine, self.notifier = engine, notifier
        self.inboxes = inboxes or Inboxes()  # the executor's: notes for running workers
        self._interrupts: dict[int, asyncio.Event] = {}  # per chat: stop waiting on a foreground task
        self.schedules: ScheduleBook | None = None  # set by the runtime (the book starts runs through this crew)
        self.notes = Notes(settings, store, workspaces)  # standing notes (agents/work/standing.py)

    async def _check_budget(self) -> None:
        refusal = await budget_exceeded(self.store, self.settings)
        if refusal:
            raise ToolError(refusal)

    async def _attachment_ids(self, chat_id: int, ids: list[int] | None) -> list[int]:
        wanted = [int(i) for i in ids or []]
        found = [a.id for a in await self.store.chat_attachments(chat_id, wanted)]
        missing = [f"#{i}" for i in wanted if i not in found]
        if missing:
            raise ToolError(f"there is no attachment {', '.join(missing)} in this chat")
        return found

    async def _submit(
        self,
        task: Task,
        criteria: list[str] | None = None,
        attachments: list[int] | None = None,
        save_attachments: bool = False,
        proposal_id: int | None = None,
    ) -> Task | None:
        """Store a new task and wake the engine; with `proposal_id`, approve that proposal in the same transaction."""
        cleaned = [" ".join(str(c).split()) for c in (criteria or []) if str(c).strip()][:10]
        handed = await self._attachment_ids(task.chat_id, attachments)
        if proposal_id is None:
            task = await self.store.add_task(task, cleaned, handed, bool(save_attachments))
        elif (task := await self.store.approve_proposal(proposal_id, task, cleaned)) is None:
            return None  # no longer pending: a double tap
        await self.store.add_event(TaskEvent(task_id=task.id, kind="status", detail=TaskStatus.PENDING.value))
        self.engine.wake()
        return task

    async def _own_task(self, chat_id: int, task_id: int) -> Task:
        """Task #task_id if it belongs to this chat (another chat's task is as good as absent)."""
        task = await self.store.get_task(int(task_id))
        if task is None or task.chat_id != chat_id:
            raise ToolError(crew_texts.no_such_task(task_id))
        return task

    # ---- roles (OWNER_USER_IDS): enforced here, whoever asks (a tool call or a button) -------------------------
    def is_owner(self, caller: Caller) -> bool:
        return self.settings.is_owner(caller.user_id)

    async def _task_for(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> Task:
        """The caller's conversation's task; with `anywhere` (a button an owner pressed on a request handed to them,
        possibly in their own chat) an owner reaches a task of any conversation."""
        if anywhere and self.is_owner(caller):
            task = await self.store.get_task(int(task_id))
            if task is None:
                raise ToolError(crew_texts.no_such_task(task_id))
            return task
        return await self._own_task(caller.chat_id, task_id)

    async def _owners_only(
        self, caller: Caller, doing: str, asks: str, quoted: str = "", buttons: Buttons | None = None
    ) -> None:
        """A member asking for what only owners may do: refused in one sentence, and the owners get the request
        (with its button), where they see it. `asks` is the bot's own words; `quoted` (the member's request, a task's
        title, a name: text the member or the model chose) is shown literally in a block it cannot close, never as
        formatting or a link, and unmasked (with a warning when it looks like it holds a secret)."""
        if self.is_owner(caller):
            return
        who = markdown_literal(caller.user_name) if caller.user_name else f"user {caller.user_id}"
        text = f"🙋 {who} asks {asks}"
        if quoted:
            text += f"\n{literal_block(quoted)}{secret_warning(quoted, 'request')}"
        with contextlib.suppress(Exception):  # a failed hand-over must not turn the refusal into an error
            await self.notifier.ask_owners(caller.chat_id, text, buttons=buttons, literal=True)
        raise ToolError(f"only an owner can {doing}; I've asked them")

    def _starter_or_owner(self, caller: Caller, task: Task, doing: str) -> None:
        """Members act on the tasks they started; owners on every task."""
        if self.is_owner(caller) or (task.user_id is not None and task.user_id == caller.user_id):
            return
        whose = f"{task.user_name}'s" if task.user_name else "not yours"
        raise ToolError(f"task #{task.id} is {whose}: only the member who started it or an owner can {doing} it")

    async def _workspace_for(self, caller: Caller, workspace: str | None, request: str) -> Workspace:
        """The named workspace, or the conversation's own (a topic bound with /workspace); `self` is owners' only."""
        if not (workspace or "").strip():
            workspace = await self.store.conversations.bound_workspace(caller.chat_id)
            if workspace is None:
                raise ToolError(
                    "no workspace named, and this conversation has none of its own (/workspace NAME sets one): "
                    "ask the user which workspace"
                )
        ws = self.workspaces.resolve(workspace)
        if ws.is_self:
            await self._owners_only(caller, "work on the bot's own code", "for work on the bot's own code:", request)
        return ws

    async def bind_workspace(self, caller: Caller, name: str) -> str:
        """/workspace NAME: the conversation's messages and tasks default to that workspace."""
        ws = await self._workspace_for(caller, name, f"to bind a conversation to the workspace named {name}")
        await self.store.conversations.bind(caller.chat_id, ws.name)
        return f"This conversation now works in **{ws.name}**: tasks started here use it unless another is named."

    async def auto_bind(self, conversation: int, topic_name: str) -> None:
        """A topic named like a workspace binds itself (once, and never over a binding someone made)."""
        if not topic_name or await self.store.conversations.bound_workspace(conversation) is not None:
            return
        try:
            ws = self.workspaces.resolve(topic_name)
        except ToolError:
            return
        if not ws.is_self:
            await self.store.conversations.bind(conversation, ws.name)

    # ---- orchestrator tools ------------------------------------------------------------------
    async def start_research(
        self,
        caller: Caller,
        workspace: str,
        request: str,
        refines: int | None = None,
        attachments: list[int] | None = None,
    ) -> str:
        chat_id = caller.chat_id
        await self._check_budget()
        instructions = request
        if refines is not None:  # the worker sees the proposal being changed, whole
            old = await self._chat_proposal(chat_id, refines)
            workspace = old.workspace
            instructions = crew_texts.refine_request(request, old)
        ws = await self._workspace_for(caller, workspace, f"research: {request}")
        task = await self._submit(
            Task(
                chat_id=chat_id,
                reply_to_message_id=caller.message_id,
                user_id=caller.user_id,
                user_name=caller.user_name,
                workspace=ws.name,
                worker=WorkerKind.RESEARCH,
                title=f"research: {title_of(request, 70)}",
                instructions=instructions,
                priority=FOREGROUND_PRIORITY,
            ),
            attachments=attachments,
        )
        return crew_texts.research_started(task.id, ws.name)

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
    ) -> str:
        chat_id = caller.chat_id
        await self._check_budget()
        try:
            kind = WorkerKind(str(worker).strip().lower())
        except ValueError:
            kind = None
        if kind is None or kind is WorkerKind.RESEARCH:
            raise ToolError(
                f"worker must be one of code, frontend, test (got {worker!r}); use start_research for research"
            )
        ws = await self._workspace_for(caller, workspace, instructions)
        task = await self._submit(
            Task(
                chat_id=chat_id,
                reply_to_message_id=caller.message_id,
                user_id=caller.user_id,
                user_name=caller.user_name,
                workspace=ws.name,
                worker=kind,
                title=title_of(instructions),
                instructions=instructions,
                background=bool(background),
                priority=0 if background else FOREGROUND_PRIORITY,
            ),
            criteria=acceptance_criteria,
            attachments=attachments,
            save_attachments=save_attachments,
        )
        if background:
            return (
                f"Task #{task.id} ({kind.value} worker, workspace {ws.name}) started in the background; the user "
                "sees its progress and gets a summary when it ends."
            )
        if not await self._wait_briefly(chat_id, task.id):
            await self.store.update_task(task.id, background=True)
            return crew_texts.still_running(task.id)
        done = await self.store.get_task(task.id)
        return (
            f"Task #{task.id} ended with status {done.status.value}. "
            f"{done.error or ''} Worker's report: {(done.result or '(none)')[:1500]} "
            "(the summary with files, tests and commit was already sent to the user)."
        )

    async def _wait_briefly(self, chat_id: int, task_id: int) -> bool:
        """Wait for a foreground task at most FOREGROUND_WAIT_SECONDS, and not past a new message in the chat."""
        interrupt = self._interrupts.setdefault(chat_id, asyncio.Event())
        done, interrupted = asyncio.ensure_future(self.engine.wait(task_id)), asyncio.ensure_future(interrupt.wait())
        try:
            await asyncio.wait(
                {done, interrupted}, timeout=self.settings.foreground_wait_seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in (done, interrupted):
                waiter.cancel()
        return done.done() and not done.cancelled()

    def stop_waiting(self, chat_id: int) -> None:
        """A new message arrived in the chat: a turn waiting on a foreground task stops waiting and answers."""
        self._interrupts.setdefault(chat_id, asyncio.Event()).set()

    def turn_started(self, chat_id: int) -> None:
        self._interrupts.setdefault(chat_id, asyncio.Event()).clear()

    async def _chat_proposal(self, chat_id: int, proposal_id: int) -> Proposal:
        proposal = await self.store.get_proposal(int(proposal_id))
        if proposal is None or proposal.chat_id != chat_id:
            raise ToolError(f"there is no proposal #{proposal_id} in this chat")
        return proposal

    async def _pick_proposal(self, chat_id: int, proposal_id: int | None) -> Proposal:
        """The proposal a decision is about; never a guess: with no id, only the chat's one pending proposal."""
        if proposal_id is not None:
            proposal = await self._chat_proposal(chat_id, proposal_id)
            if proposal.status is not ProposalStatus.PENDING:
                raise ToolError(f"proposal #{proposal_id} is already {proposal.status.value}")
            return proposal
        pending = await self.store.pending_proposals(chat_id)
        researching = await self.store.list_tasks(chat_id, statuses=TaskStatus.active())
        researching = [t for t in researching if t.worker is WorkerKind.RESEARCH]
        if researching:
            raise ToolError(crew_texts.still_writing(researching, pending))
        if not pending:
            raise ToolError("there is no pending proposal in this chat")
        if len(pending) > 1:
            raise ToolError(crew_texts.which_proposal(pending))
        return pending[0]

    async def approve_proposal(self, caller: Caller, proposal_id: int | None = None, notes: str | None = None) -> str:
        chat_id = caller.chat_id
        proposal = await self._pick_proposal(chat_id, proposal_id)
        await self._workspace_for(caller, proposal.workspace, f"approve proposal #{proposal.id}: {proposal.request}")
        await self._check_budget()
        instructions = (
            f"Implement this approved proposal in the workspace, exactly as written (the user approved "
            f"it as is).\n\nOriginal request: {proposal.request}\n\n{proposal.body}"
        )
        instructions += crew_texts.approval_notes(notes)
        task = await self._submit(
            Task(
                chat_id=chat_id,
                reply_to_message_id=caller.message_id,
                user_id=caller.user_id,
                user_name=caller.user_name,
                workspace=proposal.workspace,
                worker=WorkerKind.CODE,
                title=f"proposal #{proposal.id}: {title_of(proposal.request, 60)}",
                instructions=instructions,
                proposal_id=proposal.id,
            ),
            criteria=plan_criteria(proposal.body),
            proposal_id=proposal.id,
        )
        if task is None:  # a double tap lands here
            raise ToolError(f"proposal #{proposal.id} was already decided")
        return (
            f"Proposal #{proposal.id} approved; code task #{task.id} started on {proposal.workspace} in the background."
        )

    async def reject_proposal(self, caller: Caller, proposal_id: int | None = None, reason: str | None = None) -> str:
        chat_id = caller.chat_id
        proposal = await self._pick_proposal(chat_id, proposal_id)
        if not await self.store.decide_proposal(proposal.id, ProposalStatus.REJECTED):
            raise ToolError(f"proposal #{proposal.id} was already decided")
        return f"Proposal #{proposal.id} rejected" + (f" ({reason})." if reason else ".")

    async def list_tasks(self, caller: Caller) -> str:
        chat_id = caller.chat_id
        tasks = await self.store.list_tasks(chat_id, limit=15)
        return "\n".join(task_line(t) for t in tasks) if tasks else "No tasks yet."

    async def cancel_task(self, caller: Caller, task_id: int) -> str:
        task = await self._task_for(caller, task_id)
        self._starter_or_owner(caller, task, "cancel")
        if not task.status.is_cancellable:
            return f"Task #{task.id} is already {task.status.value}; nothing to cancel."
        if not await self.engine.cancel(task.id):
            now = await self.store.get_task(task.id)
            return f"Task #{task.id} is {now.status.value}; it could not be cancelled."
        task = await self.store.get_task(task.id)
        kept = " What it did is kept on its branch (Discard deletes it)." if task.branch else ""
        return f"Task #{task.id} cancelled; every process it started was stopped.{kept}"

    async def message_task(self, caller: Caller, task_id: int, text: str) -> str:
        """A note for a running worker, read before its next step; a task that is not running gets a clear no."""
        task = await self._task_for(caller, task_id)
        self._starter_or_owner(caller, task, "steer")
        text = str(text).strip()
        if not text:
            raise ToolError("the note is empty")
        if task.status is not TaskStatus.IN_PROGRESS or not await self.inboxes.post(task.id, text):
            state = "has not started yet" if task.status is TaskStatus.PENDING else f"is {task.status.value}"
            raise ToolError(
                f"task #{task.id} {state}, so no worker is running to read a note; only a running task takes notes"
            )
        await self.store.add_event(TaskEvent(task_id=task.id, kind="note", detail=text[:300]))
        return f"Note passed to task #{task.id}; its worker reads it before its next step."

    async def get_proposal(self, caller: Caller, proposal_id: int | None = None) -> str:
        chat_id = caller.chat_id
        if proposal_id is not None:
            return crew_texts.proposal_text(await self._chat_proposal(chat_id, proposal_id))
        pending = await self.store.pending_proposals(chat_id)
        if len(pending) > 1:
            raise ToolError(crew_texts.which_proposal(pending))
        proposal = pending[0] if pending else await self.store.latest_proposal(chat_id)
        if proposal is None:
            raise ToolError("there is no proposal in this chat")
        return crew_texts.proposal_text(proposal)

    async def get_task(self, caller: Caller, task_id: int) -> str:
        chat_id = caller.chat_id
        task = await self._own_task(chat_id, task_id)
        events = await self.store.task_events(task.id)
        shown = await self.store.bot_message_about(chat_id, "task", task.id)
        return crew_texts.task_text(task, await self.store.criteria(task.id), events, shown.content if shown else None)

    async def merge_task(self, caller: Caller, task_id: int) -> str:
        return await self.merge(caller, int(task_id))

    async def discard_task(self, caller: Caller, task_id: int) -> str:
        return await self.discard(caller, int(task_id))

    async def create_workspace(self, caller: Caller, name: str) -> str:
        await self._owners_only(caller, "create a workspace", "to create a workspace named:", name)
        ws = await create_workspace(self.workspaces, name, git_identity(self.settings))
        if self.repo_map is not None:
            self.repo_map.index_in_background(ws.name, ws.path)
        return (
            f"Created workspace {ws.name} (a new git repository with an initial commit); start work in it by that name."
        )

    # ---- schedules (agents/work/schedules.py keeps and fires them; a run starts here, as its maker) --------------
    def _book(self) -> ScheduleBook:
        if self.schedules is None:
            raise ToolError("schedules are not available in this bot")
        return self.schedules

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
        return await self._book().make(caller, workspace, worker, instructions, cron, at, every_minutes)

    async def list_schedules(self, caller: Caller) -> str:
        return await self._book().list_text(caller)

    async def cancel_schedule(self, caller: Caller, schedule_id: int) -> str:
        return await self._book().cancel(caller, schedule_id)

    async def pause_schedule(self, caller: Caller, schedule_id: int) -> str:
        return await self._book().pause(caller, schedule_id)

    async def resume_schedule(self, caller: Caller, schedule_id: int) -> str:
        return await self._book().resume(caller, schedule_id)

    async def schedule_workspace(self, caller: Caller, workspace: str, request: str) -> Workspace:
        """The workspace a new schedule of the caller's works in, checked as a request of theirs would be."""
        return await self._workspace_for(caller, workspace, request)

    async def start_scheduled(self, caller: Caller, schedule: Schedule) -> Task:
        """A schedule's run: the task or research its maker (`caller`) would start, checked as theirs at this run."""
        await self._check_budget()
        ws = await self._workspace_for(
            caller, schedule.workspace, f"for schedule #{schedule.id}: {schedule.instructions}"
        )
        research = schedule.worker is WorkerKind.RESEARCH
        title = f"schedule #{schedule.id}: {title_of(schedule.instructions, 60)}"
        task = await self._submit(
            Task(
                chat_id=caller.chat_id,
                user_id=caller.user_id,
                user_name=caller.user_name,
                workspace=ws.name,
                worker=schedule.worker,
                title=f"research ({title})" if research else title,
                instructions=schedule.instructions,
                background=True,
                schedule_id=schedule.id,
            )
        )
        return task

    # ---- buttons (and the tools above) -----------------------------------------------------------
    async def _branch_task(self, caller: Caller, task_id: int, anywhere: bool) -> tuple[Task, TaskWorktree]:
        task = await self._task_for(caller, task_id, anywhere=anywhere)
        if not task.branch or not task.base_commit:
            raise ToolError(f"task #{task_id} has no branch")
        repo = self.workspaces.resolve(task.workspace).path
        # a task that ran on a runner (TASK_ENGINE=temporal) never had a worktree on this machine: its branch, fetched
        # into the owner's checkout, is all there is; a path where no worktree can be stands for the missing one
        # (the owner's checkout itself is a worktree, which Diff and Discard would take for the task's)
        nowhere = self.settings.worktrees_dir / "ran-elsewhere" / f"task-{task.id}"
        tree = TaskWorktree(
            repo=repo,
            path=Path(task.worktree) if task.worktree else nowhere,
            branch=task.branch,
            base_branch=task.base_branch or "main",
            base_commit=task.base_commit,
        )
        return task, tree

    async def _owner_decision(self, caller: Caller, task_id: int, doing: str, anywhere: bool) -> Task:
        """Merge and Discard are owners' decisions: a member's request goes to the owners with the task's buttons."""
        task = await self._task_for(caller, task_id, anywhere=anywhere)
        await self._owners_only(
            caller, doing, f"to {doing} **task #{task.id}**:", task.title, branch_buttons(task.id, task.status)
        )
        return task

    async def _tell_task_chat(self, caller: Caller, task: Task, text: str) -> None:
        """An owner decided from another chat (a request handed to them): the task's conversation hears it too."""
        if task.chat_id != caller.chat_id:
            with contextlib.suppress(Exception):
                await self.notifier.send(task.chat_id, f"{text} (decided by an owner)")

    async def merge(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> str:
        task = await self._task_for(caller, task_id, anywhere=anywhere)
        if task.status.is_active:  # the worker still writes on the branch: the tool and the button alike wait
            raise ToolError(f"task #{task_id} is still {task.status.value}; merge it when it has ended")
        task = await self._owner_decision(caller, task_id, "merge", anywhere)
        _, tree = await self._branch_task(caller, task_id, anywhere)
        result = await merge_task_branch(tree, git_identity(self.settings))
        await self._tell_task_chat(caller, task, result.message)
        return result.message

    async def diff(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> tuple[bytes, str]:
        """The task's capped diff (git_diff) and a caption saying what it leaves out."""
        task, tree = await self._branch_task(caller, task_id, anywhere)
        self._starter_or_owner(caller, task, "see the diff of")
        with tempfile.TemporaryFile() as out:  # git streams into the file; only the capped result is read back
            report = await git_diff.write_diff(tree, out)
            out.seek(0)
            data = out.read()
        note = report.note()
        return data, f"Diff of task #{task_id}" + (f" ({note})" if note else "")

    async def discard(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> str:
        """Throw a task's work away: stop it if it is still active or interrupted, then delete its branch."""
        task = await self._owner_decision(caller, task_id, "discard", anywhere)
        if task.status.is_cancellable:
            await self.engine.cancel(task_id)
            task = await self.store.get_task(task_id)  # a worker may have made its branch meanwhile
        if not task.branch or not task.base_commit:
            text = f"Task #{task_id} was discarded; it had no branch."
        else:
            _, tree = await self._branch_task(caller, task_id, anywhere)
            freed = await discard_task_worktree(tree)
            cleaned = f" ({human_size(freed)} of its files removed from `.git`)" if freed else ""
            text = f"Task #{task_id} was discarded; its branch `{tree.branch}` was deleted{cleaned}."
            problem = await self.engine.drop_branch(task)  # where a runner pushed it (TASK_ENGINE=temporal)
            if problem:
                text += f" But {problem}."
        await self._tell_task_chat(caller, task, text)
        return text

    async def open_pull_request(self, caller: Caller, task_id: int) -> str:
        return await self.open_pr(caller, int(task_id))

    async def open_pr(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> str:
        """Open PR (button or tool): owners only, like Merge; a member's request goes to the owners with the button."""
        task = await self._task_for(caller, task_id, anywhere=anywhere)
        if self.pull_requests is None or not self.pull_requests.enabled:
            raise ToolError("GitHub is not set up here (GITHUB_TOKEN is empty), so no pull request can be opened")
        await self._owners_only(
            caller,
            "open a pull request",
            f"to open a pull request for **task #{task.id}**:",
            task.title,
            pull_request_buttons(task.id),
        )
        text = await self.pull_requests.open_for(task)
        await self._tell_task_chat(caller, task, text)
        return text

    async def fix_ci(self, caller: Caller, task_id: int) -> str:
        """The Fix CI button: a follow-up on the task's branch that gets the failed check runs' summaries."""
        task = await self._task_for(caller, task_id)
        self._starter_or_owner(caller, task, "hand CI failures of")
        if self.pull_requests is None:
            raise ToolError("GitHub is not set up here")
        follow_up = await self.continue_task(caller, task.id, await self.pull_requests.failed_checks(task.id))
        return f"Task #{follow_up.id} started on task #{task.id}'s branch to fix CI; its commits go to the same PR."

    async def continue_task(self, caller: Caller, task_id: int, instructions: str, title: str | None = None) -> Task:
        """A follow-up on an ended task's branch (a GitHub mention on its pull request): a new code task that
        starts where the branch is; its commits go to the same pull request when it ends."""
        task = await self.store.get_task(int(task_id))
        if task is None or not task.branch:
            raise ToolError(f"task #{task_id} has no branch to continue")
        if task.status.is_active:
            raise ToolError(f"task #{task_id} is still {task.status.value}; a note reaches it instead")
        await self._check_budget()
        ws = await self._workspace_for(caller, task.workspace, instructions)
        follow_up = await self._submit(
            Task(
                chat_id=caller.chat_id,
                reply_to_message_id=caller.message_id,
                user_id=caller.user_id,
                user_name=caller.user_name,
                workspace=ws.name,
                worker=task.worker if task.worker is not WorkerKind.RESEARCH else WorkerKind.CODE,
                title=f"follow-up of #{task.id}: {title_of(title or instructions, 60)}",
                instructions=crew_texts.follow_up(task, instructions),
                branch=task.branch,
            )
        )
        return follow_up

    async def resume(self, caller: Caller, task_id: int) -> str:
        task = await self._task_for(caller, task_id)
        self._starter_or_owner(caller, task, "resume")
        if task.status is not TaskStatus.INTERRUPTED:
            return f"Task #{task_id} is {task.status.value}; only interrupted tasks can be resumed."
        steps = [e.detail for e in await self.store.task_events(task_id) if e.kind == "step"][-15:]
        notes = "steps done before the interruption: " + "; ".join(steps) if steps else "no steps recorded"
        await self.store.update_task(task_id, status=TaskStatus.PENDING, result=notes, progress_message_id=None)
        await self.store.add_event(TaskEvent(task_id=task_id, kind="status", detail="pending (resumed)"))
        self.engine.wake()
        return f"Task #{task_id} resumed on its branch."

    # ---- standing notes (agents/work/standing.py) ---------------------------------------------------------------
    async def remember(self, caller: Caller, text: str, workspace: str | None = None) -> str:
        return await self.notes.remember(caller, text, workspace)

    async def forget(self, caller: Caller, note_id: int) -> str:
        return await self.notes.forget(caller, note_id)
