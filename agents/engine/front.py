"""The bot's side of TASK_ENGINE=temporal: tasks claimed from the store become workflows; the chat follows them.

- TemporalEngine (the crew's TaskEngine): the same claim loop as the local engine (TaskRunner), whose `execute`
  starts the task's workflow (one id per task: a second start attaches to the running one) and waits for its
  report. Research stays in the bot's process (it only reads the owner's checkout). /cancel pokes the workflow;
  the bot stopping leaves workflows running, and a restarted bot re-attaches to them (`reattach`).
- ChatDesk: the `NOTIFY` activity on the bot's queue: what a runner's task shows in the chat.
- RoutedInboxes, RoutedNetworkGate: steering notes and network answers for a task running on a runner go to its
  workflow as pokes; for a task running here, as before.
- The report: the task branch fetched from the shared remote, the row, events, criteria and usage stored, the
  summary delivered through the outbox and kept in the chat history, as the local engine does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.worker import Worker

from agents.core.actions import Action, button, parse_action
from agents.core.models import Task, TaskEvent, TaskStatus, ToolCallRecord, UsageRecord, WorkerKind, utcnow
from agents.core.protocols import Notifier
from agents.core.settings import Settings
from agents.engine import cluster
from agents.engine.payloads import NOTIFY, NotifyCall, Poke, TaskReport, TaskStart, decode_buttons
from agents.engine.workflow import AgentTask
from agents.git.remote import fetch_branch
from agents.git.runner import GitError
from agents.sandbox.network_gate import CHOICES, DENY, FOR_TASK, ONCE, NetworkGate
from agents.store.database import Store
from agents.store.delivery import Deliveries
from agents.store.shown import TASK, remember_shown, shown_as
from agents.work.orphans import instance_token
from agents.work.steering import Inboxes
from agents.work.task_execution import TaskExecutor
from agents.work.task_runner import TaskRunner

log = logging.getLogger(__name__)

CANCEL_WAIT_SECONDS = 8.0  # /cancel waits this long for the runner's report (under TaskRunner's re-cancel period)
REMOTE_SLOTS = 64  # tasks in flight from the bot's side; each runner's MAX_CONCURRENT_TASKS is the real limit
ANSWERED = {
    ONCE: "Network allowed once for task #{task_id}.",
    FOR_TASK: "Network allowed for the rest of task #{task_id}.",
    DENY: "Network denied for task #{task_id}.",
}


class TemporalEngine:
    """TASK_ENGINE=temporal: the TaskEngine of the crew (start, wake, wait, cancel, shutdown, reattach)."""

    def __init__(
        self, settings: Settings, store: Store, executor: TaskExecutor, notifier: Notifier, deliveries: Deliveries
    ) -> None:
        self.settings, self.store, self.executor = settings, store, executor
        self.notifier, self.deliveries = notifier, deliveries
        self.instance = instance_token(settings.database_path)
        self.runner = TaskRunner(store, self._dispatch, REMOTE_SLOTS)
        self.client: Client | None = None
        self.questions: dict[int, tuple[int, int]] = {}  # network request id → (chat id, task id), asked by runners
        self.remote: dict[int, int] = {}  # task id → chat id: the tasks whose workflow this bot is following
        self.attaching: set[int] = set()  # re-attached tasks: their running workflow is followed, not started
        self.stopping = False
        self._serving: asyncio.Task[None] | None = None
        self._connecting = asyncio.Lock()
        self._later: set[asyncio.Task[None]] = set()
        executor.inboxes = RoutedInboxes(self)  # before the crew is built: it posts notes there
        executor.network = RoutedNetworkGate(self, executor.network)

    # ---- TaskEngine --------------------------------------------------------------------------------
    def start(self) -> None:
        self.runner.start()

    def wake(self) -> None:
        self.runner.wake()

    async def wait(self, task_id: int) -> None:
        await self.runner.wait(task_id)

    async def cancel(self, task_id: int) -> bool:
        return await self.runner.cancel(task_id)

    async def shutdown(self, timeout: float = 5.0) -> None:
        """The bot stops: the workflows go on (a restarted bot re-attaches); nothing here is left running."""
        self.stopping = True
        await self.runner.shutdown(timeout)
        if self._serving is not None:
            self._serving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._serving

    async def reattach(self, tasks: list[Task]) -> set[int]:
        """At start-up: the tasks a stopped bot left whose workflows still run are followed again (in progress)."""
        candidates = [t for t in tasks if t.worker is not WorkerKind.RESEARCH]
        if not candidates or await self._client() is None:
            return set()
        adopted: set[int] = set()
        for task in candidates:
            handle = self._handle(task.id)
            try:
                described = await handle.describe()
            except RPCError:
                continue  # never started as a workflow (or long gone)
            if described.status is WorkflowExecutionStatus.COMPLETED:  # it ended while the bot was away
                try:
                    await self._apply(task, await handle.result())
                except Exception:  # the bot starts anyway; the task stays interrupted, with Resume
                    log.exception("task %s: the report of its finished workflow could not be applied", task.id)
                    continue
                adopted.add(task.id)
            elif described.status is WorkflowExecutionStatus.RUNNING and await self.store.transition_task(
                task.id, [TaskStatus.INTERRUPTED], TaskStatus.IN_PROGRESS
            ):
                await self.store.add_event(
                    TaskEvent(task_id=task.id, kind="status", detail="in_progress (re-attached)")
                )
                task.status = TaskStatus.IN_PROGRESS
                self.attaching.add(task.id)  # follow that run: never start a second one
                self.runner.adopt(task)
                adopted.add(task.id)
        return adopted

    # ---- the cluster -------------------------------------------------------------------------------
    async def _client(self) -> Client | None:
        """The connected client (and the bot's workers running), or None when the cluster is unreachable now."""
        async with self._connecting:
            if self.client is None:
                try:
                    self.client = await cluster.connect(self.settings, identity=f"agentlab-bot-{self.instance}")
                except ConnectionError as err:
                    log.warning("%s", err)
                    return None
                self._serving = asyncio.create_task(self._serve(self.client), name="temporal-bot-workers")
            return self.client

    async def _serve(self, client: Client) -> None:
        """The bot's workers: the chat side of tasks (its own queue), and the tasks' workflow code (shared queue)."""
        desk = ChatDesk(self)
        workers = [
            Worker(client, task_queue=cluster.bot_queue(self.settings), activities=[desk.notify]),
            Worker(client, task_queue=self.settings.temporal_task_queue, workflows=[AgentTask]),
        ]
        async with contextlib.AsyncExitStack() as stack:
            for worker in workers:
                await stack.enter_async_context(worker)
            await asyncio.Event().wait()

    def _handle(self, task_id: int) -> WorkflowHandle:
        assert self.client is not None
        return self.client.get_workflow_handle_for(AgentTask.run, cluster.workflow_id(self.instance, task_id))

    async def poke(self, poke: Poke) -> bool:
        """A note, an answer or a cancel for a task running on a runner; False when its workflow is not reachable."""
        if poke.task_id not in self.remote or self.client is None:
            return False
        try:
            await self._handle(poke.task_id).signal(AgentTask.poke, poke)
        except RPCError as err:
            log.warning("task %s: poke %s not delivered: %s", poke.task_id, poke.kind, err)
            return False
        return True

    def poke_soon(self, poke: Poke) -> None:
        """`poke` from synchronous code (a button's answer): sent in the background, kept referenced."""
        job = asyncio.create_task(self.poke(poke))
        self._later.add(job)
        job.add_done_callback(self._later.discard)

    # ---- one task ----------------------------------------------------------------------------------
    async def _dispatch(self, task: Task) -> None:
        if task.worker is WorkerKind.RESEARCH:  # read-only on the owner's checkout: it runs here
            await self.executor.execute(task)
            return
        client = await self._client()
        if client is None:
            await self._unreachable(task)
            return
        self.remote[task.id] = task.chat_id
        try:
            await self._follow(client, task)
        finally:
            self.remote.pop(task.id, None)

    async def _follow(self, client: Client, task: Task) -> None:
        if task.id in self.attaching:  # re-attached after a restart: that run, never a second one
            self.attaching.discard(task.id)
            handle = self._handle(task.id)
        else:
            try:
                handle = await client.start_workflow(
                    AgentTask.run,
                    await self._start_of(task),
                    id=cluster.workflow_id(self.instance, task.id),
                    task_queue=self.settings.temporal_task_queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,  # running already: attach, not twice
                )
            except RPCError as err:
                await self._unreachable(task, err)
                return
            await self.store.add_event(TaskEvent(task_id=task.id, kind="engine", detail=f"workflow {handle.id}"))
        if await self.store.task_attachments(task.id):  # files stay on the bot's machine (not in payloads)
            await self.notifier.send(
                task.chat_id,
                f"Task #{task.id} runs on a runner, which does not get the files "
                "you handed it: describe what they show in a note if the worker needs it.",
            )
        try:
            report = await self._result(handle)
        except asyncio.CancelledError:
            if self.stopping:  # the workflow goes on; the next start of the bot re-attaches
                raise
            await self.poke(Poke(task.id, "cancel"))
            with contextlib.suppress(TimeoutError, Exception):
                async with asyncio.timeout(CANCEL_WAIT_SECONDS):
                    await self._apply(task, await asyncio.shield(self._result(handle)))
            raise
        await self._apply(task, report)

    async def _result(self, handle: WorkflowHandle) -> TaskReport:
        """The workflow's report; waits through a cluster that is briefly unreachable."""
        while True:
            try:
                return await handle.result(rpc_timeout=None)
            except RPCError as err:
                log.warning("workflow %s: %s; retrying in 5 s", handle.id, err)
                await asyncio.sleep(5)

    async def _start_of(self, task: Task) -> TaskStart:
        s = self.settings
        runs = s.max_corrections + 1
        return TaskStart(
            task_id=task.id,
            chat_id=task.chat_id,
            workspace=task.workspace,
            worker=task.worker.value,
            title=task.title,
            instructions=task.instructions,
            criteria=[c.text for c in await self.store.criteria(task.id)],
            branch=task.branch,
            notes=task.result,
            reply_to_message_id=task.reply_to_message_id,
            shared_queue=s.temporal_task_queue,
            bot_queue=cluster.bot_queue(s),
            heartbeat_seconds=s.temporal_heartbeat_seconds,
            claim_seconds=s.temporal_claim_seconds,
            run_seconds=runs * (s.worker_max_seconds + s.test_timeout_seconds) + s.test_timeout_seconds + 600,
            takeovers=s.temporal_takeovers,
        )

    async def _unreachable(self, task: Task, err: BaseException | None = None) -> None:
        """One sentence, the task `interrupted` (Resume starts it, once, when the cluster is back)."""
        why = cluster.unreachable(self.settings, err)
        await self.store.update_task(task.id, status=TaskStatus.INTERRUPTED, error=why)
        await self.store.add_event(TaskEvent(task_id=task.id, kind="status", detail=f"interrupted: {why}"))
        await self._tell_interrupted(task, f"⚠️ **Task #{task.id}** could not start: {why}. Resume it when it is back.")

    async def _tell_interrupted(self, task: Task, text: str) -> None:
        buttons = [[button("▶ Resume", Action.RESUME, task.id), button("✖ Discard", Action.DISCARD, task.id)]]
        await self.deliveries.deliver(task.chat_id, text, buttons=buttons, kind="notice", task_id=task.id)

    async def _apply(self, task: Task, report: TaskReport) -> None:
        """Store what the runner reports, fetch its branch, show its summary (through the outbox)."""
        missing = await self._fetch(task, report)
        for kind, detail in report.events:
            await self.store.add_event(TaskEvent(task_id=task.id, kind=kind, detail=detail))
        for idx, evidence in report.verified:
            await self.store.verify_criterion(task.id, int(idx), evidence)
        for row in report.usage:
            await self.store.record_usage(UsageRecord.model_validate_json(row).model_copy(update={"id": None}))
        for row in report.tool_calls:
            await self.store.record_tool_call(ToolCallRecord.model_validate_json(row).model_copy(update={"id": None}))
        status = TaskStatus(report.status)
        fields: dict[str, object] = {"status": status, "result": report.result, "error": report.error}
        if report.branch:
            known = {
                "base_branch": report.base_branch,
                "base_commit": report.base_commit,
                "commit_sha": report.commit_sha,
            }
            fields.update(branch=report.branch, worktree=None, **{k: v for k, v in known.items() if v})
        if status.is_final:
            fields["finished_at"] = utcnow()
        await self.store.update_task(task.id, **fields)
        for shown in report.shown:
            text = shown.text + (f"\n\n⚠ {missing}" if missing else "")
            record = await remember_shown(self.store, task.chat_id, TASK, task.id, text, self.settings.shown_turn_chars)
            sent = await self.deliveries.deliver(
                task.chat_id,
                text,
                buttons=decode_buttons(shown.buttons),
                reply_to=shown.reply_to,
                kind=shown.kind,
                task_id=task.id,
            )
            await shown_as(self.store, record, sent)
        if status is TaskStatus.INTERRUPTED:
            await self._tell_interrupted(
                task, f"⚠️ **Task #{task.id}** stopped: {report.error}. Resume it, or discard it?"
            )

    async def _fetch(self, task: Task, report: TaskReport) -> str | None:
        """The task branch from the shared remote into the owner's checkout; what went wrong, if anything."""
        if not report.branch:
            return None
        if not report.pushed:
            return f"its branch `{report.branch}` did not reach `{self.settings.runner_remote}`: {report.push_error}"
        repo = self.executor.workspaces.resolve(task.workspace).path
        try:
            if await fetch_branch(repo, report.branch, self.settings.runner_remote, self.executor.identity):
                return None
            return f"its branch `{report.branch}` is not on `{self.settings.runner_remote}`"
        except GitError as err:
            return f"its branch `{report.branch}` could not be fetched: {str(err)[:300]}"


class ChatDesk:
    """The bot's activities: what a task on a runner shows in its chat."""

    def __init__(self, engine: TemporalEngine) -> None:
        self.engine = engine

    @activity.defn(name=NOTIFY)
    async def notify(self, call: NotifyCall) -> int | None:
        engine = self.engine
        task = await engine.store.get_task(call.task_id)
        if task is None or task.chat_id != call.chat_id:  # a runner speaks only into its task's chat
            raise ApplicationError(f"task {call.task_id} is not in chat {call.chat_id}", non_retryable=True)
        buttons = decode_buttons(call.buttons)
        data = base64.b64decode(call.data_b64) if call.data_b64 else b""
        if call.method == "edit" and call.message_id is not None:
            try:  # an edit is best effort (the local engine's progress swallows a failed one too): never retried
                await engine.notifier.edit(
                    call.chat_id, call.message_id, call.text, buttons=buttons, literal=call.literal
                )
            except Exception as err:
                log.debug("task %s: edit failed: %s", call.task_id, err)
            return None
        if call.method == "send_document":
            await engine.notifier.send_document(
                call.chat_id, call.filename, data, caption=call.text, literal=call.literal
            )
            return None
        if call.method == "send_photo":
            await engine.notifier.send_photo(call.chat_id, data, caption=call.text)
            return None
        sent = await engine.notifier.send(
            call.chat_id, call.text, buttons=buttons, reply_to=call.reply_to, literal=call.literal
        )
        for action, item in (parse_action(b.data) or (None, 0) for row in buttons or [] for b in row):
            if action in CHOICES:  # a network question: its answer goes back to the runner
                engine.questions[item] = (call.chat_id, call.task_id)
            elif action is Action.CANCEL and item == call.task_id and sent is not None:  # the progress message
                await engine.store.update_task(call.task_id, progress_message_id=sent)  # replies to it steer
        return sent


class RoutedInboxes(Inboxes):
    """Notes for running workers: the local ones' inboxes, else the task's workflow."""

    def __init__(self, engine: TemporalEngine) -> None:
        super().__init__()
        self.engine = engine

    async def post(self, task_id: int, text: str) -> bool:
        if self.is_open(task_id):
            return await super().post(task_id, text)
        return await self.engine.poke(Poke(task_id, "note", text=text))


class RoutedNetworkGate(NetworkGate):
    """The bot's network gate (research asks nothing; kept whole), whose buttons also answer runners' questions."""

    def __init__(self, engine: TemporalEngine, gate: NetworkGate) -> None:
        # the executor's gate exactly as it was configured (policy, store, notifier, whatever else it was given)
        self.__dict__.update(gate.__dict__)
        self.engine = engine

    def decide(self, chat_id: int, request_id: int, choice: str) -> str:
        if request_id in self._pending or choice not in ANSWERED:  # a question of a task running here
            return super().decide(chat_id, request_id, choice)
        asked = self.engine.questions.get(request_id)
        if asked is not None and asked[0] != chat_id:
            return super().decide(chat_id, request_id, choice)  # "no longer waiting": not this chat's question
        # asked through this bot, or (a restarted bot does not know the question) by one of the chat's remote tasks,
        # each of whose runners ignores a request id it is not waiting on
        tasks = [asked[1]] if asked else [t for t, chat in self.engine.remote.items() if chat == chat_id]
        if not tasks:
            return super().decide(chat_id, request_id, choice)
        self.engine.questions.pop(request_id, None)
        for task_id in tasks:
            self.engine.poke_soon(Poke(task_id, "network", chat_id=chat_id, request_id=request_id, choice=choice))
        return ANSWERED[choice].format(task_id=", #".join(map(str, tasks)))
