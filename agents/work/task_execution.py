"""Running one task end to end: worktree, worker loop, commit, the bot's own test run, corrections, summary.

`TaskExecutor` runs the stages in order; each stage is a module of its own: the sandbox and limits
(task_sandbox.py), what the worker is told (task_briefing.py), the worker and its tools (task_workers.py), the
checkout (task_checkout.py), the worker-and-corrections loop (task_corrections.py) and the end: status, summary,
proposal (task_finish.py, deciding through task_outcome.py). The progress message is progress.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import anthropic

from agents.core.errors import ToolError
from agents.core.models import Task, TaskEvent, TaskStatus, WorkerKind
from agents.core.protocols import Notifier, Outbox
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.git.command import GitError
from agents.git.repository import has_commits, rev_parse
from agents.git.worktrees import TaskWorktree
from agents.llm.usage import budget_exceeded
from agents.repo_map.maps import RepoMap
from agents.sandbox.bwrap import NetworkPolicy, SandboxProbe
from agents.sandbox.network_gate import NetworkGate
from agents.store.database import Store
from agents.store.delivery import Deliveries
from agents.verify.base_run_cache import KeptBaseRuns
from agents.verify.baseline import BaselineRuns
from agents.verify.task_tests import TaskTests
from agents.work.attempt_progress import QuietProgress
from agents.work.attempts import attempt_brief
from agents.work.before_after import BeforeAfter
from agents.work.progress import Progress
from agents.work.pull_requests import PullRequests
from agents.work.questions import Questions
from agents.work.steering import READ_EVENT, Inboxes
from agents.work.task_briefing import Briefing, first_turn, task_index
from agents.work.task_checkout import TaskCheckouts
from agents.work.task_collaborators import Collaborators, TaskLines
from agents.work.task_corrections import Corrections
from agents.work.task_finish import TaskEnding
from agents.work.task_outcome import trim
from agents.work.task_sandbox import TaskSandboxes
from agents.work.task_workers import WorkerMaker
from agents.work.turn_notes import judged_by
from agents.workspaces.folders import Workspace, Workspaces, check_reach

log = logging.getLogger(__name__)

NOTE_RECEIVED = "📝 note received"


class TaskExecutor:
    """Executes a claimed task; everything it learns goes to the store and the chat."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: anthropic.AsyncAnthropic,
        workspaces: Workspaces,
        notifier: Notifier,
        repo_map: RepoMap | None = None,
        deliveries: Outbox | None = None,
        *,
        secrets: SecretsFilter,
        probe: SandboxProbe,
        inboxes: Inboxes | None = None,
        network: NetworkGate | None = None,
        questions: Questions | None = None,
        baselines: BaselineRuns | None = None,
        pull_requests: PullRequests | None = None,
        is_owner: Callable[[int | None], bool] | None = None,
        spending: Callable[[], Awaitable[str | None]] | None = None,
        ask_user: bool = True,
    ) -> None:
        """`secrets`: the process's output filter and `probe` its bwrap probe (their owner's: the runtime's, a
        runner's). `inboxes`, `network` and `questions` default to this process's own; the bot's runtime passes those
        the chat answers through (agents/work/chat_actions.py), a runner one gate per task run (its questions go
        through that task's workflow). `pull_requests`: GitHub, when GITHUB_TOKEN is set (a follow-up's push, a GitHub
        thread's answer). `is_owner`: whether a task's starter is an owner; by default OWNER_USER_IDS of `settings`,
        but a runner is given the bot's answer for its one task (a runner's own settings are not the bot's roles).
        `spending`: why a running task stops for the day's budget; by default DAILY_BUDGET_USD against this store's
        usage, but a runner's store holds only its own: it is given the bot's budget and spending. `ask_user`: whether
        workers may ask their task's starter; a runner passes False whatever its own TASK_ENGINE says (its `.env`
        need not name one): an answer given in the bot's chat never reaches a runner's waiting worker."""
        s = settings
        self.is_owner = is_owner or s.users.is_owner
        self.base = Collaborators(
            settings,
            store,
            client,
            workspaces,
            notifier,
            deliveries or Deliveries(store, notifier),
            secrets,
            spending or (lambda: budget_exceeded(store, settings, with_calls_under_way=True)),
        )
        network = network or NetworkGate(
            NetworkPolicy(s.network.sandbox_network),
            store,
            notifier,
            s.network.sandbox_network_answer_seconds,
            self.is_owner,
            secrets=secrets,
        )
        # ask_user: questions to the task's starter. Tasks on Temporal runners do not get the tool: an answer given
        # in the bot's chat does not reach a runner's waiting worker
        questions = questions or Questions(
            store, notifier, s.tasks.ask_timeout_seconds, self.is_owner, s.tasks.ask_max_per_task
        )
        self.lines = TaskLines(inboxes or Inboxes(), network, questions)
        self.repo_map = repo_map
        self.sandboxes = TaskSandboxes(settings, secrets, probe)
        # base-commit test runs, their outcomes kept in the store for later tasks on the same base
        baselines = baselines or BaselineRuns(s.paths.worktrees_dir / "test-baselines", KeptBaseRuns(store))
        self.checkouts = TaskCheckouts(self.base, self.sandboxes, baselines, lambda: self.stopping)
        self.briefing = Briefing(settings, store, self.base.workspaces, repo_map)
        asks = ask_user and s.engine.task_engine == "local"
        self.workers = WorkerMaker(self.base, self.lines, self.sandboxes, repo_map, self.checkouts.check, asks=asks)
        self.corrections = Corrections(store, self.checkouts, s.workers.max_corrections)
        self.ending = TaskEnding(self.base, self.checkouts, pull_requests)
        self.before_after = BeforeAfter(store, self.sandboxes, self.workers.chromium)  # a frontend task's pair
        self.stopping = False  # `begin_stopping`: the bot shuts down, running tasks become interrupted, not cancelled
        self._writes: set[asyncio.Task[object]] = set()  # "notes read" records on their way to the store

    async def close(self) -> None:
        """Last step of a shutdown, after the tasks stopped: the base-commit test runs still under way are stopped
        and reaped (agents/verify/baseline.py)."""
        await self.checkouts.baselines.close()

    def begin_stopping(self) -> None:
        """The bot (or runner) shuts down: tasks cancelled from now on end interrupted (kept to resume), not
        cancelled."""
        self.stopping = True

    # what a Temporal runner reaches through the executor (the bot's chat has its own: agents/work/chat_actions.py)
    @property
    def inboxes(self) -> Inboxes:
        return self.lines.inboxes

    @property
    def network(self) -> NetworkGate:
        return self.lines.network

    @property
    def questions(self) -> Questions:
        return self.lines.questions

    @property
    def carried_notes(self) -> dict[int, list[str]]:
        """Task id → the standing notes the bot sent along with a runner's task (a runner's store has none)."""
        return self.briefing.carried_notes

    async def set_status(self, task: Task, status: TaskStatus, **fields: object) -> None:
        await self.ending.set_status(task, status, **fields)

    async def execute(self, task: Task) -> None:
        s = self.base.settings
        # an attempt's steps show in its group's one progress message (agents/work/attempts.py), not one of its own
        progress = (QuietProgress if task.attempt_group is not None else Progress)(
            self.base.notifier,
            self.base.store,
            task,
            s.tasks.progress_interval_seconds,
            s.tasks.progress_refresh_seconds,
        )
        self.inboxes.open(
            task.stored_id,
            lambda note: progress.update(NOTE_RECEIVED, force=True),
            on_read=lambda count: self._notes_read(task, count),
        )
        self.sandboxes.open(task)
        try:
            await progress.open()
            await self._execute(task, progress)
        finally:
            progress.stop()
            await self.sandboxes.close(task)  # the task's cgroup: what is left in it is killed, the folder removed
            if self.stopping:  # interrupted: its worktree stays for the resume, its own file system unmounted
                await self.checkouts.park(task)
            await self._close_lines(task)

    def _notes_read(self, task: Task, count: int) -> None:
        """The worker took `count` notes: recorded in the background (a note a restart kept from it is handed to the
        resumed worker, steering.unread_notes; one read but not yet recorded is handed again, never lost)."""
        event = TaskEvent(task_id=task.stored_id, kind=READ_EVENT, detail=str(count))
        write = asyncio.create_task(self.base.store.add_event(event), name=f"notes-read-{task.id}")
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    async def _close_lines(self, task: Task) -> None:
        """After the task: notes the worker never read are named in the chat, the network gate forgets the task,
        its open question closes (unless the bot is stopping: it stays answerable), its look-up index goes."""
        unread = self.inboxes.close(task.stored_id)
        if unread and not self.stopping:
            with contextlib.suppress(Exception):
                await self.base.notifier.send(
                    task.chat_id,
                    f"Task #{task.id} ended before its worker read your note: "
                    f"“{trim(unread[0], 200)}”" + (f" (and {len(unread) - 1} more)" if len(unread) > 1 else ""),
                )
        self.network.forget(task.stored_id)
        if not self.stopping:  # interrupted by a restart: its open question stays answerable
            with contextlib.suppress(Exception):
                await self.questions.close_open(task.stored_id)
        if self.repo_map is not None:  # the worker's own look-up index is not needed after the task
            await self.base.store.repo_index.delete(task_index(task))

    async def _execute(self, task: Task, progress: Progress) -> None:
        try:
            # the last start path: whatever stored the task (a tool, a button, a schedule, a resume), a member's
            # task never runs on the bot's own checkout, by whatever name it was stored
            check_reach(self.base.workspaces.stored(task.workspace), self.is_owner(task.user_id))
            if task.worker is WorkerKind.RESEARCH:
                await self._research(task, progress)
            else:
                await self._change(task, progress)
        except asyncio.CancelledError:
            await progress.close(
                "⏸ interrupted: the bot is stopping (resume it after the restart)" if self.stopping else "✖ cancelled"
            )
            raise
        except anthropic.APIError as err:  # an outage interrupts it (Resume goes on), a refusal fails it
            await self.ending.api_failed(task, progress, err)
        except (ToolError, GitError) as err:
            await self.ending.fail(task, progress, trim(str(err), 800))
        except Exception as err:  # never leave a task looking alive after a bug
            log.exception("task %s crashed", task.id)
            await self.ending.fail(task, progress, f"internal error ({type(err).__name__}); it is in the bot's log")

    # ---- research → proposal -------------------------------------------------------------
    async def _research(self, task: Task, progress: Progress) -> None:
        workspace = self.base.workspaces.stored(task.workspace)
        head = await rev_parse(workspace.path, "HEAD") if await has_commits(workspace.path) else None
        guidance, folder_rules = await self.briefing.guidance(task, workspace.path, head)
        worker = await self.workers.make(task, workspace.path, progress, folder_rules=folder_rules)
        repo_map = await self.briefing.repository_map(task, workspace)
        blocks, _ = await self.briefing.handed_over(task)
        result = await worker.run(
            f"Workspace: {workspace.name}\n\nResearch request:\n{task.instructions}{guidance}{repo_map}",
            attachments=blocks,
        )
        await self.ending.research_done(task, progress, result)

    # ---- code / frontend / test ------------------------------------------------------------
    async def _change(self, task: Task, progress: Progress) -> None:
        workspace = self.base.workspaces.stored(task.workspace)
        tree, checks = await self.checkouts.open(task, workspace)
        try:
            await self._work_on(task, progress, workspace, tree, checks)
        except BaseException as err:
            if not (self.stopping and isinstance(err, asyncio.CancelledError)):  # interrupted tasks keep their checkout
                await self.checkouts.drop_early(task, tree)  # cancelled or failed: the branch keeps what was done
            raise
        finally:
            checks.close()
            self.checkouts.end_guard(task)

    async def _work_on(
        self, task: Task, progress: Progress, workspace: Workspace, tree: TaskWorktree, checks: TaskTests
    ) -> None:
        # the repository's instructions are read from the owner's checkout at the base commit, never the worktree
        guidance, folder_rules = await self.briefing.guidance(task, workspace.path, tree.base_commit)
        worker = await self.workers.make(task, tree.path, progress, checks.read_only_paths, folder_rules)
        criteria = await self.base.store.criteria(task.stored_id)
        if criteria:
            progress.criteria_verified(sum(c.verified for c in criteria), len(criteria))
        # the worktree's own map (what the worker sees), its index seeded from the workspace's
        repo_map = await self.briefing.repository_map(task, workspace, tree.path)
        blocks, saved = await self.briefing.handed_over(task, tree.path)
        judge = judged_by(checks.environment, checks.problem)  # the command the bot's own test run will be
        first = first_turn(task, criteria, judge + guidance + repo_map) + saved
        first = attempt_brief(task) + first  # "attempt K of N" (nothing for an ordinary task)
        if task.result:  # an interrupted task carries what was done before
            first += (
                f"\n\n(This task was interrupted and is being resumed on the same branch. Notes from before: "
                f"{task.result}. Check the current state of the files before continuing.)"
            ) + await self.questions.carried_over(task.stored_id)
        run = await self.corrections.run(task, progress, worker, (first, blocks), tree, checks)
        await self.sandboxes.end_processes(task)  # the work is over: nothing of the task runs beside what follows
        committed = any(c.committed for c in run.commits)
        album = await self.before_after.take(task, tree, workspace.path) if committed else []
        await self.ending.change_done(task, progress, tree, run, album)
