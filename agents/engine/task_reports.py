"""A runner's report applied on the bot's side (TASK_ENGINE=temporal), as the local engine ends a task.

The task branch is fetched from the shared remote into the owner's checkout (only the task's: a report naming any
other branch is not fetched); the row, events, criteria, usage and tool calls are stored; a research proposal is
stored under the bot's own number; the summary is delivered through the outbox and kept in the chat history; GitHub's
part (Open PR, a follow-up's push) is done here, where the bot's token is.

What the bot can check it does not take on the runner's word: the status must be an end (anything else leaves the
task interrupted, to resume or discard), the usage and audit rows are stored as the task's own (its chat, its
starter, never negative, dated when the bot got them: a runner cannot lower today's spending; usage rows come as the
task records them too, `store_usage`, and the report then carries only those not stored yet), the branch's head and
base come from the fetched branch in the owner's checkout (a base that is not an ancestor of both the branch and
its base branch would make Diff hide what Merge brings in), a research task gets no branch, the bot's own run
markers (`workflow` events) are never taken from a report, a malformed row is skipped rather than losing the report,
the runner's words in the bot's own notices (an error, a status, a push error) are literal text, and a summary's
buttons act on this task alone (a Mini App button, which Telegram hands signed launch data, is the bot's own only).
"""

from __future__ import annotations

import dataclasses
import json
import logging

from agents.core.actions import Action, Buttons, button, parse_action, with_review
from agents.core.branch_names import is_task_branch
from agents.core.ids import parse_id
from agents.core.models import (
    Proposal,
    Task,
    TaskEvent,
    TaskStatus,
    ToolCallRecord,
    Usage,
    UsageRecord,
    WorkerKind,
    utcnow,
)
from agents.core.protocols import Outbox
from agents.core.settings import Settings
from agents.core.text import outside_text
from agents.engine.payloads import TaskReport, decode_buttons
from agents.git.command import GitError, GitIdentity, git_succeeds, git_text
from agents.git.remote import fetch_branch
from agents.git.repository import branch_exists, current_branch, rev_parse
from agents.store.database import Store
from agents.store.shown import TASK, remember_shown
from agents.work.pull_requests import PullRequests, proposal_number
from agents.work.task_proposals import show_proposal, store_proposal
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

# a task event: "started <workflow id>" before its start is sent, "recorded <id>" once its report is stored, "ended
# <id>" once it was told too
RUN_EVENT = "workflow"
SHOWN_MAX = 4  # messages of a report shown (a summary, its notes): a runner's flood of them is cut here


