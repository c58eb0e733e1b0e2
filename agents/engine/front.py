"""The bot's side of TASK_ENGINE=temporal: tasks claimed from the store become workflows; the chat follows them.

- WorkflowLines: the bot's connection to the cluster and to the workflows of the tasks it follows (which run, in
  which chat); pokes (a note, a network answer, a cancel) go through it. Built first, and given to the three below.
- ForwardedInboxes, ForwardedNetworkGate: the executor is built with these (runtime.py): steering notes and network
  answers for a task running on a runner go to its workflow as pokes.
- TemporalEngine (the crew's TaskEngine): the same claim loop as the local engine (TaskQueue), whose `execute`
  starts the task's workflow and waits for its report. Every task runs on a runner, research too (read-only there,
  under the same sandbox). One workflow id per run of a task (`cluster.workflow_id`), written in the task's events
  before the start is sent: a start that may have reached the cluster is never sent under a new id (Resume after an
  unreachable cluster sends the same id again, and the cluster refuses a duplicate; the bot then follows that run).
  /cancel pokes the workflow; the bot stopping leaves workflows running, and a restarted bot re-attaches to them.
- ChatDesk: the activities on the bot's queue: what a runner's task shows in the chat (`NOTIFY`), the parts of
  the files handed to it (`FETCH`), its usage rows as it records them (`USAGE`: stored at once, so the daily budget
  counts a running task's spend on any runner), and the day's budget and spend its runner asks before each model
  call (`SPENDING`).
- The report, applied by TaskReports (agents/engine/task_reports.py): the task branch fetched from the shared
  remote, the row, events, criteria and usage stored, a research proposal stored under the bot's own number, the
  summary delivered through the outbox and kept in the chat history, as the local engine does. Diff, Merge and
  Discard then work on the fetched branch in the owner's checkout (the bot never needs a runner's paths); Discard
  deletes the branch on the shared remote too (`drop_branch`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError
from temporalio.worker import Worker as TemporalWorker

from agents.core.actions import Action, parse_action
from agents.core.models import Task, TaskEvent, TaskStatus, WorkerKind
from agents.core.protocols import Notifier, Outbox
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.engine import cluster
from agents.engine.payloads import (
    FETCH,
    NOTIFY,
    PART_BYTES,
    SPENDING,
    USAGE,
    DaySpending,
    FilePart,
    HandedFile,
    NotifyCall,
    Poke,
    Shown,
    TaskReport,
    TaskStart,
    UsageCall,
    decode_buttons,
)
from agents.engine.task_policy import policy_of
from agents.engine.task_reports import RUN_EVENT, TaskReports, store_usage
from agents.engine.workflow import AgentTask
from agents.git.command import GitError
from agents.git.remote import delete_remote_branch
from agents.inputs.attachments import Attachments
from agents.llm.calls_in_flight import IN_FLIGHT
from agents.llm.client import cost_usd
from agents.llm.usage import cost_today
from agents.sandbox.bwrap import NetworkPolicy
from agents.sandbox.network_gate import CHOICES, DENY, FOR_TASK, ONCE, NetworkGate
from agents.store.database import Store
from agents.store.standing import StandingNotes
from agents.work.access import StillAllowed
from agents.work.orphans import instance_token
from agents.work.pull_requests import PullRequests
from agents.work.steering import Inboxes
from agents.work.task_queue import TaskQueue
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

CANCEL_WAIT_SECONDS = 8.0  # /cancel waits this long for the runner's report (under TaskQueue's re-cancel period)
LATE_REPORT_SECONDS = 600.0  # then a report is still waited for this long in the background, for its usage
REMOTE_SLOTS = 64  # tasks in flight from the bot's side; each runner's MAX_CONCURRENT_TASKS is the real limit
ENDED_WITHOUT_REPORT = {
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED,
}
# the answer to a runner's question, which may be a network request or a gated tool call (MCP `approve`): the bot
# does not know which, so it names neither (a tool call allowed was told "Network allowed")
ANSWERED = {
    ONCE: "Allowed once for task #{task_id}.",
    FOR_TASK: "Allowed for the rest of task #{task_id}.",
    DENY: "Denied for task #{task_id}.",
}


@dataclass
class Followed:
    """A task whose workflow this bot follows: its chat, and that run's workflow id."""

    chat_id: int
    workflow_id: str


