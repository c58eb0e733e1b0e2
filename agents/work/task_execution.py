"""Running one task end to end: worktree, worker loop, commit, the bot's own test run, corrections, summary.

The progress message (progress.py), the tools' callbacks (role_tools.py) and the outcome with its summary
(task_outcome.py) are modules of their own; this one runs the stages in order and does their I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Iterable
from pathlib import Path

import anthropic

from agents.core.actions import Action, Button, button
from agents.core.errors import ToolError
from agents.core.models import Criterion, Proposal, ProposalStatus, Task, TaskEvent, TaskStatus, WorkerKind, utcnow
from agents.core.protocols import Notifier, Outbox
from agents.core.settings import Settings
from agents.core.text import fenced
from agents.git.command import GitError, GitIdentity
from agents.git.commits import CommitLimits, CommitResult, commit_all
from agents.git.guard import RepositoryGuard
from agents.git.repository import ensure_repository, has_commits, rev_parse
from agents.git.worktrees import (
    TaskWorktree,
    clear_stale_index_locks,
    create_task_worktree,
    remove_worktree_keep_branch,
)
from agents.inputs.attachments import Attachments
from agents.llm import prompts
from agents.llm.client import explain_api_error
from agents.repo_map.maps import RepoMap, repo_map_tools
from agents.sandbox.bwrap import NetworkPolicy, ResourceLimits, SandboxMode, SandboxSpec, spec_for
from agents.sandbox.network_gate import NetworkGate
from agents.sandbox.task_limits import DiskBudget, TaskBounds, disk_budget
from agents.store.database import Store
from agents.store.delivery import Deliveries
from agents.store.shown import PROPOSAL, TASK, remember_shown, shown_as
from agents.store.standing import StandingNotes
from agents.tools.mcp_tasks import TaskMcp
from agents.tools.screenshot import find_chromium
from agents.tools.tool_sets import worker_tools
from agents.tools.toolbox import Audit, Toolbox
from agents.verify.base_run_cache import KeptBaseRuns
from agents.verify.task_tests import TaskTests
from agents.verify.test_baseline import BaselineRuns
from agents.verify.test_verdict import Verdict
from agents.work.orphans import instance_token, task_tag
from agents.work.progress import Progress
from agents.work.pull_requests import PullRequests
from agents.work.questions import Questions
from agents.work.repo_rules import FOLDER_TOOLS, FolderRules, RepoRules, with_folder_rules
from agents.work.role_tools import RoleCallbacks
from agents.work.steering import Inboxes
from agents.work.task_outcome import RunFacts, branch_buttons, decide, render, trim
from agents.work.worker import Limits, Worker, WorkerResult
from agents.workspaces.credential_files import remember_credential_files
from agents.workspaces.folders import Workspace, Workspaces, check_reach

log = logging.getLogger(__name__)

ROLE_PROMPTS = {
    WorkerKind.RESEARCH: prompts.RESEARCH,
    WorkerKind.CODE: prompts.CODE,
    WorkerKind.FRONTEND: prompts.FRONTEND,
    WorkerKind.TEST: prompts.TEST,
}
NOTE_RECEIVED = "📝 note received"


def proposal_buttons(proposal_id: int) -> list[list[Button]]:
    return [[button("✅ Approve", Action.APPROVE, proposal_id), button("✖ Reject", Action.REJECT, proposal_id)]]


def scheduled_note(task: Task, before: str = "") -> str:
    """'⏰ Run of schedule #3' for a task a schedule started (its summary says so), else nothing."""
    return f"{before}⏰ Run of schedule #{task.schedule_id}." if task.schedule_id is not None else ""


async def store_proposal(store: Store, task: Task, body: str) -> Proposal:
    """A research task's proposal, stored; the chat's older pending proposals for that workspace are superseded."""
    for old in await store.pending_proposals(task.chat_id):
        if old.workspace == task.workspace:
            await store.decide_proposal(old.id, ProposalStatus.SUPERSEDED)
    return await store.add_proposal(
        Proposal(chat_id=task.chat_id, workspace=task.workspace, request=task.instructions, body=body)
    )


async def show_proposal(store: Store, deliveries: Outbox, turn_chars: int, task: Task, proposal: Proposal) -> None:
    """The proposal in the chat with Approve / Reject (through the outbox), kept in the chat's history."""
    header = (
        f"📋 **Proposal #{proposal.id}** for `{proposal.workspace}`. Approve to start a code worker on it."
        f"{scheduled_note(task, ' ')}\n\n"
    )
    record = await remember_shown(store, task.chat_id, PROPOSAL, proposal.id or 0, header + proposal.body, turn_chars)
    shown = await deliveries.deliver(
        task.chat_id,
        header + proposal.body,
        buttons=proposal_buttons(proposal.id or 0),
        kind="proposal",
        task_id=task.id,
    )
    await shown_as(store, record, shown)


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
        inboxes: Inboxes | None = None,
        network: NetworkGate | None = None,
        baselines: BaselineRuns | None = None,
        pull_requests: PullRequests | None = None,
    ) -> None:
        """`inboxes` and `network` default to this process's own; the Temporal engine passes versions that also
        reach tasks running on runners, and a runner one gate per task run (its questions go through that task's
        workflow). `pull_requests`: GitHub, when GITHUB_TOKEN is set (a follow-up's push, a GitHub thread's answer)."""
        self.settings, self.store, self.client = settings, store, client
        self.deliveries: Outbox = deliveries or Deliveries(store, notifier)  # summaries, proposals: never lost
        self.repo_map = repo_map
        self.workspaces, self.notifier = workspaces, notifier
        self.identity = GitIdentity(settings.git_author_name, settings.git_author_email)  # noqa
        self.worktrees_dir = settings.worktrees_dir
        self.commit_limits = CommitLimits(settings.max_commit_file_bytes, settings.max_commit_task_bytes)
        self.guards: dict[int, RepositoryGuard] = {}  # task id → the guard of the owner's repository while it runs
        self.bounds: dict[int, TaskBounds] = {}  # task id → its cgroup and disk budget while it runs
        # base-commit test runs, their outcomes kept in the store for later tasks on the same base
        self.baselines = baselines or BaselineRuns(self.worktrees_dir / "test-baselines", KeptBaseRuns(store))
        self.chromium = find_chromium(settings.chromium_path)
        self.inboxes = inboxes or Inboxes()  # notes for running workers (agents/work/steering.py)
        self.attachments = Attachments.from_settings(settings)
        self.stopping = False  # set when the bot shuts down: running tasks become interrupted, not cancelled
        self.network = network or NetworkGate(
            NetworkPolicy(settings.sandbox_network),
            store,
            notifier,
            settings.sandbox_network_answer_seconds,
            settings.is_owner,
        )
        self.mcp = TaskMcp.from_settings(settings, self.chromium)  # the owner's MCP servers and the browser
        # ask_user: questions to the task's starter. Tasks on Temporal runners do not get the tool: an answer given
        # in the bot's chat does not reach a runner's waiting worker
        self.questions = Questions(store, notifier, settings.ask_timeout_seconds, settings.is_owner)
        self.rules = RepoRules(settings.repo_instructions_max_chars)  # AGENTS.md & co., cached per commit
        self.carried_notes: dict[int, list[str]] = {}  # task id → standing notes sent along (a runner's tasks)
        self.pull_requests = pull_requests

    def sandbox_for(
        self, root: Path, repository: Path, read_only: Iterable[Path] = (), task_id: int | None = None
    ) -> SandboxSpec | None:
        """The sandbox a task's processes run in; None only when SANDBOX=off was set explicitly.
        What it binds besides `root` is read from `repository` (the owner's checkout), never from the worktree.
        With `task_id`, the command joins the task's cgroup and counts against its disk budget."""
        s = self.settings
        if SandboxMode(s.sandbox) is SandboxMode.OFF:
            return None
        limits = ResourceLimits(
            max_processes=s.sandbox_max_processes,
            max_file_bytes=s.sandbox_max_file_mb << 20,
            max_memory_bytes=s.sandbox_max_memory_mb << 20,
            tmp_bytes=s.sandbox_tmp_mb << 20,
        )
        spec = spec_for(root, repository=repository, limits=limits, extra_read_only=[*s.sandbox_read_paths, *read_only])
        bounds = self.bounds.get(task_id) if task_id is not None else None
        return dataclasses.replace(spec, task=bounds) if bounds is not None else spec

    def open_bounds(self, task: Task) -> TaskBounds:
        """The task's shared limits: memory and processes (a cgroup, made at its first command), disk (its worktree)."""
        s = self.settings
        bounds = TaskBounds(
            f"{task.id}", s.sandbox_max_memory_mb << 20, s.sandbox_max_processes, max_services=s.sandbox_max_services
        )
        self.bounds[task.id] = bounds
        return bounds

    def limits(self) -> Limits:
        s = self.settings
        return Limits(max_steps=s.worker_max_steps, max_seconds=s.worker_max_seconds, max_tokens=s.worker_max_tokens)

    async def set_status(self, task: Task, status: TaskStatus, **fields: object) -> None:
        task.status = status
        if status.is_final:
            fields.setdefault("finished_at", utcnow())
        await self.store.update_task(task.id, status=status, **fields)
        await self.store.add_event(TaskEvent(task_id=task.id, kind="status", detail=status.value))

    async def make_worker(
        self,
        task: Task,
        root: Path,
        progress: Progress,
        read_only: Iterable[Path] = (),
        folder_rules: FolderRules | None = None,
    ) -> Worker:
        bounds = self.bounds.get(task.id)
        if bounds is not None and bounds.disk is None:  # the worktree the task's disk budget watches
            bounds.disk = DiskBudget(root.resolve(), disk_budget(self.settings.sandbox_max_disk_mb, self.worktrees_dir))

        callbacks = RoleCallbacks(
            task,
            self.store,
            self.notifier,
            progress,
            self.network,
            self.chromium,
            lambda ws_root: self.sandbox_for(ws_root, self.workspaces.resolve(task.workspace).path, read_only, task.id),
            questions=self.questions,
        )
        asks = task.worker is not WorkerKind.RESEARCH and self.settings.task_engine == "local"
        tools = worker_tools(
            task.worker,
            root,
            self.settings.command_timeout_seconds,
            callbacks.screenshot,
            callbacks.verify if task.worker is not WorkerKind.RESEARCH else None,
            task_tag(instance_token(self.settings.database_path), task.id),
            sandbox=self.sandbox_for(root, self.workspaces.resolve(task.workspace).path, read_only, task.id),
            ask_network=callbacks.ask_network,
            ask_user=callbacks.ask_user if asks else None,
        )
        if folder_rules is not None:  # a folder with its own AGENTS.md gets one line in the result that first meets it
            tools = [with_folder_rules(t, folder_rules) if t.name in FOLDER_TOOLS else t for t in tools]
        if self.repo_map is not None and task.worker is not WorkerKind.RESEARCH:  # research: read_file/glob/grep only
            tools += repo_map_tools(self.repo_map, f"{task.workspace}@task-{task.id}", root)
        if bounds is not None:  # MCP servers of this kind (MCP_CONFIG, the browser): started now, ended with the task
            sandbox = self.sandbox_for(root, self.workspaces.resolve(task.workspace).path, read_only, task.id)
            tools += await self.mcp.open(task.worker, sandbox, bounds, callbacks.mcp_gates(), callbacks.pictures)
        toolbox = Toolbox(
            tools,
            Audit(self.store, agent=f"{task.worker.value}-worker", chat_id=task.chat_id, task_id=task.id),
            max_result_chars=self.settings.tool_result_max_chars,
        )
        worker = Worker(
            client=self.client,
            model=self.settings.worker_model,
            system=ROLE_PROMPTS[task.worker],
            toolbox=toolbox,
            limits=self.limits(),
            max_output_tokens=self.settings.worker_max_output_tokens,
            # a non-streaming answer arrives whole: allow ~30 output tokens a second at the least
            request_timeout=max(self.settings.anthropic_timeout_seconds, self.settings.worker_max_output_tokens / 30),
            on_step=lambda step: self.on_step(task, progress, step),
            on_usage=callbacks.on_usage,
            inbox=self.inboxes.reader(task.id),
            context_window=self.settings.worker_context_tokens,
        )
        callbacks.clock = worker.loop  # ask_user stops the worker's clock while it waits
        return worker

    async def on_step(self, task: Task, progress: Progress, step: str) -> None:
        """Before each worker step: progress, and the owner's repository checked (what the last step moved undone)."""
        await progress.update(step)
        await self.check_repository(task)

    async def check_repository(self, task: Task) -> list[str]:
        """Undo what the worker moved in the owner's repository; every warning so far (new ones become task events)."""
        guard = self.guards.get(task.id)
        if guard is None:
            return []
        await guard.check()
        for warning in guard.unreported():
            await self.store.add_event(TaskEvent(task_id=task.id, kind="guard", detail=warning[:300]))
        return list(guard.warnings)

    async def execute(self, task: Task) -> None:
        s = self.settings
        progress = Progress(self.notifier, self.store, task, s.progress_interval_seconds, s.progress_refresh_seconds)
        self.inboxes.open(task.id, lambda note: progress.update(NOTE_RECEIVED, force=True))
        bounds = self.open_bounds(task)
        try:
            await progress.open()
            await self._execute(task, progress)
        finally:
            progress.stop()
            self.bounds.pop(task.id, None)
            await bounds.close()  # the task's cgroup: what is left in it is killed, the folder removed
            unread = self.inboxes.close(task.id)
            if unread and not self.stopping:
                with contextlib.suppress(Exception):
                    await self.notifier.send(
                        task.chat_id,
                        f"Task #{task.id} ended before its worker read your note: "
                        f"“{trim(unread[0], 200)}”" + (f" (and {len(unread) - 1} more)" if len(unread) > 1 else ""),
                    )
            self.network.forget(task.id)
            if not self.stopping:  # interrupted by a restart: its open question stays answerable
                with contextlib.suppress(Exception):
                    await self.questions.close_open(task.id)
            if self.repo_map is not None:  # the worker's own look-up index is not needed after the task
                await self.store.repo_index.delete(f"{task.workspace}@task-{task.id}")

    async def _execute(self, task: Task, progress: Progress) -> None:
        try:
            # the last start path: whatever stored the task (a tool, a button, a schedule, a resume), a member's
            # task never runs on the bot's own checkout, by whatever name it was stored
            check_reach(self.workspaces.resolve(task.workspace), self.settings.is_owner(task.user_id))
            if task.worker is WorkerKind.RESEARCH:
                await self._research(task, progress)
            else:
                await self._change(task, progress)
        except asyncio.CancelledError:
            await progress.close(
                "⏸ interrupted: the bot is stopping (resume it after the restart)" if self.stopping else "✖ cancelled"
            )
            raise
        except anthropic.APIError as err:
            await self._fail(task, progress, explain_api_error(err))
        except (ToolError, GitError) as err:
            await self._fail(task, progress, trim(str(err), 800))
        except Exception as err:  # never leave a task looking alive after a bug
            log.exception("task %s crashed", task.id)
            await self._fail(task, progress, f"internal error ({type(err).__name__}); it is in the bot's log")

    async def _fail(self, task: Task, progress: Progress, reason: str) -> None:
        await self.set_status(task, TaskStatus.FAILED, error=reason)
        await progress.close(f"✖ failed: {trim(reason, 200)}")
        await self._show(task, f"✖ **Task #{task.id} failed**: {reason}")
        await self.tell_github(task)

    async def repository_map(self, task: Task, workspace: Workspace, worktree: Path | None = None) -> str:
        """The token-bounded map for this request ('' when there is none): of the task's worktree (its own index,
        seeded from the workspace's), or of the workspace for research. A workspace index still being built is
        waited for within REPO_MAP_WAIT_SECONDS, drawing included; then the map shows what is indexed so far."""
        if self.repo_map is None or self.settings.repo_map_tokens <= 0:
            return ""
        try:
            text = await self.repo_map.task_map(
                workspace.name,
                workspace.path,
                task.instructions,
                self.settings.repo_map_tokens,
                self.settings.repo_map_wait_seconds,
                task_index=f"{task.workspace}@task-{task.id}" if worktree is not None else None,
                task_root=worktree,
            )
        except Exception as err:  # the map helps; its absence must not fail the task
            log.warning("task %s: no repository map: %s", task.id, err)
            return ""
        return f"\n\nRepository map (most relevant files first, with signatures):\n{fenced(text)}" if text else ""

    def first_turn(self, task: Task, criteria: list[Criterion], repo_map: str = "") -> str:
        text = task.instructions
        if criteria:
            listed = "\n".join(f"{c.idx}. {c.text}" for c in criteria)
            text += (
                f"\n\nAcceptance criteria (when one holds, call verify_criterion with its number and the "
                f"evidence; the task is only done when all are verified):\n{listed}"
            )
        return text + repo_map

    async def guidance(self, task: Task, repository: Path, commit: str | None) -> tuple[str, FolderRules | None]:
        """The repository's instructions for agents at `commit` and the user's standing notes for the task's
        workspace, for the worker's first turn; and the folders with an AGENTS.md the first turn did not show."""
        text, rules = "", None
        if commit:
            try:
                found = await self.rules.for_task(repository, commit, task.instructions)
            except Exception as err:  # the guidance helps; its absence must not fail the task
                log.warning("task %s: the repository's instructions could not be read: %s", task.id, err)
            else:
                text = "\n\n" + found.text if found.text else ""
                rules = FolderRules(found.agents_folders, set(found.shown_agents))
        carried = self.carried_notes.pop(task.id, None)
        if carried is None:
            kept = await StandingNotes(self.store).applying(task.user_id, self.settings.is_owner, task.workspace)
            carried = [n.text for n in kept]
        if carried:
            listed = "\n".join(f"- {n}" for n in carried)
            text += (
                "\n\n## Standing notes (the user's wishes for their tasks here; a later note wins over an earlier one)"
                f"\n{listed}"
            )
        return text, rules

    async def handed_over(self, task: Task, worktree: Path | None = None) -> tuple[list[dict], str]:
        """The photos and files handed to the task: content blocks for the worker's first turn, and a line naming
        the copies saved under the worktree's ignored attachments folder (when start_task asked for that)."""
        rows = await self.store.task_attachments(task.id)
        if not rows:
            return [], ""
        blocks = await self.attachments.blocks_of([a for a, _ in rows])
        to_save = [a for a, save in rows if save]
        paths, problem = (
            await self.attachments.copy_into(to_save, worktree) if to_save and worktree is not None else ([], None)
        )
        note = (
            (
                "\n\nThe user's files are saved in the worktree (ignored by git; "
                "copy what the project needs into it): "
                f"{', '.join(paths)}"
            )
            if paths
            else ""
        )
        if problem:  # the files are still in this message; only the copies in the worktree are missing
            note += f"\n\nThe user's files could not all be saved in the worktree: {problem}. They are shown above."
        return blocks, note

    # ---- research → proposal -------------------------------------------------------------
    async def _research(self, task: Task, progress: Progress) -> None:
        workspace = self.workspaces.resolve(task.workspace)
        head = await rev_parse(workspace.path, "HEAD") if await has_commits(workspace.path) else None
        guidance, folder_rules = await self.guidance(task, workspace.path, head)
        worker = await self.make_worker(task, workspace.path, progress, folder_rules=folder_rules)
        repo_map = await self.repository_map(task, workspace)
        blocks, _ = await self.handed_over(task)
        result = await worker.run(
            f"Workspace: {workspace.name}\n\nResearch request:\n{task.instructions}{guidance}{repo_map}",
            attachments=blocks,
        )
        if not result.finished or not result.report:
            reason = result.reason(self.limits()) if not result.finished else "the research worker wrote no proposal"
            status = TaskStatus.BLOCKED if result.blocked else TaskStatus.FAILED
            await self.set_status(task, status, error=reason, result=result.report or None)
            await progress.close(f"✖ {reason}")
            await self._show(
                task, f"✖ **Research #{task.id}** ended without a proposal: {reason}.{scheduled_note(task, ' ')}"
            )
            return
        proposal = await store_proposal(self.store, task, result.report)
        await self.set_status(task, TaskStatus.COMPLETED, result=f"proposal #{proposal.id}")
        await progress.close(f"✔ proposal #{proposal.id} ready")
        await show_proposal(self.store, self.deliveries, self.settings.shown_turn_chars, task, proposal)

    # ---- code / frontend / test ------------------------------------------------------------
    async def _change(self, task: Task, progress: Progress) -> None:
        workspace = self.workspaces.resolve(task.workspace)
        initialised = await ensure_repository(workspace.path, self.identity)
        if initialised:
            await self.notifier.send(task.chat_id, f"`{workspace.name}` was not a git repository; I initialised one.")
        tree = await create_task_worktree(
            workspace.path, task.id, task.title, self.identity, self.worktrees_dir, branch=task.branch
        )  # set when an interrupted task resumes
        await self.store.update_task(
            task.id,
            branch=tree.branch,
            base_branch=tree.base_branch,
            base_commit=tree.base_commit,
            worktree=str(tree.path),
        )
        await clear_stale_index_locks(tree)  # a SIGKILL during the bot's own `git add` leaves one behind
        # `cat .npmrc` in a command then prints «masked», until the task ends (its bounds close its secrets' scope)
        bounds = self.bounds.get(task.id) if task.id is not None else None
        await remember_credential_files(tree.path, bounds.secrets if bounds is not None else None)
        checks = await TaskTests.start(
            workspace.path,
            tree.path,
            tree.base_commit,
            task.instructions,
            self.baselines,
            self.settings.test_timeout_seconds,  # the baseline runs while the worker works
            sandbox_for=lambda root, read_only: self.sandbox_for(root, workspace.path, read_only, task.id),
        )
        # after TaskTests.start: it hides the borrowed links in the repository's info/exclude, which the guard watches
        self.guards[task.id] = await RepositoryGuard.start(tree)
        try:
            await self._work_on(task, progress, workspace, tree, checks)
        except BaseException as err:
            if not (self.stopping and isinstance(err, asyncio.CancelledError)):  # interrupted tasks keep their checkout
                # cancelled or failed: keep the branch (and its commits), drop the checkout
                with contextlib.suppress(Exception):
                    await commit_all(
                        tree,
                        f"{task.title} (partial, task ended early)\n\nagentlab task #{task.id}",
                        self.identity,
                        self.commit_limits,
                    )
                    self.end_guard(task)
                    await remove_worktree_keep_branch(tree)
            raise
        finally:
            checks.close()
            self.end_guard(task)

    def end_guard(self, task: Task) -> list[str]:
        """Stop guarding the task's repository (before its worktree goes); every warning the guard gave."""
        guard = self.guards.pop(task.id, None)
        if guard is None:
            return []
        guard.close()
        return guard.warnings

    async def _work_on(
        self, task: Task, progress: Progress, workspace: Workspace, tree: TaskWorktree, checks: TaskTests
    ) -> None:
        # the repository's instructions are read from the owner's checkout at the base commit, never the worktree
        guidance, folder_rules = await self.guidance(task, workspace.path, tree.base_commit)
        worker = await self.make_worker(
            task, tree.path, progress, checks.read_only_paths, folder_rules
        )  # borrowed node_modules etc.
        criteria = await self.store.criteria(task.id)
        if criteria:
            progress.criteria = f"{sum(c.verified for c in criteria)}/{len(criteria)} criteria verified"
        resumed = bool(task.result)  # an interrupted task carries what was done before
        # the worktree's own map (what the worker sees), its index seeded from the workspace's
        repo_map = await self.repository_map(task, workspace, tree.path)
        blocks, saved = await self.handed_over(task, tree.path)
        first = self.first_turn(task, criteria, guidance + repo_map) + saved
        if resumed:
            first += (
                f"\n\n(This task was interrupted and is being resumed on the same branch. Notes from before: "
                f"{task.result}. Check the current state of the files before continuing.)"
            ) + await self.questions.carried_over(task.id)
        result = await worker.run(first, attachments=blocks)
        commit = await commit_all(tree, f"{task.title}\n\nagentlab task #{task.id}", self.identity, self.commit_limits)
        commits = [commit] if commit else []
        verdict: Verdict | None = None
        corrections = 0
        while result.finished:
            await progress.update("running tests", force=True)
            verdict = await checks.check(tree.path)
            await self.store.add_event(TaskEvent(task_id=task.id, kind="tests", detail=verdict.detail()))
            if not verdict.needs_correction or corrections >= self.settings.max_corrections:
                break
            corrections += 1
            await progress.update(
                f"correcting failed tests ({corrections}/{self.settings.max_corrections})", force=True
            )
            result = await worker.run(verdict.correction(corrections, self.settings.max_corrections))
            commit = await commit_all(
                tree,
                f"{task.title} (correction {corrections})\n\nagentlab task #{task.id}",
                self.identity,
                self.commit_limits,
            )
            if commit:
                commits.append(commit)
        await self._finish(task, progress, tree, result, verdict, corrections, commits)

    async def _finish(
        self,
        task: Task,
        progress: Progress,
        tree: TaskWorktree,
        result: WorkerResult,
        verdict: Verdict | None,
        corrections: int,
        commits: list[CommitResult],
    ) -> None:
        """Gather the run's facts, decide its outcome (task_outcome.py, no I/O), then store, clean up and show it."""
        facts = RunFacts(
            task_id=task.id,
            workspace=task.workspace,
            result=result,
            limits=self.limits(),
            verdict=verdict,
            corrections=corrections,
            criteria=await self.store.criteria(task.id),
            commits=commits,
            branch=tree.branch,
            base_branch=tree.base_branch,
            guard_warnings=await self.check_repository(task),  # the tests ran the worker's code too
        )
        outcome = decide(facts)
        last = outcome.last_commit
        await self.set_status(
            task,
            outcome.status,
            result=trim(result.report, 4000) or None,
            error=outcome.error,
            commit_sha=last.sha if last else None,
        )
        self.end_guard(task)
        await remove_worktree_keep_branch(tree)
        await progress.close(outcome.headline)
        offer_pr = self.pull_requests is not None and await self.pull_requests.offered_for(task)
        buttons = branch_buttons(task.id, outcome.status, pull_request=offer_pr) if last else None
        summary = render(outcome)
        if task.schedule_id is not None:  # under the headline: the first line still starts with the verdict's mark
            headline, _, rest = summary.partition("\n")
            summary = f"{headline}\n{scheduled_note(task)}\n{rest}"
        await self._show(task, summary, buttons=buttons, reply_to=task.reply_to_message_id)
        await self.tell_github(task)

    async def tell_github(self, task: Task) -> None:
        """A follow-up's commits go to its pull request; the GitHub thread that started the task gets its answer."""
        if self.pull_requests is not None:
            await self.pull_requests.after_task(task)

    async def _show(self, task: Task, markdown: str, **how: object) -> None:
        """Send a task's outcome to its chat, and keep it in the chat's history as the bot's turn."""
        record = await remember_shown(self.store, task.chat_id, TASK, task.id, markdown, self.settings.shown_turn_chars)
        # through the outbox: a Telegram 5xx is retried and never turns the finished task into a failure
        await shown_as(
            self.store,
            record,
            await self.deliveries.deliver(task.chat_id, markdown, kind="summary", task_id=task.id, **how),
        )
