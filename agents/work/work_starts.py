"""Starting work: a code task, a research task, a schedule's run and a follow-up on a task's branch all become one
stored `Task` here (made by `new_task`), checked against the roles and the budget, and wake the task engine. A
foreground task is waited on briefly, and not past the user's next message."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

from agents.core.errors import ToolError
from agents.core.keyed_locks import KeyedLocks
from agents.core.models import AttemptGroup, Caller, Schedule, Task, TaskEvent, TaskStatus, WorkerKind
from agents.core.protocols import TaskEngine
from agents.core.settings import Settings
from agents.core.user_turns import waiting_on_work
from agents.core.work_tools import Arg, Attachments, DefaultWorkspace, work_tool
from agents.git.merge import branch_merged
from agents.git.repository import branch_exists
from agents.store.database import Store
from agents.work import crew_texts
from agents.work.access import Access, task_number
from agents.work.own_words import REWORK
from agents.work.turn_scope import begin_turn, current_turn, end_turn
from agents.workspaces.folders import Workspace

FOREGROUND_PRIORITY = 10  # a task the user waits on goes before background work


def title_of(text: str, limit: int = 80) -> str:
    first = " ".join(text.strip().splitlines()[0].split()) if text.strip() else "task"
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def new_task(
    caller: Caller,
    workspace: str,
    worker: WorkerKind,
    title: str,
    instructions: str,
    *,
    reply: bool = True,
    background: bool = True,
    priority: int = 0,
    proposal_id: int | None = None,
    reworks: int | None = None,
    schedule_id: int | None = None,
    branch: str | None = None,
) -> Task:
    """The one way the crew makes a task: in the caller's conversation, as theirs, replying to their request message
    (`reply`; a schedule's run answers no message); tied to the proposal it implements (or, for research, reworks),
    the schedule that ran it, or the branch it continues."""
    return Task(
        chat_id=caller.chat_id,
        reply_to_message_id=caller.message_id if reply else None,
        user_id=caller.user_id,
        user_name=caller.user_name,
        workspace=workspace,
        worker=worker,
        title=title,
        instructions=instructions,
        background=background,
        priority=priority,
        proposal_id=proposal_id,
        reworks=reworks,
        schedule_id=schedule_id,
        branch=branch,
    )


def cleaned_criteria(criteria: list[str] | None) -> list[str]:
    """Acceptance criteria as stored: one line each, blanks dropped, at most ten."""
    return [" ".join(str(c).split()) for c in (criteria or []) if str(c).strip()][:10]


class WorkStarts:
    """Starts tasks for the tools, the schedules (it is their `Starter`) and GitHub follow-ups."""

    def __init__(self, settings: Settings, store: Store, engine: TaskEngine, access: Access) -> None:
        self.settings, self.store, self.engine, self.access = settings, store, engine, access
        self._interrupts: dict[int, asyncio.Event] = {}  # per chat: stop waiting on a foreground task
        # a follow-up and the decisions on its branch take turns (branch_decisions), by (workspace, branch)
        self.branch_locks: KeyedLocks[tuple[str, str]] = KeyedLocks()
        self._admitting: KeyedLocks[int] = KeyedLocks()  # a conversation's starts, by chat (room_for)

    def is_owner(self, caller: Caller) -> bool:
        return self.access.is_owner(caller)

    async def _attachment_ids(self, chat_id: int, ids: list[int] | None) -> list[int]:
        wanted = [int(i) for i in ids or []]
        found = [a.id for a in await self.store.chat_attachments(chat_id, wanted) if a.id is not None]
        missing = [f"#{i}" for i in wanted if i not in found]
        if missing:
            raise ToolError(f"there is no attachment {', '.join(missing)} in this chat")
        return found

    async def submit(
        self,
        task: Task,
        criteria: list[str] | None = None,
        attachments: list[int] | None = None,
        save_attachments: bool = False,
    ) -> Task:
        """Store a new task (with its criteria and the chat's attachments it is handed) and wake the engine."""
        async with self.room_for(task.chat_id, 1):
            handed = await self._attachment_ids(task.chat_id, attachments)
            task = await self.store.add_task(task, cleaned_criteria(criteria), handed, bool(save_attachments))
        await self._pending(task)
        return task

    async def submit_attempts(
        self,
        group: AttemptGroup,
        tasks: list[Task],
        criteria: list[str] | None = None,
        attachments: list[int] | None = None,
        save_attachments: bool = False,
    ) -> list[Task]:
        """Store a group of attempts and its tasks (each with the criteria and handed files) at once; wake the
        engine."""
        async with self.room_for(group.chat_id, len(tasks)):
            handed = await self._attachment_ids(group.chat_id, attachments)
            stored = await self.store.attempts.add(
                group, tasks, cleaned_criteria(criteria), handed, bool(save_attachments)
            )
        for task in stored:
            await self._pending(task)
        return stored

    async def submit_approved(self, proposal_id: int, task: Task, criteria: list[str] | None) -> Task | None:
        """Approve the proposal and store its task in one transaction, then wake the engine; None when the proposal
        was no longer pending (a double tap)."""
        async with self.room_for(task.chat_id, 1):
            approved = await self.store.approve_proposal(proposal_id, task, cleaned_criteria(criteria))
        if approved is not None:
            await self._pending(approved)
        return approved

    @contextlib.asynccontextmanager
    async def room_for(self, chat_id: int, adding: int) -> AsyncIterator[None]:
        """Refused past MAX_WAITING_TASKS: the conversation's tasks waiting or running, with the `adding` new ones.
        The body stores them (a Resume: puts its task back to pending): a conversation's starts take turns from the
        count to the store (two schedules due at once, a tap beside a turn would otherwise both count the same tasks
        and both go in)."""
        async with self._admitting.of(chat_id):
            most = self.settings.tasks.max_waiting_tasks
            active = await self.store.count_tasks(chat_id, [TaskStatus.PENDING, TaskStatus.IN_PROGRESS])
            if active + adding > most:
                raise ToolError(
                    f"this conversation has {active} task(s) waiting or running, and {most} is the most "
                    f"(MAX_WAITING_TASKS): start more when some have ended, or cancel some"
                )
            yield

    async def _pending(self, task: Task) -> None:
        await self.store.add_event(TaskEvent(task_id=task.id, kind="status", detail=TaskStatus.PENDING.value))
        turn = current_turn()  # set while a turn runs, in the turn's own asyncio context alone
        if turn is not None and task.schedule_id is None:  # a schedule's run is the schedule's, not the turn's
            turn.tasks.append(task)
        self.engine.wake()

    @work_tool
    async def start_research(
        self,
        caller: Caller,
        workspace: DefaultWorkspace,
        request: Annotated[str, Arg("what to study and propose, self-contained")],
        refines: Annotated[int | None, Arg("id of the proposal being changed (optional)")] = None,
        attachments: Attachments = None,
    ) -> str:
        """Start the read-only research worker on a workspace; it writes a proposal that is shown to the user with
        Approve/Reject buttons. Use for improvement/refactor/review requests, and to rework a proposal (pass its id
        as refines: the worker then sees that proposal whole and the new one replaces it; only when the user asked
        for a change). Without refines, the proposals still pending stay pending beside the new one."""
        self.access.hands_nothing_of_the_chat(caller, proposal=refines is not None, attachments=attachments)
        await self.access.check_budget()
        instructions = request
        if refines is not None:
            old = await self.access.chat_proposal(caller.chat_id, refines)
            self.access.decides(caller, old, "rework")
            # the new proposal replaces the one the user is deciding: their own words must ask for a change
            await self.access.asked_for(caller, REWORK, f"**proposal #{old.id}**")
            workspace = old.workspace
            instructions = crew_texts.refine_request(request, old)
        ws = await self.access.workspace_for(caller, workspace, f"research: {request}")
        research = new_task(
            caller,
            ws.name,
            WorkerKind.RESEARCH,
            f"research: {title_of(request, 70)}",
            instructions,
            priority=FOREGROUND_PRIORITY,
            reworks=refines,
        )
        task = await self.submit(research, attachments=attachments)
        return crew_texts.research_started(task.id, ws.name)

    async def start_one(
        self,
        caller: Caller,
        workspace: str,
        worker_kind: str,
        instructions: str,
        background: bool,
        criteria: list[str] | None = None,
        attachments: list[int] | None = None,
        save_attachments: bool = False,
    ) -> str:
        """One code, frontend or test task (the start_task tool, attempts.py, with one attempt); in the foreground the
        answer waits briefly for its end."""
        await self.access.check_budget()
        try:
            kind: WorkerKind | None = WorkerKind(str(worker_kind).strip().lower())
        except ValueError:
            kind = None
        if kind is None or kind is WorkerKind.RESEARCH:
            raise ToolError(
                f"worker must be one of code, frontend, test (got {worker_kind!r}); use start_research for research"
            )
        ws = await self.access.workspace_for(caller, workspace, instructions)
        background = bool(background)
        code = new_task(
            caller,
            ws.name,
            kind,
            title_of(instructions),
            instructions,
            background=background,
            priority=0 if background else FOREGROUND_PRIORITY,
        )
        task_id = task_number(
            await self.submit(code, criteria=criteria, attachments=attachments, save_attachments=save_attachments)
        )
        if background:
            return (
                f"Task #{task_id} ({kind.value} worker, workspace {ws.name}) started in the background; the user "
                "sees its progress and gets a summary when it ends."
            )
        if not await self._wait_briefly(caller.chat_id, task_id):
            await self.store.update_task(task_id, background=True)
            return crew_texts.still_running(task_id)
        done = await self.access.task(task_id)
        if not done.status.is_final:  # the wait ended without the task (the bot is stopping): no summary was sent
            return crew_texts.not_ended(task_id, done.status.value)
        return (
            f"Task #{task_id} ended with status {done.status.value}. "
            f"{done.error or ''} Worker's report: {(done.result or '(none)')[:1500]} "
            "(the summary with files, tests and commit was already sent to the user)."
        )

    async def _wait_briefly(self, chat_id: int, task_id: int) -> bool:
        """Wait for a foreground task at most FOREGROUND_WAIT_SECONDS, and not past a new message in the chat."""
        interrupt = self._interrupts.setdefault(chat_id, asyncio.Event())
        done, interrupted = asyncio.ensure_future(self.engine.wait(task_id)), asyncio.ensure_future(interrupt.wait())
        try:
            with waiting_on_work():  # the task's own steps that yield to users' turns must not yield to this one
                await asyncio.wait(
                    {done, interrupted},
                    timeout=self.settings.orchestrator.foreground_wait_seconds,
                    return_when=asyncio.FIRST_COMPLETED,
                )
        finally:
            for waiter in (done, interrupted):
                waiter.cancel()
        return done.done() and not done.cancelled()

    def stop_waiting(self, chat_id: int) -> None:
        """A new message arrived in the chat: a turn waiting on a foreground task stops waiting and answers."""
        self._interrupts.setdefault(chat_id, asyncio.Event()).set()

    def turn_started(self, chat_id: int, said: str = "", replied: tuple[str, int] | None = None) -> None:
        """A turn begins, in the asyncio task that runs it: the tasks its tool calls store are collected in its scope
        (turn_scope.py), never those a button, a schedule or another conversation's turn stores meanwhile."""
        self._interrupts.setdefault(chat_id, asyncio.Event()).clear()
        begin_turn(said, replied)

    def turn_ended(self, chat_id: int) -> list[Task]:
        """The turn ended (called in the task that began it): the tasks its own tool calls stored, a schedule's runs
        aside (see WorkDesk.turn_ended)."""
        return end_turn().tasks

    async def schedule_workspace(self, caller: Caller, workspace: str, request: str) -> Workspace:
        """The workspace a new schedule of the caller's works in, checked as a request of theirs would be."""
        return await self.access.workspace_for(caller, workspace, request)

    async def start_scheduled(self, caller: Caller, schedule: Schedule) -> Task:
        """A schedule's run: the task or research its maker (`caller`) would start, checked as theirs at this run."""
        await self.access.check_budget()
        ws = await self.access.workspace_for(
            caller, schedule.workspace, f"for schedule #{schedule.id}: {schedule.instructions}", stored=True
        )
        title = f"schedule #{schedule.id}: {title_of(schedule.instructions, 60)}"
        if schedule.worker is WorkerKind.RESEARCH:
            title = f"research ({title})"
        run = new_task(
            caller, ws.name, schedule.worker, title, schedule.instructions, reply=False, schedule_id=schedule.id
        )
        return await self.submit(run)

    async def on_its_branch(self, task: Task) -> list[Task]:
        """The other tasks working on the task's branch, or interrupted on it (their Resume goes on there): they
        share its worktree."""
        if not task.branch:
            return []
        active = await self.store.list_tasks(statuses=TaskStatus.cancellable(), limit=1000)
        return [t for t in active if t.branch == task.branch and t.workspace == task.workspace and t.id != task.id]

    async def continue_task(self, caller: Caller, task_id: int, instructions: str, title: str | None = None) -> Task:
        """A follow-up on an ended task's branch (a GitHub mention on its pull request, the Fix CI button): a new
        code task that starts where the branch is; its commits go to the same pull request when it ends."""
        task = await self.store.get_task(int(task_id))
        if task is None or not task.branch:
            raise ToolError(f"task #{task_id} has no branch to continue")
        async with self.branch_locks.of((task.workspace, task.branch)):  # never beside a Discard of that branch
            return await self._continue(caller, task, task.branch, instructions, title)

    async def _continue(self, caller: Caller, task: Task, branch: str, instructions: str, title: str | None) -> Task:
        if task.status.is_active:
            raise ToolError(f"task #{task.id} is still {task.status.value}; a note reaches it instead")
        if task.status is TaskStatus.INTERRUPTED:  # its worktree is kept for its Resume, which would run beside this
            raise ToolError(f"task #{task.id} was interrupted; Resume or Discard it first")
        self.access.starter_or_owner(caller, task, "continue")  # Fix CI's rule, for every way a follow-up is asked
        if others := await self.on_its_branch(task):  # one worker at a time in a branch's worktree
            raise ToolError(
                f"task {', '.join(f'#{t.id} ({t.status.value})' for t in others)} is still on task #{task.id}'s "
                "branch; continue it when that has ended (an interrupted one: Resume or cancel it first)"
            )
        await self.access.check_budget()
        ws = await self.access.workspace_for(caller, task.workspace, instructions, stored=True)
        if not await branch_exists(ws.path, branch):  # discarded (or deleted by hand): nothing to continue
            raise ToolError(f"task #{task.id}'s branch {branch} no longer exists (discarded?): nothing to continue")
        base = task.base_branch or "main"
        if task.base_commit and await branch_merged(ws.path, branch, base, task.base_commit):
            # its work is in the base branch already: new commits on it would read as unmerged work of a merged task
            raise ToolError(f"task #{task.id} was merged into {base} already; start a new task for more work")
        worker = task.worker if task.worker is not WorkerKind.RESEARCH else WorkerKind.CODE
        follow_up = new_task(
            caller,
            ws.name,
            worker,
            f"follow-up of #{task.id}: {title_of(title or instructions, 60)}",
            crew_texts.follow_up(task, instructions),
            branch=branch,
        )
        return await self.submit(follow_up)