class TaskReports:
    """Applies the report of a task's workflow run: stored, its branch fetched, its summary shown."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        deliveries: Outbox,
        workspaces: Workspaces,
        pull_requests: PullRequests | None = None,
    ) -> None:
        self.settings, self.store, self.deliveries, self.workspaces = settings, store, deliveries, workspaces
        self.pull_requests = pull_requests  # GitHub: the bot's token stays in the bot, so the bot does GitHub's part
        self.identity = GitIdentity(settings.commits.git_author_name, settings.commits.git_author_email)

    async def tell_interrupted(self, task: Task, text: str) -> None:
        """A notice that the task stopped, with Resume and Discard."""
        buttons = [
            [button("▶ Resume", Action.RESUME, task.stored_id), button("✖ Discard", Action.DISCARD, task.stored_id)]
        ]
        await self.deliveries.deliver(task.chat_id, text, buttons=buttons, kind="notice", task_id=task.id)

    async def apply(self, task: Task, run: str, report: TaskReport) -> None:
        """Store what the runner reports, fetch its branch, show its summary (through the outbox).

        In two steps, each written down when done: the report recorded (`recorded <run>`: the row, its events,
        usage and audit rows, its proposal), then told (`ended <run>`: the summaries queued in the outbox, GitHub's
        part). A bot stopped between the two applies the report again at its next start (`TemporalEngine.reattach`
        follows every run not ended), telling what it had not, without recording anything twice."""
        if task.worker is WorkerKind.RESEARCH and report.branch:  # read-only: nothing for Merge or Discard to act on
            report = dataclasses.replace(report, branch=None, pushed=False)
        foreign = self._foreign_branch(task, report)
        if foreign is not None:  # never fetched over a branch of the owner's, never the task's
            report = dataclasses.replace(report, branch=None, pushed=False)
        missing = foreign or await self._fetch(task, report)
        if await self._recorded(task, run):
            stored = await self.store.get_task(task.stored_id) or task
            number = proposal_number(stored.result) if report.proposal else None
            proposal = await self.store.get_proposal(number) if number is not None else None
            status, error = stored.status, stored.error
        else:
            status, error, proposal = await self._record(task, run, report, missing)
        await self._tell(task, report, status, error, proposal, missing)
        await self.store.add_event(TaskEvent(task_id=task.id, kind=RUN_EVENT, detail=f"ended {run}"))

    async def _recorded(self, task: Task, run: str) -> bool:
        return any(
            e.kind == RUN_EVENT and e.detail == f"recorded {run}" for e in await self.store.task_events(task.stored_id)
        )

    async def _record(
        self, task: Task, run: str, report: TaskReport, missing: str | None
    ) -> tuple[TaskStatus, str | None, Proposal | None]:
        """The report stored: events, criteria, usage and audit rows (as the task's own), the proposal, the row."""
        for kind, detail in report.events:
            if kind != RUN_EVENT:  # the bot's own markers of which run a task follows: never the runner's
                await self.store.add_event(TaskEvent(task_id=task.id, kind=str(kind), detail=str(detail)))
        for idx, evidence in report.verified:
            if (number := parse_id(str(idx))) is not None:
                await self.store.verify_criterion(task.stored_id, number, str(evidence))
        await self._rows(task, report)
        status, error = _ending(task, report)
        fields: dict[str, object] = {"status": status, "result": report.result, "error": error}
        proposal = await store_proposal(self.store, task, report.proposal) if report.proposal else None
        if proposal is not None:
            fields["result"] = f"proposal #{proposal.id}"  # the bot's number, not the runner's
        if report.branch:
            known = await self._commits(task, report) if missing is None else {}
            # no worktree on this machine: Diff, Merge and Discard use the fetched branch in the owner's checkout
            fields.update(branch=report.branch, worktree=None, **{k: v for k, v in known.items() if v})
        if status.is_final:
            fields["finished_at"] = utcnow()
        await self.store.update_task(task.stored_id, **fields)
        if report.review:  # what the review page shows besides the diff
            await self.store.reviews.save(task.stored_id, json.loads(report.review))
        await self.store.add_event(TaskEvent(task_id=task.id, kind=RUN_EVENT, detail=f"recorded {run}"))
        return status, error, proposal

    async def _rows(self, task: Task, report: TaskReport) -> None:
        """The run's usage and audit rows, stored as the task's own (its chat, its user), whatever the runner says."""
        own = {"id": None, "task_id": task.stored_id, "chat_id": task.chat_id}
        await store_usage(self.store, task, report.usage)
        for row in report.tool_calls:
            try:
                await self.store.record_tool_call(ToolCallRecord.model_validate_json(row).model_copy(update=own))
            except ValueError:
                log.warning("task %s: its runner reported an audit row the bot cannot read: skipped", task.id)

    async def record_late(self, task: Task, run: str, report: TaskReport) -> None:
        """The report of a cancelled task's run that came after the bot stopped waiting for it: only its usage and
        audit rows are stored (the day's budget counts what the run cost), then the run is counted ended. The task is
        cancelled and the chat told so already: its status, branch and summary are left as they are (the user may
        have discarded it meanwhile)."""
        if not await self._recorded(task, run):  # never `recorded`: a restart must not apply (and show) it again
            await self._rows(task, report)
        await self.store.add_event(TaskEvent(task_id=task.id, kind=RUN_EVENT, detail=f"ended {run}"))

    async def _tell(
        self,
        task: Task,
        report: TaskReport,
        status: TaskStatus,
        error: str | None,
        proposal: Proposal | None,
        missing: str | None,
    ) -> None:
        """The proposal and the summaries queued in the outbox and kept in the chat's history; an interrupted task's
        notice (unless the runner's own summary told it, with Resume: an API outage); GitHub's part of an ended
        one."""
        if proposal is not None:
            await show_proposal(
                self.store, self.deliveries, self.settings.orchestrator.shown_turn_chars, task, proposal
            )
        for shown in report.shown[:SHOWN_MAX]:
            text = shown.text + (f"\n\n⚠ {missing}" if missing else "")
            record = await remember_shown(
                self.store, task.chat_id, TASK, task.stored_id, text, self.settings.orchestrator.shown_turn_chars
            )
            buttons = own_buttons(decode_buttons(shown.buttons), task)
            if self.pull_requests is not None and shown.kind == "summary":  # the runner has no token: Open PR is ours
                buttons = await self.pull_requests.with_open_pr(task, buttons)
            if shown.kind == "summary":  # the review page is the bot's: its Review button too
                buttons = with_review(buttons, task.stored_id, self.settings.review.review_url)
            await self.deliveries.deliver(  # the record gets the chat message's id once it is sent
                task.chat_id,
                text,
                buttons=buttons,
                reply_to=shown.reply_to,
                kind=shown.kind,
                task_id=task.id,
                shown_record=record.id,
            )
        summarised = any(s.kind == "summary" for s in report.shown[:SHOWN_MAX])
        told = summarised and report.status == TaskStatus.INTERRUPTED.value
        if status is TaskStatus.INTERRUPTED and not told:  # told: the runner's summary has Resume (an API outage)
            why = outside_text(str(error or "no reason given"))  # the runner's words, never formatting or a link
            await self.tell_interrupted(task, f"⚠️ **Task #{task.id}** stopped: {why}. Resume it, or discard it?")
        elif status.is_final and status is not TaskStatus.CANCELLED:  # GitHub (the bot's token stays here): a
            # follow-up's push, the thread's answer; a cancelled task has none, as on the local engine
            if self.pull_requests is not None:
                await self.pull_requests.after_task(task)

    async def _commits(self, task: Task, report: TaskReport) -> dict[str, str | None]:
        """The fetched branch's head, its base branch and base commit, as the owner's checkout shows them: the
        runner's base branch when the checkout has it (else its current branch), the runner's base commit when it
        is an ancestor of both the branch and that base branch, else where the two meet (never the runner's word
        alone: a base at the branch's head would make Diff show nothing while Merge brings the whole branch)."""
        repo, branch = self.workspaces.resolve(task.workspace).path, str(report.branch)
        try:
            head = await rev_parse(repo, f"refs/heads/{branch}")
            base_branch = report.base_branch
            if not base_branch or base_branch == branch or not await branch_exists(repo, base_branch):
                base_branch = await current_branch(repo)
            base = report.base_commit
            if not base or not all(
                [
                    await git_succeeds("merge-base", "--is-ancestor", base, head, cwd=repo),
                    await git_succeeds("merge-base", "--is-ancestor", base, f"refs/heads/{base_branch}", cwd=repo),
                ]
            ):
                base = (await git_text("merge-base", head, f"refs/heads/{base_branch}", cwd=repo)).strip() or None
        except GitError as err:
            log.warning("task %s: the fetched branch %s could not be read: %s", task.id, branch, err)
            return {}
        return {"base_branch": base_branch, "base_commit": base, "commit_sha": head}

    @staticmethod
    def _foreign_branch(task: Task, report: TaskReport) -> str | None:
        """What is wrong when the report names a branch that is not the task's (its own, or one the bot names for
        it): the bot would force-fetch it into the owner's checkout, and Merge and Discard would act on it."""
        branch = report.branch
        if not branch or is_task_branch(branch, task.stored_id, task.branch):
            return None
        log.warning("task %s: its runner reported the branch %r, not the task's: ignored", task.id, branch)
        return f"its runner named the branch `{branch[:100]}`, which is not this task's: nothing was fetched"

    async def _fetch(self, task: Task, report: TaskReport) -> str | None:
        """The task branch from the shared remote into the owner's checkout; what went wrong, if anything."""
        if not report.branch:
            return None
        if not report.pushed:
            remote = self.settings.engine.runner_remote
            return (
                f"its branch `{report.branch}` did not reach `{remote}`: {outside_text(str(report.push_error))[:300]}"
            )
        repo = self.workspaces.resolve(task.workspace).path
        try:
            if await fetch_branch(repo, report.branch, self.settings.engine.runner_remote, self.identity):
                return None
            return f"its branch `{report.branch}` is not on `{self.settings.engine.runner_remote}`"
        except GitError as err:
            return f"its branch `{report.branch}` could not be fetched: {str(err)[:300]}"


async def store_usage(store: Store, task: Task, rows: list[str]) -> None:
    """A runner's usage rows (UsageRecord JSON), stored as the task's own: its chat, its starter, never below zero,
    dated now (a runner cannot lower today's spending); a row the bot cannot read is skipped. From the report, and
    (agents/engine/front.py, `ChatDesk.usage`) as the task records them while it runs."""
    own = {"id": None, "task_id": task.stored_id, "chat_id": task.chat_id, "user_id": task.user_id}
    for row in rows:
        try:
            usage = UsageRecord.model_validate_json(row)
        except ValueError:
            log.warning("task %s: its runner reported a usage row the bot cannot read: skipped", task.id)
            continue
        counted = {name: max(0, getattr(usage, name)) for name in Usage.model_fields}  # never below zero
        await store.record_usage(usage.model_copy(update={**own, **counted, "created_at": utcnow()}))


def _ending(task: Task, report: TaskReport) -> tuple[TaskStatus, str | None]:
    """The task's status and error from its report: an end (completed, failed, blocked, …) or interrupted (the runner
    stopped) as reported; anything else
    (a status that is not an end, or none the bot knows) leaves the task interrupted, for the owner to resume or
    discard: a run that has ended cannot leave its task running, nor put it back in the queue."""
    try:
        status = TaskStatus(report.status)
    except ValueError:
        status = None
    if status is not None and (status.is_final or status is TaskStatus.INTERRUPTED):  # a runner that stopped
        return status, report.error
    shown = str(report.status)[:40]
    log.warning("task %s: its runner reported the status %r, not an end: interrupted", task.id, shown)
    return TaskStatus.INTERRUPTED, f"its runner reported {shown!r}, which is not how a task ends"


def own_buttons(buttons: Buttons | None, task: Task) -> Buttons | None:
    """A runner's summary buttons that act on this task: a callback naming another task (Merge of #999 labelled
    Diff) and a Mini App button (Telegram hands it signed launch data; the bot adds its own Review) are dropped."""
    kept = [
        [b for b in row if not b.web_app and (found := parse_action(b.data)) is not None and found[1] == task.stored_id]
        for row in buttons or []
    ]
    return [row for row in kept if row] or None