@dataclass
class Question:
    """A network question a runner's task asked through this bot: the task, and the chats it was asked in."""

    task_id: int
    chats: set[int] = field(default_factory=set)


class WorkflowLines:
    """The bot's line to the cluster and to the workflows of the tasks it follows; pokes travel on it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.instance = instance_token(settings.paths.database_path)
        self.client: Client | None = None
        self.followed: dict[int, Followed] = {}  # task id → its chat and run, while this bot follows its workflow
        self.questions: dict[int, Question] = {}  # network request id → who asked where (runners' questions)
        self._connecting = asyncio.Lock()
        self._later: set[asyncio.Task[bool]] = set()

    async def connect(self) -> Client | None:
        """The connected client, or None when the cluster is unreachable now."""
        async with self._connecting:
            if self.client is None:
                try:
                    self.client = await cluster.connect(self.settings, identity=f"agentlab-bot-{self.instance}")
                except ConnectionError as err:
                    log.warning("%s", err)
                    return None
            return self.client

    def handle(self, workflow_id: str) -> WorkflowHandle[AgentTask, TaskReport]:
        assert self.client is not None
        return self.client.get_workflow_handle_for(AgentTask.run, workflow_id)

    async def poke(self, poke: Poke) -> bool:
        """A note, an answer or a cancel for a task running on a runner; False when its workflow is not reachable."""
        followed = self.followed.get(poke.task_id)
        if followed is None or self.client is None:
            return False
        try:
            await self.handle(followed.workflow_id).signal(AgentTask.poke, poke)
        except RPCError as err:
            log.warning("task %s: poke %s not delivered: %s", poke.task_id, poke.kind, err)
            return False
        return True

    def poke_soon(self, poke: Poke) -> None:
        """`poke` from synchronous code (a button's answer): sent in the background, kept referenced."""
        job = asyncio.create_task(self.poke(poke))
        self._later.add(job)
        job.add_done_callback(self._later.discard)


class ForwardedInboxes(Inboxes):
    """Notes for running workers: the inboxes of tasks running here (none, under this engine), else the workflow."""

    def __init__(self, lines: WorkflowLines) -> None:
        super().__init__()
        self.lines = lines

    async def post(self, task_id: int, text: str) -> bool:
        if self.is_open(task_id):
            return await super().post(task_id, text)
        return await self.lines.poke(Poke(task_id, "note", text=text))


class ForwardedNetworkGate(NetworkGate):
    """The bot's network gate, whose buttons also answer the questions of tasks running on runners."""

    def __init__(
        self,
        lines: WorkflowLines,
        policy: NetworkPolicy,
        store: Store,
        notifier: Notifier,
        answer_seconds: float,
        is_owner: Callable[[int | None], bool],
        *,
        secrets: SecretsFilter,
    ) -> None:
        super().__init__(policy, store, notifier, answer_seconds, is_owner, secrets=secrets)
        self.lines = lines

    def decide(self, chat_id: int, request_id: int, choice: str) -> str:
        if self.is_asking(request_id) or choice not in ANSWERED:  # a question of a task running here
            return super().decide(chat_id, request_id, choice)
        asked = self.lines.questions.get(request_id)
        if asked is not None and chat_id not in asked.chats:
            return super().decide(chat_id, request_id, choice)  # "no longer waiting": not asked in this chat
        # asked through this bot, or (a restarted bot does not know the question) by one of the chat's remote tasks,
        # each of whose runners ignores a request id it is not waiting on
        if asked is not None:
            tasks = [asked.task_id]
        else:
            tasks = [t for t, followed in self.lines.followed.items() if followed.chat_id == chat_id]
        if not tasks:
            return super().decide(chat_id, request_id, choice)
        self.lines.questions.pop(request_id, None)
        for task_id in tasks:
            self.lines.poke_soon(Poke(task_id, "network", chat_id=chat_id, request_id=request_id, choice=choice))
        return ANSWERED[choice].format(task_id=", #".join(map(str, tasks)))


class TemporalEngine:
    """TASK_ENGINE=temporal: the TaskEngine of the crew (start, wake, wait, cancel, shutdown, reattach, drop_branch)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        lines: WorkflowLines,
        notifier: Notifier,
        deliveries: Outbox,
        workspaces: Workspaces,
        attachments: Attachments,
        pull_requests: PullRequests | None = None,
    ) -> None:
        self.settings, self.store, self.lines = settings, store, lines
        self.notifier, self.deliveries, self.workspaces, self.attachments = (
            notifier,
            deliveries,
            workspaces,
            attachments,
        )
        self.reports = TaskReports(settings, store, deliveries, workspaces, pull_requests)  # a run's report applied
        self.instance = lines.instance
        self.queue = TaskQueue(store, self._dispatch, REMOTE_SLOTS, StillAllowed(settings, store, notifier).refusal)
        self.attaching: dict[int, str] = {}  # re-attached tasks → the run followed (never a second start)
        self.stopping = False
        self._serving: asyncio.Task[None] | None = None
        self._late: set[asyncio.Task[None]] = set()  # cancelled runs' reports still awaited (`_late_report`)

    # ---- TaskEngine --------------------------------------------------------------------------------
    def start(self) -> None:
        self.queue.start()

    def wake(self) -> None:
        self.queue.wake()

    async def wait(self, task_id: int) -> None:
        await self.queue.wait(task_id)

    async def cancel(self, task_id: int) -> bool:
        """The task cancelled; a run of it that nobody follows (its start reached the cluster though its answer was
        lost, or the bot restarted and could not re-attach) is told to cancel too, and counted ended: its runner
        stops, and a report it sends later is not applied to a task that was cancelled."""
        unfollowed = await self._open_run(task_id) if task_id not in self.lines.followed else None
        cancelled = await self.queue.cancel(task_id)
        if cancelled and unfollowed is not None:
            await self._cancel_run(task_id, unfollowed)
        return cancelled

    async def _cancel_run(self, task_id: int, run: str) -> None:
        client = await self._client()
        if client is not None:
            try:
                await self.lines.handle(run).signal(AgentTask.poke, Poke(task_id, "cancel"))
            except RPCError as err:  # never reached the cluster, or it ended meanwhile
                log.info("task %s: its workflow %s was not told to cancel: %s", task_id, run, err)
        await self.store.add_event(TaskEvent(task_id=task_id, kind=RUN_EVENT, detail=f"ended {run}"))

    async def shutdown(self, timeout: float = 5.0) -> None:
        """The bot stops: the workflows go on (a restarted bot re-attaches); nothing here is left running."""
        self.stopping = True
        await self.queue.shutdown(timeout)
        for late in list(self._late):
            late.cancel()
        if self._serving is not None:
            self._serving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._serving

    async def reattach(self, tasks: list[Task]) -> set[int]:
        """At start-up: the tasks a stopped bot left whose workflows still run are followed again (in progress); a
        report it had recorded but not yet told (stopped between the two) is applied again, and told."""
        told_not = await self.store.tasks_with_unclosed_event(RUN_EVENT, "recorded", "ended")
        tasks = [*tasks, *(t for t in told_not if t.stored_id not in {k.stored_id for k in tasks})]
        if not tasks or await self._client() is None:
            return set()
        adopted: set[int] = set()
        for task in tasks:
            run = await self._open_run(task.stored_id)
            if run is None:
                continue  # never started as a workflow, or its last run's report was applied
            handle = self.lines.handle(run)
            try:
                described = await handle.describe()
            except RPCError:
                continue  # never reached the cluster (or long gone)
            if described.status is WorkflowExecutionStatus.COMPLETED:  # it ended while the bot was away
                try:
                    await self.reports.apply(task, run, await handle.result())
                except Exception:  # the bot starts anyway; the task stays interrupted, with Resume
                    log.exception("task %s: the report of its finished workflow could not be applied", task.id)
                    continue
                adopted.add(task.stored_id)
            elif described.status in ENDED_WITHOUT_REPORT:  # Resume starts a new run
                await self.store.add_event(TaskEvent(task_id=task.id, kind=RUN_EVENT, detail=f"ended {run}"))
            elif await self.store.transition_task(task.stored_id, [TaskStatus.INTERRUPTED], TaskStatus.IN_PROGRESS):
                await self.store.add_event(
                    TaskEvent(task_id=task.id, kind="status", detail="in_progress (re-attached)")
                )
                task.status = TaskStatus.IN_PROGRESS
                self.attaching[task.stored_id] = run  # follow that run: never start a second one
                self.queue.adopt(task)
                adopted.add(task.stored_id)
        return adopted

    async def drop_branch(self, task: Task) -> str | None:
        """Discard: the task branch on the shared remote, where its runner pushed it, is deleted too."""
        if not task.branch:
            return None
        repo = self.workspaces.resolve(task.workspace).path
        try:
            await delete_remote_branch(repo, task.branch, self.settings.engine.runner_remote)
        except GitError as err:
            return f"its branch could not be deleted on `{self.settings.engine.runner_remote}`: {str(err)[:300]}"
        return None

    # ---- the cluster -------------------------------------------------------------------------------
    async def _client(self) -> Client | None:
        """The connected client (and the bot's workers running), or None when the cluster is unreachable now."""
        client = await self.lines.connect()
        if client is not None and self._serving is None:
            self._serving = asyncio.create_task(self._serve(client), name="temporal-bot-workers")
        return client

    async def _serve(self, client: Client) -> None:
        """The bot's workers: the chat side of tasks (its own queue), and the tasks' workflow code (shared queue)."""
        desk = ChatDesk(self.store, self.notifier, self.lines, self.attachments)
        workers = [
            TemporalWorker(
                client,
                task_queue=cluster.bot_queue(self.settings),
                activities=[desk.notify, desk.file_part, desk.usage, desk.spending],
            ),
            TemporalWorker(client, task_queue=self.settings.engine.temporal_task_queue, workflows=[AgentTask]),
        ]
        async with contextlib.AsyncExitStack() as stack:
            for worker in workers:
                await stack.enter_async_context(worker)
            await asyncio.Event().wait()

    # ---- runs: one workflow id per run of a task ------------------------------------------------------
    async def _open_run(self, task_id: int) -> str | None:
        """The workflow id of the task's last run when its report was never applied (it may run, or have ended, on
        the cluster), else None."""
        started, ended = [], set()
        for event in await self.store.task_events(task_id):
            if event.kind == RUN_EVENT:
                verb, _, run = event.detail.partition(" ")
                if verb == "started":
                    started.append(run)
                elif verb == "ended":  # "recorded": stored, not yet told (a stop came between)
                    ended.add(run)
        return started[-1] if started and started[-1] not in ended else None

    async def next_run(self, task: Task) -> str:
        """The id this run starts under: the open run's (its start may have reached the cluster), else a new one,
        written down before the start is sent."""
        open_run = await self._open_run(task.stored_id)
        if open_run is not None:
            return open_run
        runs = sum(
            e.kind == RUN_EVENT and e.detail.startswith("started ")
            for e in await self.store.task_events(task.stored_id)
        )
        run = cluster.workflow_id(self.instance, task.stored_id, runs + 1)
        await self.store.add_event(TaskEvent(task_id=task.id, kind=RUN_EVENT, detail=f"started {run}"))
        return run

    async def start_run(self, client: Client, run: str, start: TaskStart) -> WorkflowHandle[AgentTask, TaskReport]:
        """Start the run's workflow; refused by the cluster (WorkflowAlreadyStartedError) when that id ever ran."""
        return await client.start_workflow(
            AgentTask.run,
            start,
            id=run,
            task_queue=self.settings.engine.temporal_task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,  # closed: never again
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,  # running: never a second
        )

    # ---- one task ----------------------------------------------------------------------------------
    async def _dispatch(self, task: Task) -> None:
        client = await self._client()
        if client is None:
            await self._unreachable(task)
            return
        run = self.attaching.pop(task.stored_id, None) or await self.next_run(task)
        self.lines.followed[task.stored_id] = Followed(task.chat_id, run)
        try:
            await self._follow(client, task, run)
        finally:
            self.lines.followed.pop(task.stored_id, None)

    async def _follow(self, client: Client, task: Task, run: str) -> None:
        handle = self.lines.handle(run)
        try:
            await self.start_run(client, run, await self.start_of(task))
            await self.store.add_event(TaskEvent(task_id=task.id, kind="engine", detail=f"workflow {run}"))
        except WorkflowAlreadyStartedError:  # this run reached the cluster before (a re-attach, or a lost answer)
            log.info("task %s: following workflow %s, which already started", task.id, run)
        except RPCError as err:
            await self._unreachable(task, err)
            return
        try:
            report = await self._result(handle)
        except asyncio.CancelledError:
            if self.stopping:  # the workflow goes on; the next start of the bot re-attaches
                raise
            await self.lines.poke(Poke(task.stored_id, "cancel"))
            waiting = asyncio.ensure_future(self._result(handle))
            try:
                await asyncio.wait({waiting}, timeout=CANCEL_WAIT_SECONDS)
            finally:  # not come yet: the cancel goes on without it, and what the run cost is counted when it comes
                if not waiting.done():
                    late = asyncio.create_task(self._late_report(task, run, waiting))
                    self._late.add(late)
                    late.add_done_callback(self._late.discard)
            with contextlib.suppress(Exception):
                if waiting.done():
                    await self.reports.apply(task, run, as_cancelled(waiting.result()))
            raise
        await self.reports.apply(task, run, report)

    async def _late_report(self, task: Task, run: str, waiting: asyncio.Future[TaskReport]) -> None:
        """A cancelled run's report that came after /cancel stopped waiting: its usage and audit rows stored."""
        try:
            async with asyncio.timeout(LATE_REPORT_SECONDS):
                report = await waiting
            await self.reports.record_late(task, run, report)
        except TimeoutError:
            waiting.cancel()
            log.warning("task %s: no report from its cancelled run %s within %.0f s", task.id, run, LATE_REPORT_SECONDS)
        except Exception:
            log.exception("task %s: the late report of its cancelled run %s could not be stored", task.id, run)

    async def _result(self, handle: WorkflowHandle[AgentTask, TaskReport]) -> TaskReport:
        """The workflow's report; waits through a cluster that is briefly unreachable. A workflow that ended without
        one (terminated or timed out on the cluster) reports the task `interrupted`: Resume then starts a new run."""
        while True:
            try:
                return await handle.result(rpc_timeout=None)
            except WorkflowFailureError as err:
                why = f"its workflow {handle.id} ended without a report ({err.cause})"
                return TaskReport(task_id=0, status=TaskStatus.INTERRUPTED.value, error=why)
            except RPCError as err:
                log.warning("workflow %s: %s; retrying in 5 s", handle.id, err)
                await asyncio.sleep(5)

    async def start_of(self, task: Task) -> TaskStart:
        s = self.settings
        runs = s.workers.max_corrections + 1
        files = [
            HandedFile(a.id or 0, a.kind.value, a.name, a.media_type, a.path, a.size, a.tokens, save)
            for a, save in await self.store.task_attachments(task.stored_id)
        ]
        return TaskStart(
            task_id=task.stored_id,
            chat_id=task.chat_id,
            workspace=task.workspace,
            worker=task.worker.value,
            title=task.title,
            instructions=task.instructions,
            criteria=[c.text for c in await self.store.criteria(task.stored_id)],
            branch=task.branch,
            notes=task.result if task.worker is not WorkerKind.RESEARCH else None,
            standing_notes=[
                n.text
                for n in await StandingNotes(self.store).applying(
                    task.user_id, s.users.is_owner, task.workspace, about_self=self.workspaces.is_self
                )
            ],
            reply_to_message_id=task.reply_to_message_id,
            schedule_id=task.schedule_id,
            attempt_group=task.attempt_group,
            attempt=task.attempt,
            attempt_of=task.attempt_of,
            user_id=task.user_id,
            user_name=task.user_name,
            starter_is_owner=s.users.is_owner(task.user_id),
            daily_budget_usd=s.anthropic.daily_budget_usd,
            spent_today_usd=await cost_today(self.store, s),
            files=files,
            shared_queue=s.engine.temporal_task_queue,
            bot_queue=cluster.bot_queue(s),
            heartbeat_seconds=s.engine.temporal_heartbeat_seconds,
            claim_seconds=s.engine.temporal_claim_seconds,
            run_seconds=runs * (s.workers.worker_max_seconds + s.tasks.test_timeout_seconds)
            + s.tasks.test_timeout_seconds
            + 600,
            takeovers=s.engine.temporal_takeovers,
            policy=policy_of(s),
        )

    async def _unreachable(self, task: Task, err: BaseException | None = None) -> None:
        """One sentence, the task `interrupted` (Resume starts it, once, when the cluster is back)."""
        why = cluster.unreachable(self.settings, err)
        await self.store.update_task(task.stored_id, status=TaskStatus.INTERRUPTED, error=why)
        await self.store.add_event(TaskEvent(task_id=task.id, kind="status", detail=f"interrupted: {why}"))
        await self.reports.tell_interrupted(
            task, f"⚠️ **Task #{task.id}** could not start: {why}. Resume it when it is back."
        )


def as_cancelled(report: TaskReport) -> TaskReport:
    """The report of a run the user cancelled before its report was applied: the task ends cancelled whatever the
    runner says (it may have finished, or be pushing, when the cancel reached it), as the chat is told. Its usage, audit
    and branch are kept (what it did stays on its branch); its summary and proposal are not shown."""
    if report.status == TaskStatus.CANCELLED.value:
        return report
    result = None if report.proposal else report.result  # a research task's result names the runner's proposal
    return dataclasses.replace(report, status=TaskStatus.CANCELLED.value, result=result, shown=[], proposal=None)


SENT_TASKS_KEPT = 1000  # tasks whose messages ChatDesk remembers (a task's run is long over past that many)


class ChatDesk:
    """The bot's activities: what a task on a runner shows in its chat, the files handed to it, and its spending."""

    def __init__(self, store: Store, notifier: Notifier, lines: WorkflowLines, attachments: Attachments) -> None:
        self.store, self.notifier, self.lines, self.attachments = store, notifier, lines, attachments
        # task id → {message id it sent in its chat: whether as a question (literal)}: a runner edits only those
        # (and its task's progress message), and keeps a message past the secrets filter only where it was a question
        self._sent: dict[int, dict[int, bool]] = {}

    async def _task_in(self, task_id: int, chat_id: int) -> Task:
        task = await self.store.get_task(task_id)
        if task is None or task.chat_id != chat_id:  # a runner speaks only into its task's chat
            raise ApplicationError(f"task {task_id} is not in chat {chat_id}", non_retryable=True)
        return task

    @activity.defn(name=NOTIFY)
    async def notify(self, call: NotifyCall) -> Shown:
        task = await self._task_in(call.task_id, call.chat_id)
        buttons = decode_buttons(call.buttons)
        data = base64.b64decode(call.data_b64) if call.data_b64 else b""
        if call.task_id not in self._sent and len(self._sent) >= SENT_TASKS_KEPT:
            del self._sent[next(iter(self._sent))]  # the oldest task's: long ended
        sent = self._sent.setdefault(call.task_id, {})
        asks = any((found := parse_action(b.data)) and found[0] in CHOICES for row in buttons or [] for b in row)
        if call.method == "edit" and call.message_id is not None:
            if call.message_id not in sent and call.message_id != task.progress_message_id:
                log.warning("task %s: its runner asked to edit message %s, not its own", call.task_id, call.message_id)
                return Shown()
            try:  # an edit is best effort (the local engine's progress swallows a failed one too): never retried
                await self.notifier.edit(
                    call.chat_id,
                    call.message_id,
                    call.text,
                    buttons=buttons,
                    literal=call.literal and sent.get(call.message_id, False),
                )
            except Exception as err:
                log.debug("task %s: edit failed: %s", call.task_id, err)
            return Shown()
        if call.method == "send_document":
            await self.notifier.send_document(
                call.chat_id, call.filename, data, caption=call.text, literal=call.literal
            )
            return Shown()
        if call.method == "send_photo":
            await self.notifier.send_photo(call.chat_id, data, caption=call.text)
            return Shown()
        if call.method == "ask_owners":  # a member's task: where this bot's owners see it
            copies = await self.notifier.ask_owners(
                call.chat_id, call.text, buttons=buttons, literal=call.literal and asks
            )
            self._remember_question(call, {chat for chat, _ in copies})
            sent.update({message: call.literal and asks for chat, message in copies if chat == call.chat_id})
            return Shown(copies=[[chat, message] for chat, message in copies])
        message_id = await self.notifier.send(
            call.chat_id, call.text, buttons=buttons, reply_to=call.reply_to, literal=call.literal and asks
        )
        if message_id is not None:
            sent[message_id] = call.literal and asks
        self._remember_question(call, {call.chat_id})
        for action, item in (parse_action(b.data) or (None, 0) for row in buttons or [] for b in row):
            if action is Action.CANCEL and item == call.task_id and message_id is not None:  # the progress message
                await self.store.update_task(call.task_id, progress_message_id=message_id)  # replies to it steer
        return Shown(message_id=message_id)

    def _remember_question(self, call: NotifyCall, chats: set[int]) -> None:
        """A network question's buttons: their answer goes back to the runner (asked in `chats` only)."""
        for action, item in (
            parse_action(b.data) or (None, 0) for row in decode_buttons(call.buttons) or [] for b in row
        ):
            if action in CHOICES:
                self.lines.questions[item] = Question(call.task_id, chats)

    @activity.defn(name=USAGE)
    async def usage(self, call: UsageCall) -> None:
        """A running task's usage rows, stored as its own now (as its report's are: `store_usage`)."""
        task = await self._task_in(call.task_id, call.chat_id)
        await store_usage(self.store, task, [row.record for row in call.rows])

    @activity.defn(name=SPENDING)
    async def spending(self) -> DaySpending:
        """The day's budget and spend as this bot counts them, and what its own model calls under way may cost."""
        settings = self.lines.settings
        return DaySpending(
            settings.anthropic.daily_budget_usd,
            await cost_today(self.store, settings),
            cost_usd(IN_FLIGHT.usage, settings),
        )

    @activity.defn(name=FETCH)
    async def file_part(self, part: FilePart) -> bytes:
        """Up to PART_BYTES of a file handed to the task (no other file: the runner names it by the bot's id)."""
        handed = [a for a, _ in await self.store.task_attachments(part.task_id) if a.id == part.file_id]
        if not handed:
            raise ApplicationError(f"no file {part.file_id} was handed to task {part.task_id}", non_retryable=True)
        path = self.attachments.path_of(handed[0])

        def read() -> bytes:
            with open(path, "rb") as f:
                f.seek(max(0, part.offset))
                return f.read(PART_BYTES)

        return await asyncio.to_thread(read)
