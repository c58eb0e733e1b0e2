"""`agentlab runner`: a process, on any machine, that executes the bot's tasks taken from the Temporal cluster.

It is the bot's own TaskExecutor (worktree, worker loop, sandboxed commands, base-commit verdict, commit) on this
machine's WORKSPACE_PATH (clones of the bot's workspaces, matched by name) with this machine's ANTHROPIC_API_KEY,
and a store of its own (DATABASE_PATH): each task is mirrored into it under the bot's task number. What the task
shows in the chat goes through its workflow to the bot (`ChatThroughWorkflow`); so do the usage rows its model
calls record, as they are recorded (`UsageToBot`: the bot's daily budget counts a running task's spend), and before
each model call the task asks the bot's figure of the day's spending. Its summary comes back in the report, which the
bot delivers. The task branch is pushed to RUNNER_REMOTE (`origin`) at the end, from where the
bot fetches it for Diff / Merge / Discard.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anthropic
from temporalio import activity
from temporalio.client import Client, WorkflowUpdateStage
from temporalio.worker import Worker as TemporalWorker

from agents.core.actions import Buttons
from agents.core.errors import ToolError
from agents.core.models import (
    Attachment,
    AttachmentKind,
    Delivery,
    Task,
    TaskEvent,
    TaskStatus,
    WorkerKind,
    utcnow,
)
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.engine import cluster
from agents.engine.branch_pushes import BranchPushes
from agents.engine.payloads import (
    EXECUTE,
    POKE,
    Claim,
    DaySpending,
    FilePart,
    NotifyCall,
    Poke,
    Shown,
    ShownMessage,
    TaskReport,
    TaskStart,
    UsageCall,
    UsageRow,
    encode_buttons,
    usage_key,
)
from agents.engine.task_policy import bound_settings
from agents.engine.workflow import AgentTask
from agents.git.command import GitError
from agents.git.remote import catch_up, fetch_branch, has_remote
from agents.inputs.attachments import Attachments
from agents.llm.calls_in_flight import IN_FLIGHT
from agents.llm.client import cost_usd, make_client
from agents.llm.usage import budget_refusal, cost_today
from agents.repo_map.maps import RepoMap
from agents.sandbox import task_disk
from agents.sandbox.bwrap import NetworkPolicy, SandboxProbe
from agents.sandbox.network_gate import NetworkGate
from agents.sandbox.safe_paths import UnsafePath, write_file
from agents.sandbox.task_limits import sandbox_limit_warnings
from agents.sandbox.temp_folders import sweep_leftovers
from agents.store.database import Store
from agents.store.delivery import decode_buttons as stored_buttons
from agents.verify.baseline import BaselineRuns
from agents.work.orphans import instance_token, kill_orphans
from agents.work.task_execution import TaskExecutor
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

SEND_SECONDS = 120.0  # a chat message through the workflow and the bot (which may be restarting)
MAX_AUDIT_ROWS = 500  # the newest tool calls go back in the report (arguments are summarised: ≤ 300 characters)
ACCEPT_SECONDS = 20.0  # a progress edit is handed to the workflow within this, or dropped
ASK_SECONDS = 15.0  # the bot's figure of the day's spending, or the task counts the offer's figure and its own
ASK_AGAIN_SECONDS = 60.0  # a bot that did not answer is not asked again before this (each model call would wait)


class ChatThroughWorkflow:
    """A task run's Notifier on a runner: each call is an update of that task's workflow, which has the bot show it.
    One per task run (its workflow id is given here), so a message never needs to be routed by anything else."""

    def __init__(self, client: Client, workflow_id: str, task_id: int) -> None:
        self.handle = client.get_workflow_handle(workflow_id)
        self.task_id = task_id

    async def _call(self, call: NotifyCall) -> Shown:
        async with asyncio.timeout(SEND_SECONDS):
            return await self.handle.execute_update(AgentTask.notify, call)  # type: ignore[arg-type]  # temporalio's update(unfinished_policy=...) overload keeps the coroutine in its type

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
            self.task_id, chat_id, "send", markdown, encode_buttons(buttons), reply_to=reply_to, literal=literal
        )
        return (await self._call(call)).message_id

    async def edit(
        self, chat_id: int, message_id: int, markdown: str, *, buttons: Buttons | None = None, literal: bool = False
    ) -> None:
        """Handed to the workflow, not waited for: the worker never waits on a bot that is away (the workflow drops
        an edit the bot has not taken within its EDIT_SECONDS; the next one shows the whole progress anyway)."""
        call = NotifyCall(
            self.task_id, chat_id, "edit", markdown, encode_buttons(buttons), message_id=message_id, literal=literal
        )
        async with asyncio.timeout(ACCEPT_SECONDS):
            await self.handle.start_update(AgentTask.notify, call, wait_for_stage=WorkflowUpdateStage.ACCEPTED)

    async def send_document(
        self, chat_id: int, filename: str, data: bytes, caption: str = "", *, literal: bool = False
    ) -> None:
        b64 = base64.b64encode(data).decode()
        await self._call(
            NotifyCall(
                self.task_id, chat_id, "send_document", caption, filename=filename, data_b64=b64, literal=literal
            )
        )

    async def send_photo(self, chat_id: int, data: bytes, caption: str = "") -> None:
        b64 = base64.b64encode(data).decode()
        await self._call(NotifyCall(self.task_id, chat_id, "send_photo", caption, data_b64=b64))

    async def send_album(self, chat_id: int, pictures: list[tuple[str, bytes]]) -> None:
        """From a runner, each picture of an album goes as a photo of its own (the bot's NOTIFY has no albums)."""
        for caption, png in pictures:
            await self.send_photo(chat_id, png, caption)

    async def ask_owners(
        self, chat_id: int, markdown: str, *, buttons: Buttons | None = None, literal: bool = False
    ) -> list[tuple[int, int]]:
        """Where the bot's OWNER_USER_IDS see it (the bot knows who they are and where they read)."""
        call = NotifyCall(self.task_id, chat_id, "ask_owners", markdown, encode_buttons(buttons), literal=literal)
        shown = await self._call(call)
        return [(chat, message) for chat, message in shown.copies]

    async def buttons_settled(self) -> None:
        """Buttons a runner's task shows are recorded by the bot that shows them; nothing is pressed here."""

    async def file_part(self, file_id: int, offset: int) -> bytes:
        part = FilePart(self.task_id, file_id, offset)
        return await self.handle.execute_update(AgentTask.file_part, part)  # type: ignore[arg-type]  # temporalio's update(unfinished_policy=...) overload keeps the coroutine in its type


class UsageToBot:
    """A task run's usage rows, sent to the bot through its workflow as they are recorded in this runner's store (the
    bot stores them as the task's own at once), and the bot's figure of the day's spending.

    `forward` sends the rows recorded since it last ran: before each model call (so the bot's figure holds the
    previous call) and every few seconds while the task runs (a task busy in a command shows its spend). A row handed
    to the workflow is not sent again; one it never took comes home in the report, which carries every row of the
    run (the workflow leaves out those the bot stored)."""

    def __init__(self, client: Client, workflow_id: str, start: TaskStart, runner: str, after: int) -> None:
        """`after`: the task's newest usage row in this store at the claim (an earlier run's are not this run's)."""
        self.handle = client.get_workflow_handle(workflow_id)
        self.start, self.runner = start, runner
        self.first = self.after = after  # rows after `first` are this run's; after `after`, not yet handed over
        self._sending = asyncio.Lock()
        self._soon: asyncio.Task[None] | None = None  # `forward_soon`'s send under way
        self._unanswered_at: float | None = None  # when the bot last did not answer (loop time)

    async def forward(self, store: Store) -> None:
        async with self._sending:
            rows = await store.task_usage(self.start.task_id, after=self.after)
            if not rows:
                return
            records = [u.model_dump_json() for u in rows]
            call = UsageCall(
                self.start.task_id, self.start.chat_id, [UsageRow(usage_key(self.runner, r), r) for r in records]
            )
            try:
                async with asyncio.timeout(ACCEPT_SECONDS):
                    await self.handle.start_update(AgentTask.usage, call, wait_for_stage=WorkflowUpdateStage.ACCEPTED)
            except Exception as err:  # the cluster is away: sent with the next rows, or in the report
                log.info("task %s: usage rows not handed to its workflow: %s", self.start.task_id, err)
                return
            self.after = max(u.id or 0 for u in rows)

    def forward_soon(self, store: Store) -> None:
        """`forward` in the background (a model call without a budget to check does not wait for the bot): one at a
        time, the rows of calls meanwhile going with the next."""
        if self._soon is None or self._soon.done():
            self._soon = asyncio.create_task(self.forward(store))

    async def day(self) -> DaySpending | None:
        """The bot's budget and spending today (every runner's tasks, as their rows reached it), or None when the
        bot cannot be asked now (nor for ASK_AGAIN_SECONDS after it did not answer)."""
        now = asyncio.get_running_loop().time()
        if self._unanswered_at is not None and now - self._unanswered_at < ASK_AGAIN_SECONDS:
            return None
        try:
            async with asyncio.timeout(ASK_SECONDS):
                day: DaySpending = await self.handle.execute_update(AgentTask.spending)  # type: ignore[arg-type]  # temporalio's update(unfinished_policy=...) overload keeps the coroutine in its type
        except Exception as err:
            self._unanswered_at = now
            log.info("task %s: the bot's spending not known (%s): counted from the offer", self.start.task_id, err)
            return None
        self._unanswered_at = None
        return day


class SummariesToReport:
    """Stands in for the executor's outbox: a task's summary goes back in its report, and the bot delivers it (its
    end is stored in the runner's own store; the report carries both)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.kept: dict[int, list[ShownMessage]] = {}

    async def end_owing(self, task_id: int, fields: dict[str, Any], event: TaskEvent, owed: Delivery) -> Delivery:
        await self.store.update_task(task_id, **fields)
        await self.store.add_event(event)
        buttons = stored_buttons(owed.buttons)  # the outbox's encoding, back to buttons for the report's
        await self.deliver(
            owed.chat_id, owed.text, buttons=buttons, reply_to=owed.reply_to, kind=owed.kind, task_id=owed.task_id
        )
        return owed

    async def send_stored(self, owed: Delivery) -> int | None:
        return None  # kept for the report by `end_owing`

    async def deliver(
        self,
        chat_id: int,
        markdown: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        kind: str = "notice",
        task_id: int | None = None,
        shown_record: int | None = None,  # this store's record: the bot keeps its own when it shows the report
    ) -> int | None:
        self.kept.setdefault(task_id or 0, []).append(ShownMessage(markdown, kind, encode_buttons(buttons), reply_to))
        return None


def runner_secrets(settings: Settings) -> SecretsFilter:
    """A runner's output filter: every secret its settings hold (the model's key, and those a runner sharing the bot's
    .env holds too and never uses), masked in everything the chat sees."""
    secrets = SecretsFilter()
    secrets.add(settings.secret_values())
    return secrets


@dataclass
class TaskRun:
    """A task running here: the executor built for it (its chat, its network gate, its summaries) and its job."""

    executor: TaskExecutor
    chat: ChatThroughWorkflow
    summaries: SummariesToReport
    usage: UsageToBot
    job: asyncio.Task[str | None] | None = None
    cancelled: bool = False  # a cancel that came before its job started


class RunnerNode:
    """One runner: its store, the collaborators its task runs share, and the two Temporal workers (the shared queue,
    its own). Each task run gets an executor of its own, built with the chat of that task's workflow."""

    def __init__(
        self, settings: Settings, store: Store, client: Client, llm: anthropic.AsyncAnthropic, secrets: SecretsFilter
    ) -> None:
        """`secrets`: this runner's output filter (`runner_secrets`), given to every task run's executor."""
        self.settings, self.store, self.client, self.llm = settings, store, client, llm
        self.secrets = secrets
        self.probe = SandboxProbe()  # does bwrap work here: asked by every task run's commands
        self.name = cluster.runner_name(settings)
        self.queue = cluster.runner_queue(settings, self.name)
        # the data and worktrees folders are never a workspace
        self.workspaces = Workspaces(
            settings.paths.workspace_path, settings.paths.bot_repository, settings.paths.private_dirs
        )
        self.repo_map = RepoMap(store)
        self.baselines = BaselineRuns(settings.paths.worktrees_dir / "test-baselines")  # shared by concurrent task runs
        self.attachments = Attachments.from_settings(settings)
        self.runs: dict[int, TaskRun] = {}
        self.pushes = BranchPushes(settings.engine.runner_remote, store, self.workspaces, client)
        self.stopping = False

    @classmethod
    async def open(cls, settings: Settings) -> RunnerNode:
        secrets = runner_secrets(settings)
        if settings.sandboxing.sandbox == "off":
            log.warning("SANDBOX=off: this runner's task commands are NOT confined; set SANDBOX=bwrap")
        for warning in (
            sandbox_limit_warnings(settings.network.sandbox_network != "off")
            if settings.sandboxing.sandbox != "off"
            else []
        ):
            log.warning("%s", warning)
        await asyncio.to_thread(sweep_leftovers)  # the temporary folders a killed bot or runner left behind
        # kept worktrees' own file systems after a restart (agents/sandbox/task_disk.py)
        for done in await task_disk.recover(
            settings.paths.worktrees_dir, settings.sandboxing.sandbox_disk_fs == "auto"
        ):
            log.info("task worktree file system: %s", done)
        client = await cluster.connect(settings, identity=cluster.runner_name(settings))
        store = await Store.open(settings.paths.database_path)
        killed_mid_task = await store.interrupt_running_tasks()  # this runner was killed: their commands go too
        if killed_mid_task:
            await asyncio.to_thread(
                kill_orphans, instance_token(settings.paths.database_path), {t.stored_id for t in killed_mid_task}
            )
        return cls(settings, store, client, make_client(settings), secrets)

    def task_run(
        self, start: TaskStart, workflow_id: str, spent_here_before: float = 0.0, usage_after: int = 0
    ) -> TaskRun:
        """The executor of one task run: its chat is the task's workflow; whether its starter is an owner is the
        bot's word (the bot's roles, not this machine's settings): where its network questions go, and whether it may
        reach the bot's own code. So is the daily budget: before each model call the task's new usage rows go to the
        bot (`UsageToBot`, from after `usage_after`, its newest row here at the claim), and the task stops once the
        bot's spending today (every runner's tasks), with the calls under way on the bot and here, reaches the bot's
        DAILY_BUDGET_USD. When the bot cannot be asked, its spending when it offered the task counts, plus what this
        runner spent since (`spent_here_before`: this store's spending today at the claim). The task's bounds (network,
        steps, tokens, time, sandbox limits, commit sizes, MCP gates) are the stricter of the bot's (`start.policy`)
        and this runner's own (agents/engine/task_policy.py): a runner's .env never loosens what the bot's owner set."""
        s = bound_settings(self.settings, start.policy)
        usage = UsageToBot(self.client, workflow_id, start, self.name, usage_after)

        async def spending() -> str | None:
            if start.daily_budget_usd is None:  # the bot sets no budget: nothing waits for the rows to reach it
                usage.forward_soon(self.store)
                return None
            await usage.forward(self.store)
            held = cost_usd(IN_FLIGHT.usage, s)  # this runner's other calls under way (agents/llm/calls_in_flight.py)
            day = await usage.day()
            if day is not None:
                return budget_refusal(day.budget_usd, day.spent_usd, day.held_usd + held)
            spent_here = await cost_today(self.store, s) - spent_here_before
            return budget_refusal(start.daily_budget_usd, start.spent_today_usd + spent_here, held)

        def is_owner(user_id: int | None) -> bool:
            # this executor serves this one task, whose starter the bot named; of anyone else this runner knows nothing
            return start.starter_is_owner if user_id == start.user_id else False

        chat = ChatThroughWorkflow(self.client, workflow_id, start.task_id)
        gate = NetworkGate(
            NetworkPolicy(s.network.sandbox_network),
            self.store,
            chat,
            s.network.sandbox_network_answer_seconds,
            is_owner,
            secrets=self.secrets,
        )
        summaries = SummariesToReport(self.store)
        executor = TaskExecutor(
            s,
            self.store,
            self.llm,
            self.workspaces,
            chat,
            self.repo_map,
            summaries,
            secrets=self.secrets,
            probe=self.probe,
            network=gate,
            baselines=self.baselines,
            is_owner=is_owner,
            spending=spending,
            ask_user=False,  # an answer given in the bot's chat never reaches this runner's waiting worker
        )
        if start.policy is not None:
            executor.workers.mcp.bind(start.policy.mcp_approve, start.policy.mcp_offline)
        return TaskRun(executor, chat, summaries, usage)

    def workers(self) -> list[TemporalWorker]:
        return [
            TemporalWorker(
                self.client,
                task_queue=self.settings.engine.temporal_task_queue,
                workflows=[AgentTask],
                activities=[self.execute],
                max_concurrent_activities=self.settings.tasks.max_concurrent_tasks,
            ),
            TemporalWorker(self.client, task_queue=self.queue, activities=[self.poke]),
        ]

    async def serve(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; then running tasks end `interrupted` (resumable), their processes killed."""
        workers = self.workers()
        log.info(
            "runner %s: taking tasks from %s (own queue %s)",
            self.name,
            self.settings.engine.temporal_task_queue,
            self.queue,
        )
        async with contextlib.AsyncExitStack() as stack:
            for worker in workers:
                await stack.enter_async_context(worker)
            await stop.wait()
            self.stopping = True
            jobs = [run.job for run in self.runs.values() if run.job is not None]
            for run in self.runs.values():
                run.executor.begin_stopping()
            for job in jobs:
                job.cancel()
            if jobs:
                await asyncio.wait(jobs, timeout=5)
            await self.baselines.close()  # base runs nobody waits on any more, reaped before the loop ends
        await self.llm.close()
        await self.store.close()

    # ---- activities ----------------------------------------------------------------------------
    @activity.defn(name=EXECUTE)
    async def execute(self, start: TaskStart, lost: list[str]) -> TaskReport:
        """Run the task here, heartbeating throughout (the files' fetch and the final push included); a cancel (poke
        or Temporal's) stops it and every process it started."""
        beating = asyncio.create_task(heartbeats(max(0.5, start.heartbeat_seconds / 4)), name="heartbeats")
        try:
            return await self._execute(start, lost)
        finally:
            beating.cancel()

    async def _execute(self, start: TaskStart, lost: list[str]) -> TaskReport:
        wf_id = activity.info().workflow_id
        if wf_id is None:  # a standalone activity: never started so here (the task's workflow starts it)
            raise RuntimeError("the execute activity runs only in a task's workflow")
        ran_before = await self.store.task_usage(start.task_id)  # an earlier run's, on this runner
        run = self.task_run(
            start, wf_id, await cost_today(self.store, self.settings), max((u.id or 0 for u in ran_before), default=0)
        )
        # known here before the workflow learns of the claim: from then on a cancel is sent to this runner, which
        # must find the task even while it is still being prepared (a cancel found no run and was lost)
        self.runs[start.task_id] = run
        pushed: str | None = None
        try:
            await self.client.get_workflow_handle(wf_id).signal(AgentTask.claimed, Claim(self.name, self.queue))
            since = utcnow()
            task = await self._mirror(start, lost)
        except BaseException:
            self.runs.pop(start.task_id, None)
            raise
        # the preparation (clone caught up, files fetched) is part of the job: a cancel stops it as it stops the work
        run.job = job = asyncio.create_task(self._run(start, task, run), name=f"task-{task.id}")
        if run.cancelled:  # a cancel came while the task was being mirrored
            job.cancel()
        problem: str | None = None
        try:
            while not job.done():
                await asyncio.wait({job}, timeout=max(0.5, start.heartbeat_seconds / 4))
                pushed = await self.pushes.progress(task.stored_id, wf_id, pushed)
                await run.usage.forward(self.store)  # a task busy in a command shows what it spent
            problem = await job
        except asyncio.CancelledError:
            if not job.done():  # Temporal cancelled this activity: stop the task like /cancel does
                job.cancel()
                with contextlib.suppress(BaseException):
                    await job
            if self.stopping:
                raise
            await run.executor.set_status(task, TaskStatus.CANCELLED)
        except Exception:
            log.exception("task %s crashed", task.id)
            await run.executor.set_status(task, TaskStatus.FAILED, error="internal error (see the runner's log)")
        finally:
            self.runs.pop(task.stored_id, None)
            self.pushes.forget(task.stored_id)
        if problem:
            return TaskReport(task.stored_id, TaskStatus.FAILED.value, self.name, error=problem)
        return await self._report(task, since, run)

    async def _run(self, start: TaskStart, task: Task, run: TaskRun) -> str | None:
        """The task's job: its clone caught up, its files fetched, then its work; what kept it from starting, if
        anything (the task then ends failed with it)."""
        problem = await self._prepare(task) or await self._fetch_files(start, run)
        if problem:
            await run.executor.set_status(task, TaskStatus.FAILED, error=problem)
            return problem
        run.executor.carried_notes[task.stored_id] = start.standing_notes  # the bot's notes: this store has none
        await run.executor.execute(task)
        return None

    @activity.defn(name=POKE)
    async def poke(self, poke: Poke) -> bool:
        """A note, a network answer or a cancel for a task running here."""
        run = self.runs.get(poke.task_id)
        if run is None:
            return False
        if poke.kind == "note":
            return await run.executor.inboxes.post(poke.task_id, poke.text)
        if poke.kind == "network":
            run.executor.network.decide(poke.chat_id, poke.request_id, poke.choice)
            return True
        if run.job is None:  # claimed, its job not started yet: cancelled as soon as it starts
            run.cancelled = True
            return True
        if run.job.done():
            return False
        run.job.cancel()  # the executor commits what was done, kills the task's processes and removes its worktree
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
            user_id=start.user_id,
            user_name=start.user_name,
            workspace=start.workspace,
            worker=WorkerKind(start.worker),
            title=start.title,
            instructions=start.instructions,
            branch=start.branch,
            result=notes,
            schedule_id=start.schedule_id,
            attempt_group=start.attempt_group,
            attempt=start.attempt,
            attempt_of=start.attempt_of,
            status=TaskStatus.IN_PROGRESS,
            started_at=utcnow(),
        )
        await self.store.mirror_task(task, start.criteria)
        await self.store.add_event(TaskEvent(task_id=task.id, kind="runner", detail=f"running on {self.name}"))
        return task

    async def _prepare(self, task: Task) -> str | None:
        """The workspace's clone caught up with the shared remote, and a resumed task's branch fetched from it."""
        try:
            workspace = self.workspaces.resolve(task.workspace)
        except ToolError as err:
            return f"runner {self.name} has no workspace {task.workspace!r}: {err}"
        remote = self.settings.engine.runner_remote
        if not await has_remote(workspace.path, remote):
            return None  # a clone without the shared remote: its branch cannot come home, the summary says so
        why = await catch_up(workspace.path, remote)
        if why:
            log.warning("task %s: %s not caught up with %s: %s", task.id, workspace.name, remote, why)
        if task.branch:
            with contextlib.suppress(GitError):
                await fetch_branch(workspace.path, task.branch, remote, overwrite=True)  # this clone's copy
        return None

    async def _fetch_files(self, start: TaskStart, run: TaskRun) -> str | None:
        """The files handed to the task, fetched from the bot in parts through the workflow, kept under this runner's
        attachments folder as the bot keeps them, and mirrored into its store: the task then sees them as it would
        on the bot (in its first turn, and saved in its worktree when asked). Returns what went wrong, if anything."""
        handed: list[tuple[Attachment, bool]] = []
        for file in start.files:
            target = self.attachments.folder / file.path
            try:
                if not (target.is_file() and target.stat().st_size == file.size):  # the same path is the same bytes
                    data = bytearray()
                    while len(data) < file.size:
                        part = await run.chat.file_part(file.id, len(data))
                        if not part:
                            break
                        data += part
                    if len(data) != file.size:
                        return f"the file {file.name!r} came {len(data)} bytes long, not {file.size}"
                    self.attachments.folder.mkdir(parents=True, exist_ok=True)
                    # walked without following links; a path naming `..` is refused (UnsafePath)
                    await asyncio.to_thread(write_file, self.attachments.folder, file.path, bytes(data))
            except (OSError, UnsafePath, ValueError) as err:
                return f"the file {file.name!r} could not be kept on runner {self.name}: {err}"
            handed.append(
                (
                    Attachment(
                        id=file.id,
                        chat_id=start.chat_id,
                        kind=AttachmentKind(file.kind),
                        name=file.name,
                        media_type=file.media_type,
                        path=file.path,
                        size=file.size,
                        tokens=file.tokens,
                    ),
                    file.save_as_file,
                )
            )
        await self.store.mirror_task_attachments(start.task_id, handed)
        return None

    async def _report(self, task: Task, since: datetime, run: TaskRun) -> TaskReport:
        row = await self.store.get_task(task.stored_id)
        assert row is not None
        shown = run.summaries.kept.pop(task.stored_id, [])
        proposal = None
        if row.worker is WorkerKind.RESEARCH and row.status is TaskStatus.COMPLETED and row.result:
            number = row.result.removeprefix("proposal #")  # the bot stores it under a number of its own
            found = await self.store.get_proposal(int(number)) if number.isdigit() else None
            proposal = found.body if found else None
            shown = [m for m in shown if m.kind != "proposal"]
        report = TaskReport(
            task_id=task.stored_id,
            status=row.status.value,
            runner=self.name,
            result=row.result,
            error=row.error,
            commit_sha=row.commit_sha,
            branch=row.branch,
            base_branch=row.base_branch,
            base_commit=row.base_commit,
            events=[[e.kind, e.detail] for e in await self.store.task_events(task.stored_id) if e.created_at >= since],
            verified=[[str(c.idx), c.evidence or ""] for c in await self.store.criteria(task.stored_id) if c.verified],
            usage=[  # this run's rows (the workflow leaves out those the bot stored while it ran)
                u.model_dump_json() for u in await self.store.task_usage(task.stored_id, after=run.usage.first)
            ],
            tool_calls=[
                c.model_dump_json()
                for c in (await self.store.tool_calls(task.id))[-MAX_AUDIT_ROWS:]
                if c.created_at >= since
            ],
            shown=shown,
            proposal=proposal,
            review=json.dumps(kept) if (kept := await self.store.reviews.review(task.stored_id)) else None,
        )
        if row.branch:
            report.pushed, report.push_error = await self.pushes.final(row)
        return report


async def heartbeats(every: float) -> None:
    """The running activity's heartbeat, every `every` seconds until cancelled (started inside the activity: its
    context is inherited)."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(every)


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
