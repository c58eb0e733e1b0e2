"""How a task ends: its status stored, its checkout dropped, its progress message closed, its summary (or proposal,
or failure) shown in the chat through the outbox, and GitHub told.

The outcome itself is decided without I/O in task_outcome.py; this module gathers its facts and does the rest. A
model call that failed past the SDK's retries (`api_failed`): an outage interrupts the task, with Resume, as a
restart does; a request the API refuses fails it, with its branch's buttons when it has commits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import anthropic

from agents.core.actions import Buttons
from agents.core.errors import ToolError
from agents.core.models import ChatMessage, Delivery, Task, TaskEvent, TaskStatus, WorkerKind, utcnow
from agents.git.command import GitError, git_text
from agents.git.repository import rev_parse
from agents.git.worktrees import TaskWorktree
from agents.llm.client import explain_api_error, outage
from agents.store.delivery import owed
from agents.store.shown import TASK, remember_shown
from agents.work.attempt_summary import TESTS_EVENT, tests_event
from agents.work.progress import Progress
from agents.work.pull_requests import PullRequests
from agents.work.task_checkout import TaskCheckouts
from agents.work.task_collaborators import Collaborators
from agents.work.task_corrections import ChangeRun
from agents.work.task_outcome import RunFacts, branch_buttons, decide, render, resume_buttons, trim
from agents.work.task_proposals import proposal_shown, scheduled_note, store_proposal
from agents.work.task_review import review_record
from agents.work.task_workers import worker_limits
from agents.work.worker import WorkerResult

log = logging.getLogger(__name__)

ANNOUNCED_EVENT = "announced"  # a task event: its interruption was told to its chat (with Resume / Discard)


def announced(events: list[TaskEvent]) -> bool:
    """Whether the task's interruption was told already: an `announced` event with no status change after it (a
    resumed task that was interrupted again is told again)."""
    for event in reversed(events):
        if event.kind == ANNOUNCED_EVENT:
            return True
        if event.kind == "status":
            return False
    return False


@dataclass(frozen=True)
class Owed:
    """A task's outcome owed to its chat: its record in the chat's history, and its outbox entry."""

    record: ChatMessage
    entry: Delivery


class TaskEnding:
    """Stores, cleans up and shows the end of each task (one per executor)."""

    def __init__(self, base: Collaborators, checkouts: TaskCheckouts, pull_requests: PullRequests | None) -> None:
        self.base, self.checkouts, self.pull_requests = base, checkouts, pull_requests

    async def set_status(self, task: Task, status: TaskStatus, owing: Owed | None = None, /, **fields: object) -> None:
        """The task's status (a final one with its finish time), stored with a status event, and with the message it
        owes its chat (`owing`, from `owe`) as one step: no stop between them leaves an ended task whose summary was
        never queued (the outbox sends it at the next start)."""
        task.status = status
        if status.is_final:
            fields.setdefault("finished_at", utcnow())
        event = TaskEvent(task_id=task.stored_id, kind="status", detail=status.value)
        if owing is not None:
            await self.base.deliveries.end_owing(task.stored_id, {"status": status, **fields}, event, owing.entry)
            return
        await self.base.store.update_task(task.stored_id, status=status, **fields)
        await self.base.store.add_event(event)

    async def fail(
        self, task: Task, progress: Progress, reason: str, buttons: Buttons | None = None, **fields: object
    ) -> None:
        # its summary starts with a verdict's mark, as every task's does: ⚠, the bot cannot tell (nothing was judged)
        owing = await self.owe(task, f"⚠ **Task #{task.id} failed**: {reason}", buttons=buttons)
        await self.set_status(task, TaskStatus.FAILED, owing, error=reason, **fields)
        await progress.close(f"✖ failed: {trim(reason, 200)}")
        await self.pay(owing)
        await self.tell_github(task)

    async def api_failed(self, task: Task, progress: Progress, err: anthropic.APIError) -> None:
        """A model call of the task failed past the SDK's retries; what the task did so far is committed on its
        branch already (TaskCheckouts.drop_early). An outage (`outage`: overloaded, rate limited, a server error,
        the network) interrupts it as a restart does: Resume goes on from its branch. Any other failure (a request
        the API refuses, a key it refuses) fails it, its summary with the branch's buttons when the branch has
        commits beyond its base: the work done stays within reach. An attempt of a race fails either way (its race
        waits for every attempt to end, and the race's one summary offers each branch)."""
        head = await self.branch_head(task)
        cause = outage(err)
        if cause is not None and task.attempt_group is None:
            await self.interrupt(task, progress, f"Claude was unreachable ({cause})", head)
            return
        buttons, fields = None, {}
        if head is not None:
            buttons, fields = await self.branch_buttons(task, TaskStatus.FAILED), {"commit_sha": head}
        await self.fail(task, progress, explain_api_error(err), buttons, **fields)

    async def branch_buttons(self, task: Task, status: TaskStatus) -> Buttons:
        """The buttons of an ended task whose branch holds work: Merge / Diff / Discard, Open PR where GitHub would
        take it, Review where the page is served."""
        offer_pr = False
        try:
            offer_pr = self.pull_requests is not None and await self.pull_requests.offered_for(task)
        except Exception as problem:  # noqa: BLE001  (no Open PR is no reason to leave the task unended)
            log.warning("task %s: whether to offer Open PR is not known: %s", task.id, problem)
        return branch_buttons(task.stored_id, status, offer_pr, self.base.settings.review.review_url)

    async def interrupt(self, task: Task, progress: Progress, reason: str, head: str | None) -> None:
        """The task stops `interrupted`, as a restart leaves it: its summary says why (`reason`, one sentence) with
        Resume / Discard (and Diff when its branch has commits, `head`); it counts as the interruption's notice, so a
        restart does not announce it again. Its branch stays for the Resume, which makes its worktree again."""
        if head is not None:
            kept = "its work so far is kept on its branch; Resume goes on from there"
        elif task.worker is WorkerKind.RESEARCH:
            kept = "Resume starts it again"
        else:
            kept = "nothing was committed yet; Resume starts it again on its branch"
        text = f"⏸ **Task #{task.id} interrupted**: {reason} — {kept}."
        owing = await self.owe(task, text, resume_buttons(task.stored_id, head is not None))
        task.status = TaskStatus.INTERRUPTED
        stopped = TaskEvent(task_id=task.stored_id, kind="status", detail=f"interrupted: {reason}")
        await self.base.store.add_event(stopped)
        fields = {"status": TaskStatus.INTERRUPTED, "error": reason}
        if owing is None:
            await self.base.store.update_task(task.stored_id, **fields)
        else:  # the summary owed and the record that the interruption was told, in one transaction
            told = TaskEvent(task_id=task.stored_id, kind=ANNOUNCED_EVENT, detail="interruption told in its summary")
            await self.base.deliveries.end_owing(task.stored_id, fields, told, owing.entry)
        await progress.close(f"⏸ interrupted: {trim(reason, 200)}")
        await self.pay(owing)

    async def branch_head(self, task: Task) -> str | None:
        """The head of the task's branch when it has commits beyond its base; None when it has none, has no branch
        (a research task, a task stopped before its checkout), or git cannot tell."""
        stored = await self.base.store.get_task(task.stored_id)
        if stored is None or not stored.branch or not stored.base_commit:
            return None
        try:
            repo = self.base.workspaces.stored(task.workspace).path
            head = await rev_parse(repo, f"refs/heads/{stored.branch}")
            ahead = await git_text("rev-list", "--count", f"{stored.base_commit}..{head}", cwd=repo)
        except (GitError, ToolError, OSError) as err:
            log.warning("task %s: its branch's commits are not known: %s", task.id, err)
            return None
        return head if ahead.strip() not in ("", "0") else None

    async def research_done(self, task: Task, progress: Progress, result: WorkerResult) -> None:
        """A research task's end: its proposal stored and shown, or why there is none."""
        s = self.base.settings
        if not result.finished or not result.report:
            reason = result.reason(worker_limits(s)) if not result.finished else "the research worker wrote no proposal"
            status = TaskStatus.BLOCKED if result.blocked else TaskStatus.FAILED
            owing = await self.owe(
                task, f"✖ **Research #{task.id}** ended without a proposal: {reason}.{scheduled_note(task, ' ')}"
            )
            await self.set_status(task, status, owing, error=reason, result=result.report or None)
            await progress.close(f"✖ {reason}")
            await self.pay(owing)
            await self.tell_github(task)
            return
        proposal = await store_proposal(self.base.store, task, result.report)
        owing = Owed(*await proposal_shown(self.base.store, s.orchestrator.shown_turn_chars, task, proposal))
        await self.set_status(task, TaskStatus.COMPLETED, owing, result=f"proposal #{proposal.id}")
        await progress.close(f"✔ proposal #{proposal.id} ready")
        await self.pay(owing)
        await self.tell_github(task)  # a research started from GitHub answers there with its proposal's gist

    async def change_done(
        self,
        task: Task,
        progress: Progress,
        tree: TaskWorktree,
        run: ChangeRun,
        album: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        """Gather the run's facts, decide its outcome (task_outcome.py, no I/O), then store, clean up and show it;
        `album` (a frontend task's page before and after) follows the summary."""
        facts = RunFacts(
            task_id=task.stored_id,
            workspace=task.workspace,
            result=run.result,
            limits=worker_limits(self.base.settings),
            verdict=run.verdict,
            corrections=run.corrections,
            criteria=await self.base.store.criteria(task.stored_id),
            commits=run.commits,
            branch=tree.branch,
            base_branch=tree.base_branch,
            guard_warnings=await self.checkouts.check(task),  # the tests ran the worker's code too
        )
        outcome = decide(facts)
        last = outcome.last_commit
        if run.verdict is not None:  # the counts a group of attempts ranks by (agents/work/attempt_summary.py)
            counts = tests_event(len(run.verdict.fixed), len(run.verdict.broken), bool(run.verdict.warnings))
            await self.base.store.add_event(TaskEvent(task_id=task.stored_id, kind=TESTS_EVENT, detail=counts))
        buttons = await self.branch_buttons(task, outcome.status) if last else None
        summary = render(outcome)
        if task.schedule_id is not None:  # under the headline: the first line still starts with the verdict's mark
            headline, _, rest = summary.partition("\n")
            summary = f"{headline}\n{scheduled_note(task)}\n{rest}"
        owing = await self.owe(task, summary, buttons=buttons, reply_to=task.reply_to_message_id)
        await self.set_status(
            task,
            outcome.status,
            owing,
            result=trim(run.result.report, 4000) or None,
            error=outcome.error,
            commit_sha=last.sha if last else None,
        )
        await self.base.store.reviews.save(task.stored_id, review_record(outcome))  # the review page's verdict
        await self.checkouts.drop(task, tree)
        await progress.close(outcome.headline)
        await self.pay(owing)
        if len(album) >= 2:
            try:  # the pictures are kept for the review page; a failed album never fails the finished task
                await self.base.notifier.send_album(task.chat_id, list(album))
            except Exception as err:
                log.warning("task %s: the before/after album was not sent: %s", task.id, err)
        await self.tell_github(task)

    async def tell_github(self, task: Task) -> None:
        """A follow-up's commits go to its pull request; the GitHub thread that started the task gets its answer."""
        if self.pull_requests is not None:
            await self.pull_requests.after_task(task)

    async def owe(
        self, task: Task, markdown: str, buttons: Buttons | None = None, reply_to: int | None = None
    ) -> Owed | None:
        """A task's outcome for its chat, kept in the chat's history as the bot's turn, to be stored with the task's
        end (`set_status`) and sent by `pay`. An attempt's own outcome is not sent: its group's one summary lists it
        (agents/work/attempt_summary.py)."""
        if task.attempt_group is not None:
            return None
        s, store = self.base.settings, self.base.store
        record = await remember_shown(
            store, task.chat_id, TASK, task.stored_id, markdown, s.orchestrator.shown_turn_chars
        )
        return Owed(record, owed(task.chat_id, markdown, buttons, reply_to, "summary", task.id, record.id))

    async def pay(self, owing: Owed | None) -> None:
        """Send what `owe` made and `set_status` stored, through the outbox: a Telegram 5xx is retried and never turns
        the finished task into a failure; what is still not sent goes at the flusher's next pass."""
        if owing is not None:
            await self.base.deliveries.send_stored(owing.entry)  # its record gets the chat message's id once sent
