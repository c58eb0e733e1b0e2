"""`agentlab runner`: a process, on any machine, that executes the bot's tasks taken from the Temporal cluster.

It is the bot's own TaskExecutor (worktree, worker loop, sandboxed commands, base-commit verdict, commit) on this
machine's WORKSPACE_PATH (clones of the bot's workspaces, matched by name) with this machine's ANTHROPIC_API_KEY,
and a store of its own (DATABASE_PATH): each task is mirrored into it under the bot's task number. What the task
shows in the chat goes through its workflow to the bot (`ChatThroughWorkflow`); its summary comes back in the
report, which the bot delivers. The task branch is pushed to RUNNER_REMOTE (`origin`) at the end, from where the
bot fetches it for Diff / Merge / Discard.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import logging
from dataclasses import dataclass
from datetime import datetime

from temporalio import activity
from temporalio.client import Client, WorkflowUpdateStage
from temporalio.worker import Worker

from agents.core.actions import Buttons
from agents.core.errors import ToolError
from agents.core.models import Task, TaskEvent, TaskStatus, WorkerKind, utcnow
from agents.core.secrets_filter import remember
from agents.core.settings import Settings
from agents.engine import cluster
from agents.engine.payloads import (
    EXECUTE,
    POKE,
    Claim,
    NotifyCall,
    Poke,
    ShownMessage,
    TaskReport,
    TaskStart,
    encode_buttons,
)
from agents.engine.workflow import AgentTask
from agents.git.remote import catch_up, fetch_branch, has_remote, push_branch
from agents.git.repository import rev_parse
from agents.git.runner import GitError
from agents.llm.client import make_client
from agents.repo_map.maps import RepoMap
from agents.sandbox.services import sweep_leftovers
from agents.sandbox.task_limits import sandbox_limit_warnings
from agents.store.database import Store
from agents.tools.workspaces import Workspaces
from agents.work.orphans import instance_token, kill_orphans
from agents.work.task_execution import TaskExecutor

log = logging.getLogger(__name__)

SEND_SECONDS = 120.0  # a chat message through the workflow and the bot (which may be restarting)
MAX_AUDIT_ROWS = 500  # the newest tool calls go back in the report (arguments are summarised: ≤ 300 characters)
ACCEPT_SECONDS = 20.0  # a progress edit is handed to the workflow within this, or dropped


@dataclass(frozen=True)
class Route:
    workflow_id: str
    task_id: int


ROUTE: contextvars.ContextVar[Route] = contextvars.ContextVar("agentlab_task_route")  # set per task, inherited


class ChatThroughWorkflow:
    """The runner's Notifier: each call is an update of the task's workflow, which has the bot show it."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def _call(self, call: NotifyCall, seconds: float) -> int | None:
        route = ROUTE.get(None)
        if route is None:
            log.warning("a chat message outside any task was dropped: %s", call.text[:80])
            return None
        handle = self.client.get_workflow_handle(route.workflow_id)
        async with asyncio.timeout(seconds):
            return await handle.execute_update(AgentTask.notify, call)

    def _task_id(self) -> int:
        route = ROUTE.get(None)
        return route.task_id if route else 0

    async def send(
        self,
        chat_id: int,
        markdown: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        literal: bool = False,
    ) -> int | None:
        call = NotifyCall(
            self._task_id(), chat_id, "send", markdown, encode_buttons(buttons), reply_to=reply_to, literal=literal
        )
        return await self._call(call, SEND_SECONDS)

    async def edit(
        self, chat_id: int, message_id: int, markdown: str, *, buttons: Buttons | None = None, literal: bool = False
    ) -> None:
        """Handed to the workflow, not waited for: the worker never waits on a bot that is away (the workflow drops
        an edit the bot has not taken within its EDIT_SECONDS; the next one shows the whole progress anyway)."""
        route = ROUTE.get(None)
        if route is None:
            return
        call = NotifyCall(
            route.task_id, chat_id, "edit", markdown, encode_buttons(buttons), message_id=message_id, literal=literal
        )
        handle = self.client.get_workflow_handle(route.workflow_id)
        async with asyncio.timeout(ACCEPT_SECONDS):
            await handle.start_update(AgentTask.notify, call, wait_for_stage=WorkflowUpdateStage.ACCEPTED)

    async def send_document(
        self, chat_id: int, filename: str, data: bytes, caption: str = "", *, literal: bool = False
    ) -> None:
        b64 = base64.b64encode(data).decode()
        await self._call(
            NotifyCall(self._task_id(), chat_id, "send_document", caption, None, None, None, filename, b64, literal),
            SEND_SECONDS,
        )

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        b64 = base64.b64encode(data).decode()
        await self._call(NotifyCall(self._task_id(), chat_id, "send_photo", caption, data_b64=b64), SEND_SECONDS)


