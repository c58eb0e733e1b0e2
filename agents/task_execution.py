"""Running one task end to end: worktree, worker loop, commit, the bot's own test run, corrections, summary."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path

import anthropic

from agents import git_repo, prompts
from agents.llm import explain_api_error, usage_record
from agents.models import Criterion, Proposal, ProposalStatus, Task, TaskEvent, TaskStatus, WorkerKind, utcnow
from agents.notify import Button, Notifier
from agents.orphans import instance_token, task_tag
from agents.repo_map import RepoMap, repo_map_tools
from agents.screenshot import find_chromium, screenshot_tool_result
from agents.settings import Settings
from agents.store import Store
from agents.test_runner import TestOutcome, TestStatus, run_tests
from agents.tool_sets import worker_tools
from agents.toolbox import Audit, Toolbox, ToolResult
from agents.worker import Limits, Worker, WorkerResult
from agents.workspaces import ToolError, Workspace, Workspaces

log = logging.getLogger(__name__)

ROLE_PROMPTS = {
    WorkerKind.RESEARCH: prompts.RESEARCH,
    WorkerKind.CODE: prompts.CODE,
    WorkerKind.FRONTEND: prompts.FRONTEND,
    WorkerKind.TEST: prompts.TEST,
}
REPORT_LIMIT = 1500
PROGRESS_INTERVAL = 5.0  # at most one edit of a progress message per this many seconds
PROGRESS_TICK = 15.0  # refresh the elapsed time at least this often during a long step


def share_virtualenv(repo: Path, worktree: Path) -> None:
    """A task worktree has no untracked files; link the checkout's `.venv` in so the project's tests find their deps."""
    venv, link = repo / ".venv", worktree / ".venv"
    if venv.is_dir() and not link.exists() and not link.is_symlink():
        with contextlib.suppress(OSError):
            link.symlink_to(venv, target_is_directory=True)


def trim(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def cancel_button(task_id: int) -> list[list[Button]]:
    return [[Button("✖ Cancel", f"task:cancel:{task_id}")]]


def proposal_buttons(proposal_id: int) -> list[list[Button]]:
    return [[Button("✅ Approve", f"proposal:approve:{proposal_id}"), Button("✖ Reject", f"proposal:reject:{proposal_id}")]]


def branch_buttons(task_id: int) -> list[list[Button]]:
    return [[Button("Merge", f"task:merge:{task_id}"), Button("Diff", f"task:diff:{task_id}"),
             Button("Discard", f"task:discard:{task_id}")]]


class Progress:
    """One progress message per task, edited in place at most every PROGRESS_INTERVAL seconds."""

    def __init__(self, notifier: Notifier, store: Store, task: Task) -> None:
        self.notifier, self.store, self.task = notifier, store, task
        self.started = time.monotonic()
        self.step = "starting"
        self.last_edit = 0.0
        self.message_id = task.progress_message_id
        self.criteria = ""  # e.g. "2/3 criteria"
        self._ticker: asyncio.Task[None] | None = None

    def text(self) -> str:
        t = self.task
        elapsed = int(time.monotonic() - self.started)
        return (f"⏳ **Task #{t.id}** · {t.worker.value} worker · `{t.workspace}`\n{trim(t.title, 120)}\n"
                f"{elapsed // 60}m{elapsed % 60:02d}s · {self.step}" + (f" · {self.criteria}" if self.criteria else ""))

    async def open(self) -> None:
        if self.message_id is None:
            self.message_id = await self.notifier.send(self.task.chat_id, self.text(), buttons=cancel_button(self.task.id),
                                                       reply_to=self.task.reply_to_message_id)
            await self.store.update_task(self.task.id, progress_message_id=self.message_id)
        self._ticker = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_TICK)
            if time.monotonic() - self.last_edit >= PROGRESS_TICK:
                await self._edit()

    async def _edit(self) -> None:
        if self.message_id is None:
            return
        self.last_edit = time.monotonic()
        try:
            await self.notifier.edit(self.task.chat_id, self.message_id, self.text(), buttons=cancel_button(self.task.id))
        except Exception as err:  # a progress edit must never break the task
            log.debug("task %s: progress edit failed: %s", self.task.id, err)

    async def update(self, step: str, force: bool = False) -> None:
        self.step = step
        await self.store.add_event(TaskEvent(task_id=self.task.id, kind="step", detail=step[:300]))
        if force or time.monotonic() - self.last_edit >= PROGRESS_INTERVAL:
            await self._edit()

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()

    async def close(self, final_line: str) -> None:
        self.stop()
        if self.message_id is None:
            return
        t = self.task
        try:
            await self.notifier.edit(t.chat_id, self.message_id,
                                     f"**Task #{t.id}** · {t.worker.value} · `{t.workspace}`\n{trim(t.title, 120)}\n{final_line}")
        except Exception as err:
            log.debug("progress close failed: %s", err)


class TaskExecutor:
    """Executes a claimed task; everything it learns goes to the store and the chat."""

    def __init__(self, settings: Settings, store: Store, client: anthropic.AsyncAnthropic, workspaces: Workspaces,
                 notifier: Notifier, repo_map: RepoMap | None = None) -> None:
        self.settings, self.store, self.client = settings, store, client
        self.repo_map = repo_map
        self.workspaces, self.notifier = workspaces, notifier
        self.identity = git_repo.GitIdentity(settings.git_author_name, settings.git_author_email)  # noqa
        self.worktrees_dir = settings.database_path.parent.resolve() / "worktrees"
        self.chromium = find_chromium(settings.chromium_path)
        self.stopping = False  # set when the bot shuts down: running tasks become interrupted, not cancelled

    def limits(self) -> Limits:
        s = self.settings
        return Limits(max_steps=s.worker_max_steps, max_seconds=s.worker_max_seconds, max_tokens=s.worker_max_tokens)

    async def set_status(self, task: Task, status: TaskStatus, **fields: object) -> None:
        task.status = status
        if status.is_final:
            fields.setdefault("finished_at", utcnow())
        await self.store.update_task(task.id, status=status, **fields)
        await self.store.add_event(TaskEvent(task_id=task.id, kind="status", detail=status.value))

    def make_worker(self, task: Task, root: Path, progress: Progress) -> Worker:
        async def screenshot(ws_root: Path, target: str) -> ToolResult:
            result, pictures = await screenshot_tool_result(self.chromium, ws_root, target)
            for caption, png in pictures:
                await self.notifier.send_photo(task.chat_id, png, caption=f"Task #{task.id}: {caption}")
            return result

        async def verify(index: int, evidence: str) -> str:
            if not await self.store.verify_criterion(task.id, int(index), str(evidence)[:2000]):
                count = len(await self.store.criteria(task.id))
                raise ToolError(f"there is no criterion {index}; the criteria are numbered 1..{count}")
            criteria = await self.store.criteria(task.id)
            done = sum(c.verified for c in criteria)
            progress.criteria = f"{done}/{len(criteria)} criteria"
            await progress.update(f"verified criterion {index}")
            return f"criterion {index} verified ({done}/{len(criteria)})"

        async def on_usage(response: anthropic.types.Message) -> None:
            await self.store.record_usage(usage_record(response, f"{task.worker.value}-worker", task.chat_id, task.id))

        tools = worker_tools(task.worker, root, self.settings.command_timeout_seconds, screenshot,
                             verify if task.worker is not WorkerKind.RESEARCH else None,
                             task_tag(instance_token(self.settings.database_path), task.id))
        if self.repo_map is not None and task.worker is not WorkerKind.RESEARCH:  # research: read_file/glob/grep only
            tools += repo_map_tools(self.repo_map, f"{task.workspace}@task-{task.id}", root)
        toolbox = Toolbox(
            tools,
            Audit(self.store, agent=f"{task.worker.value}-worker", chat_id=task.chat_id, task_id=task.id),
        )
        return Worker(client=self.client, model=self.settings.worker_model, system=ROLE_PROMPTS[task.worker],
                      toolbox=toolbox, limits=self.limits(), max_output_tokens=self.settings.worker_max_output_tokens,
                      # a non-streaming answer arrives whole: allow ~30 output tokens a second at the least
                      request_timeout=max(self.settings.anthropic_timeout_seconds,
                                          self.settings.worker_max_output_tokens / 30),
                      on_step=progress.update, on_usage=on_usage)

    async def execute(self, task: Task) -> None:
        progress = Progress(self.notifier, self.store, task)
        await progress.open()
        try:
            await self._execute(task, progress)
        finally:
            progress.stop()
            if self.repo_map is not None:  # the worker's own look-up index is not needed after the task
                await self.store.delete_repo_index(f"{task.workspace}@task-{task.id}")

    async def _execute(self, task: Task, progress: "Progress") -> None:
        try:
            if task.worker is WorkerKind.RESEARCH:
                await self._research(task, progress)
            else:
                await self._change(task, progress)
        except asyncio.CancelledError:
            await progress.close("⏸ interrupted: the bot is stopping (resume it after the restart)" if self.stopping
                                 else "✖ cancelled")
            raise
        except anthropic.APIError as err:
            await self._fail(task, progress, explain_api_error(err))
        except (ToolError, git_repo.GitError) as err:
            await self._fail(task, progress, trim(str(err), 800))
        except Exception as err:  # never leave a task looking alive after a bug
            log.exception("task %s crashed", task.id)
            await self._fail(task, progress, f"internal error ({type(err).__name__}); it is in the bot's log")

    async def _fail(self, task: Task, progress: "Progress", reason: str) -> None:
        await self.set_status(task, TaskStatus.FAILED, error=reason)
        await progress.close(f"✖ failed: {trim(reason, 200)}")
        await self.notifier.send(task.chat_id, f"✖ **Task #{task.id} failed**: {reason}")

    async def repository_map(self, task: Task, name: str, root: Path, seed_from: str | None = None) -> str:
        """The token-bounded map of the workspace for this request ('' when there is none)."""
        if self.repo_map is None or self.settings.repo_map_tokens <= 0:
            return ""
        try:
            text = await self.repo_map.render(name, root, task.instructions, self.settings.repo_map_tokens,
                                              seed_from=seed_from)
        except Exception as err:  # the map helps; its absence must not fail the task
            log.warning("task %s: no repository map: %s", task.id, err)
            return ""
        return f"\n\nRepository map (most relevant files first, with signatures):\n```\n{text}\n```" if text else ""

    def first_turn(self, task: Task, criteria: list[Criterion], repo_map: str = "") -> str:
        text = task.instructions
        if criteria:
            listed = "\n".join(f"{c.idx}. {c.text}" for c in criteria)
            text += (f"\n\nAcceptance criteria (when one holds, call verify_criterion with its number and the "
                     f"evidence; the task is only done when all are verified):\n{listed}")
        return text + repo_map

    # ---- research → proposal -------------------------------------------------------------
    async def _research(self, task: Task, progress: Progress) -> None:
        workspace = self.workspaces.resolve(task.workspace)
        worker = self.make_worker(task, workspace.path, progress)
        repo_map = await self.repository_map(task, workspace.name, workspace.path)
        result = await worker.run(f"Workspace: {workspace.name}\n\nResearch request:\n{task.instructions}{repo_map}")
        if not result.finished or not result.report:
            reason = result.reason(self.limits()) if not result.finished else "the research worker wrote no proposal"
            await self.set_status(task, TaskStatus.FAILED, error=reason, result=result.report or None)
            await progress.close(f"✖ {reason}")
            await self.notifier.send(task.chat_id, f"✖ **Research #{task.id}** ended without a proposal: {reason}.")
            return
        for old in await self.store.pending_proposals(task.chat_id):
            if old.workspace == workspace.name:
                await self.store.decide_proposal(old.id, ProposalStatus.SUPERSEDED)
        proposal = await self.store.add_proposal(Proposal(chat_id=task.chat_id, workspace=workspace.name,
                                                          request=task.instructions, body=result.report))
        await self.set_status(task, TaskStatus.COMPLETED, result=f"proposal #{proposal.id}")
        await progress.close(f"✔ proposal #{proposal.id} ready")
        header = f"📋 **Proposal #{proposal.id}** for `{workspace.name}`. Approve to start a code worker on it.\n\n"
        await self.notifier.send(task.chat_id, header + result.report, buttons=proposal_buttons(proposal.id))

    # ---- code / frontend / test ------------------------------------------------------------
    async def _change(self, task: Task, progress: Progress) -> None:
        workspace = self.workspaces.resolve(task.workspace)
        initialised = await git_repo.ensure_repository(workspace.path, self.identity)
        if initialised:
            await self.notifier.send(task.chat_id, f"`{workspace.name}` was not a git repository; I initialised one.")
        tree = await git_repo.create_task_worktree(workspace.path, task.id, task.title, self.identity, self.worktrees_dir,
                                                   branch=task.branch)  # set when an interrupted task resumes
        await self.store.update_task(task.id, branch=tree.branch, base_branch=tree.base_branch,
                                     base_commit=tree.base_commit, worktree=str(tree.path))
        share_virtualenv(workspace.path, tree.path)
        try:
            await self._work_on(task, progress, workspace, tree)
        except BaseException as err:
            if not (self.stopping and isinstance(err, asyncio.CancelledError)):  # interrupted tasks keep their checkout
                # cancelled or failed: keep the branch (and its commits), drop the checkout
                with contextlib.suppress(Exception):
                    await git_repo.commit_all(tree, f"{task.title} (partial, task ended early)\n\nagentlab task #{task.id}",
                                              self.identity)
                    await git_repo.remove_worktree_keep_branch(tree)
            raise

    async def _work_on(self, task: Task, progress: Progress, workspace: Workspace, tree: git_repo.TaskWorktree) -> None:
        worker = self.make_worker(task, tree.path, progress)
        criteria = await self.store.criteria(task.id)
        if criteria:
            progress.criteria = f"{sum(c.verified for c in criteria)}/{len(criteria)} criteria"
        resumed = bool(task.result)  # an interrupted task carries what was done before
        # the worktree's own map (what the worker sees), its index seeded from the workspace's
        repo_map = await self.repository_map(task, f"{task.workspace}@task-{task.id}", tree.path, workspace.name)
        first = self.first_turn(task, criteria, repo_map)
        if resumed:
            first += (f"\n\n(This task was interrupted and is being resumed on the same branch. Notes from before: "
                      f"{task.result}. Check the current state of the files before continuing.)")
        result = await worker.run(first)
        commit = await git_repo.commit_all(tree, f"{task.title}\n\nagentlab task #{task.id}", self.identity)
        commits = [commit] if commit else []
        outcome: TestOutcome | None = None
        corrections = 0
        while result.finished:
            await progress.update("running tests", force=True)
            outcome = await run_tests(tree.path, self.settings.test_timeout_seconds)
            await self.store.add_event(TaskEvent(task_id=task.id, kind="tests", detail=f"{outcome.status.value}: {outcome.summary}"))
            if outcome.status is not TestStatus.failed or corrections >= self.settings.max_corrections:
                break
            corrections += 1
            await progress.update(f"correcting failed tests ({corrections}/{self.settings.max_corrections})", force=True)
            result = await worker.run(prompts.CORRECTION.format(
                attempt=corrections, limit=self.settings.max_corrections, command=outcome.command,
                output=tail(outcome.output, 6000)))
            commit = await git_repo.commit_all(tree, f"{task.title} (correction {corrections})\n\nagentlab task #{task.id}",
                                               self.identity)
            if commit:
                commits.append(commit)
        await self._finish(task, progress, tree, result, outcome, corrections, commits)

    async def _finish(self, task: Task, progress: Progress, tree: git_repo.TaskWorktree, result: WorkerResult,
                      outcome: TestOutcome | None, corrections: int, commits: list[git_repo.CommitResult]) -> None:
        last = commits[-1] if commits else None
        criteria = await self.store.criteria(task.id)
        unverified = [c for c in criteria if not c.verified]
        if not result.finished:
            status, headline = TaskStatus.FAILED, f"✖ Task #{task.id} stopped: {result.reason(self.limits())}"
        elif outcome is not None and outcome.status is TestStatus.error:
            status, headline = TaskStatus.BLOCKED, f"⛔ Task #{task.id} blocked: the tests could not be run"
        elif outcome is not None and outcome.status is TestStatus.failed:
            status, headline = TaskStatus.BLOCKED, (
                f"⛔ Task #{task.id} blocked: tests still fail after {corrections} correction"
                f"{'s' if corrections != 1 else ''}")
        elif unverified:
            status, headline = TaskStatus.BLOCKED, (
                f"⚠ Task #{task.id} not done: {len(unverified)} of {len(criteria)} acceptance criteria unverified")
        else:
            status, headline = TaskStatus.COMPLETED, f"✔ Task #{task.id} done"
        lines = [f"**{headline}** · `{task.workspace}`", ""]
        if result.report:
            lines += ["**Worker's report:**", trim(result.report, REPORT_LIMIT), ""]
        if criteria:
            lines.append(f"**Criteria:** {len(criteria) - len(unverified)}/{len(criteria)} verified")
            lines += [f"{'✔' if c.verified else '✖'} {c.idx}. {trim(c.text, 150)}" for c in criteria]
        if outcome is None:
            lines.append("**Tests:** not run (the worker did not finish)")
        elif outcome.status is TestStatus.no_tests:
            lines.append("**Tests:** no tests found in this workspace (nothing was verified)")
        else:
            lines.append(f"**Tests:** {outcome.status.value}: {outcome.summary} (`{outcome.command}`)")
            if outcome.status in (TestStatus.failed, TestStatus.error):
                lines += ["Last output:", f"```\n{tail(outcome.output, 1200)}\n```"]
        if last:
            stat = (last.diffstat.splitlines() or [""])[-1].strip()
            files = ", ".join(f"`{f}`" for f in last.files[:12]) + (" …" if len(last.files) > 12 else "")
            lines += [f"**Files:** {files}" + (f" ({stat})" if stat else ""),
                      f"**Commit:** `{last.short_sha}` on branch `{tree.branch}` (base `{tree.base_branch}`)"]
        else:
            lines.append("**Files:** nothing changed, no commit")
        summary = "\n".join(lines)
        error = None if status is TaskStatus.COMPLETED else headline
        await self.set_status(task, status, result=trim(result.report, 4000) or None, error=error,
                              commit_sha=last.sha if last else None)
        await git_repo.remove_worktree_keep_branch(tree)
        await progress.close(headline)
        await self.notifier.send(task.chat_id, summary, buttons=branch_buttons(task.id) if last else None,
                                 reply_to=task.reply_to_message_id)