class SummariesToReport:
    """Stands in for the executor's outbox: a task's summary goes back in its report, and the bot delivers it."""

    def __init__(self) -> None:
        self.kept: dict[int, list[ShownMessage]] = {}

    async def deliver(
        self,
        chat_id: int,
        markdown: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        kind: str = "notice",
        task_id: int | None = None,
    ) -> int | None:
        self.kept.setdefault(task_id or 0, []).append(ShownMessage(markdown, kind, encode_buttons(buttons), reply_to))
        return None


class RunnerNode:
    """One runner: its store, its executor, and the two Temporal workers (the shared queue, its own)."""

    def __init__(self, settings: Settings, store: Store, client: Client, executor: TaskExecutor) -> None:
        self.settings, self.store, self.client, self.executor = settings, store, client, executor
        self.name = cluster.runner_name(settings)
        self.queue = cluster.runner_queue(settings, self.name)
        self.summaries: SummariesToReport = executor.deliveries  # type: ignore[assignment]
        self.jobs: dict[int, asyncio.Task[None]] = {}

    @classmethod
    async def open(cls, settings: Settings) -> RunnerNode:
        remember([settings.anthropic_api_key.get_secret_value()])  # masked in everything the chat sees
        if settings.sandbox == "off":
            log.warning("SANDBOX=off: this runner's task commands are NOT confined; set SANDBOX=bwrap")
        for warning in sandbox_limit_warnings(settings.sandbox_network != "off") if settings.sandbox != "off" else []:
            log.warning("%s", warning)
        await asyncio.to_thread(sweep_leftovers)  # the services' logs a killed bot or runner left behind
        client = await cluster.connect(settings, identity=cluster.runner_name(settings))
        store = await Store.open(settings.database_path)
        killed_mid_task = await store.interrupt_running_tasks()  # this runner was killed: their commands go too
        if killed_mid_task:
            await asyncio.to_thread(
                kill_orphans, instance_token(settings.database_path), {t.id for t in killed_mid_task}
            )
        executor = TaskExecutor(
            settings,
            store,
            make_client(settings),
            Workspaces(settings.workspace_path, settings.bot_repository),
            ChatThroughWorkflow(client),
            RepoMap(store),
            SummariesToReport(),  # type: ignore[arg-type]
        )
        return cls(settings, store, client, executor)

    def workers(self) -> list[Worker]:
        return [
            Worker(
                self.client,
                task_queue=self.settings.temporal_task_queue,
                workflows=[AgentTask],
                activities=[self.execute],
                max_concurrent_activities=self.settings.max_concurrent_tasks,
            ),
            Worker(self.client, task_queue=self.queue, activities=[self.poke]),
        ]

    async def serve(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; then running tasks end `interrupted` (resumable), their processes killed."""
        workers = self.workers()
        log.info(
            "runner %s: taking tasks from %s (own queue %s)", self.name, self.settings.temporal_task_queue, self.queue
        )
        async with contextlib.AsyncExitStack() as stack:
            for worker in workers:
                await stack.enter_async_context(worker)
            await stop.wait()
            self.executor.stopping = True
            for job in self.jobs.values():
                job.cancel()
            if self.jobs:
                await asyncio.wait(list(self.jobs.values()), timeout=5)
        await self.executor.client.close()
        await self.store.close()

    # ---- activities ----------------------------------------------------------------------------
    @activity.defn(name=EXECUTE)
    async def execute(self, start: TaskStart, lost: list[str]) -> TaskReport:
        """Run the task here, heartbeating; a cancel (poke or Temporal's) stops it and every process it started."""
        wf_id = activity.info().workflow_id
        await self.client.get_workflow_handle(wf_id).signal(AgentTask.claimed, Claim(self.name, self.queue))
        since = utcnow()
        task = await self._mirror(start, lost)
        problem = await self._prepare(task)
        if problem:
            return TaskReport(task.id, TaskStatus.FAILED.value, self.name, error=problem)
        ROUTE.set(Route(wf_id, task.id))  # the job (created below) inherits it: its chat calls find the workflow
        job = asyncio.create_task(self.executor.execute(task), name=f"task-{task.id}")
        self.jobs[task.id] = job
        pushed: str | None = None
        try:
            while not job.done():
                activity.heartbeat()
                await asyncio.wait({job}, timeout=max(0.5, start.heartbeat_seconds / 4))
                pushed = await self._push_progress(task.id, wf_id, pushed)
            await job
        except asyncio.CancelledError:
            if not job.done():  # Temporal cancelled this activity: stop the task like /cancel does
                job.cancel()
                with contextlib.suppress(BaseException):
                    await job
            if self.executor.stopping:
                raise
            await self._cancelled(task)
        except Exception:
            log.exception("task %s crashed", task.id)
            await self.executor.set_status(task, TaskStatus.FAILED, error="internal error (see the runner's log)")
        finally:
            self.jobs.pop(task.id, None)
        return await self._report(task, since)

    @activity.defn(name=POKE)
    async def poke(self, poke: Poke) -> bool:
        """A note, a network answer or a cancel for a task running here."""
        ROUTE.set(Route(activity.info().workflow_id, poke.task_id))  # "note received" is shown from here
        if poke.kind == "note":
            return await self.executor.inboxes.post(poke.task_id, poke.text)
        if poke.kind == "network":
            self.executor.network.decide(poke.chat_id, poke.request_id, poke.choice)
            return True
        job = self.jobs.get(poke.task_id)
        if job is None or job.done():
            return False
        job.cancel()  # the executor commits what was done, kills the task's processes and removes its worktree
        return True

    # ---- steps ---------------------------------------------------------------------------------
    async def _mirror(self, start: TaskStart, lost: list[str]) -> Task:
        notes = start.notes
        if lost:
            notes = (notes + "; " if notes else "") + f"a runner running this task was lost ({lost[-1]})"
        task = Task(
            id=start.task_id,
            chat_id=start.chat_id,
            reply_to_message_id=start.reply_to_message_id,
            workspace=start.workspace,
            worker=WorkerKind(start.worker),
            title=start.title,
            instructions=start.instructions,
            branch=start.branch,
            result=notes,
            status=TaskStatus.IN_PROGRESS,
            started_at=utcnow(),
        )
        await self.store.mirror_task(task, start.criteria)
        await self.store.add_event(TaskEvent(task_id=task.id, kind="runner", detail=f"running on {self.name}"))
        return task

    async def _prepare(self, task: Task) -> str | None:
        """The workspace's clone caught up with the shared remote, and a resumed task's branch fetched from it."""
        try:
            workspace = self.executor.workspaces.resolve(task.workspace)
        except ToolError as err:
            return f"runner {self.name} has no workspace {task.workspace!r}: {err}"
        remote = self.settings.runner_remote
        if not await has_remote(workspace.path, remote):
            return None  # a clone without the shared remote: its branch cannot come home, the summary says so
        why = await catch_up(workspace.path, remote)
        if why:
            log.warning("task %s: %s not caught up with %s: %s", task.id, workspace.name, remote, why)
        if task.branch:
            with contextlib.suppress(GitError):
                await fetch_branch(workspace.path, task.branch, remote)
        return None

    async def _cancelled(self, task: Task) -> None:
        await self.executor.set_status(task, TaskStatus.CANCELLED)

    async def _report(self, task: Task, since: datetime) -> TaskReport:
        row = await self.store.get_task(task.id)
        assert row is not None
        report = TaskReport(
            task_id=task.id,
            status=row.status.value,
            runner=self.name,
            result=row.result,
            error=row.error,
            commit_sha=row.commit_sha,
            branch=row.branch,
            base_branch=row.base_branch,
            base_commit=row.base_commit,
            events=[[e.kind, e.detail] for e in await self.store.task_events(task.id) if e.created_at >= since],
            verified=[[str(c.idx), c.evidence or ""] for c in await self.store.criteria(task.id) if c.verified],
            usage=[u.model_dump_json() for u in await self.store.usage_since(since, task_id=task.id)],
            tool_calls=[
                c.model_dump_json()
                for c in (await self.store.tool_calls(task.id))[-MAX_AUDIT_ROWS:]
                if c.created_at >= since
            ],
            shown=self.summaries.kept.pop(task.id, []),
        )
        if row.branch:
            report.pushed, report.push_error = await self._push(row)
        return report

    async def _push_progress(self, task_id: int, wf_id: str, pushed: str | None) -> str | None:
        """While the task runs: a new commit on its branch is pushed, and the workflow told, so a runner taking over
        after this one is lost starts from it. Returns the commit pushed last."""
        row = await self.store.get_task(task_id)
        if row is None or not row.branch or not row.status.is_active:
            return pushed
        workspace = self.executor.workspaces.resolve(row.workspace)
        try:
            head = await rev_parse(workspace.path, f"refs/heads/{row.branch}")
            if head in (pushed, row.base_commit) or not await has_remote(workspace.path, self.settings.runner_remote):
                return pushed
            await push_branch(workspace.path, row.branch, self.settings.runner_remote)
            await self.client.get_workflow_handle(wf_id).signal(AgentTask.pushed, row.branch)
        except Exception as err:  # the next heartbeat tries again; the task goes on either way
            log.warning("task %s: progress not pushed: %s", task_id, err)
            return pushed
        return head

    async def _push(self, task: Task) -> tuple[bool, str | None]:
        workspace = self.executor.workspaces.resolve(task.workspace)
        if not await has_remote(workspace.path, self.settings.runner_remote):
            return False, f"the runner's clone of {workspace.name} has no remote {self.settings.runner_remote!r}"
        try:
            await push_branch(workspace.path, task.branch or "", self.settings.runner_remote)
        except GitError as err:
            return False, str(err)[:300]
        return True, None


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    node = await RunnerNode.open(settings)
    await node.serve(stop)


def run_forever(settings: Settings) -> int:
    """`agentlab runner`: serve until SIGTERM / SIGINT (running tasks become `interrupted` here and move on)."""
    import signal

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await serve(settings, stop)
        except ConnectionError as err:
            log.error("%s", err)
            return 1
        return 0

    return asyncio.run(main())
