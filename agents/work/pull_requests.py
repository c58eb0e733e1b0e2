"""A task's pull request on GitHub: push its branch with the bot's token, open (or update) the pull request, report.

`open_for` pushes the task's branch to the workspace's GitHub repository (agents/github/repository.py) with the
bot's own token in the git call's environment only (agents/git/remote.push_with_token), and opens a pull request
against the default branch: the task's title; a body with the verdict line, the worker's report, the bot's test
verdict and the whole branch's files (a follow-up rebuilds it from the whole branch, not from its own part); ✔ is
ready for review, ✗ and ⚠ are drafts. A second call, or a later task on the same branch, pushes to the same pull
request and rewrites its title and body. `task_ended` runs after every code task: it pushes follow-ups to their
pull request and answers the GitHub thread that started a task. Checks: `report_checks` (a webhook's check event, or
the poller started with each push when there is no webhook) tells the chat in one line when a head's checks finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from pathlib import Path

from agents.core.actions import Action, Buttons, button
from agents.core.errors import ToolError
from agents.core.models import Caller, Task, TaskEvent, TaskStatus, WorkerKind
from agents.core.protocols import Notifier
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.core.text import outside_text
from agents.git.command import GitError, git_text, run_git
from agents.git.remote import push_with_token
from agents.github.api import CheckRun, GitHubClient, GitHubUnavailable, PullRequest
from agents.github.repository import GitHubRepository, github_repository
from agents.store.database import Store
from agents.store.github import PullRequestRecord, ThreadRecord
from agents.work.access import Access
from agents.work.task_outcome import pull_request_buttons
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

BODY_REPORT_CHARS = 6000
GIST_CHARS = 1500
FAILED = {"failure", "timed_out", "cancelled", "action_required", "startup_failure", "stale"}


def stored_id(task: Task) -> int:
    """The id of a task read from the store (every task this module sees was)."""
    if task.id is None:
        raise ValueError("a task that was never stored has no pull request")
    return task.id


def verdict_line(task: Task, shown: str | None) -> str:
    """The summary's first line (it starts with the verdict's mark), without its Markdown emphasis."""
    first = (shown or "").strip().splitlines()[0] if (shown or "").strip() else ""
    first = first.replace("**", "").strip()
    if first:
        return first
    mark = {TaskStatus.COMPLETED: "✔"}.get(task.status, "⚠" if task.status is TaskStatus.UNVERIFIED else "✗")
    return f"{mark} Task #{task.id} {task.status.value}"


def pull_request_body(
    task: Task, verdict: str, tests: str | None, files: str, reports: list[tuple[int, str]], starter: str | None
) -> str:
    """The pull request's body, from the whole branch: verdict, each task's report, the last test verdict, files."""
    lines = [f"**{verdict}**", ""]
    for task_id, report in reports:
        head = "Worker's report" if len(reports) == 1 else f"Worker's report (task #{task_id})"
        text = report.strip() or "(none)"
        lines += [f"### {head}", text[:BODY_REPORT_CHARS] + ("…" if len(text) > BODY_REPORT_CHARS else ""), ""]
    lines += [
        "### Tests",
        tests or "not run by the bot",
        "",
        "### Files",
        "```",
        files.strip("\n") or "(no change)",
        "```",
    ]
    by = f", asked by {starter}" if starter else ""
    first, *later = [task_id for task_id, _ in reports] or [stored_id(task)]
    more = f" (follow-ups: {', '.join(f'#{n}' for n in later)})" if later else ""
    lines += ["", f"---\nOpened by agentlab from task #{first}{more}{by} · branch `{task.branch}`."]
    return "\n".join(lines)


def proposal_number(result: str | None) -> int | None:
    """The proposal a research task wrote: its result is `proposal #N` (set where the research ran)."""
    match = re.fullmatch(r"proposal #(\d+)", (result or "").strip())
    return int(match.group(1)) if match else None


def gist(body: str, limit: int = GIST_CHARS) -> str:
    """A proposal's opening: whole paragraphs up to `limit` characters (the first one cut when it alone is longer)."""
    kept: list[str] = []
    for paragraph in (p.strip() for p in body.strip().split("\n\n")):
        if not paragraph:
            continue
        if kept and sum(len(k) + 2 for k in kept) + len(paragraph) > limit:
            break
        kept.append(paragraph)
    text = "\n\n".join(kept)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def checks_line(number: int, url: str, runs: list[CheckRun]) -> str | None:
    """'CI on PR #12: ✗ lint failed' once every check run has finished; None while some still run (or none exist)."""
    if not runs or any(r.status != "completed" for r in runs):
        return None
    failed = [r for r in runs if (r.conclusion or "") in FAILED]
    if failed:
        names = ", ".join(outside_text(r.name, one_line=True) for r in failed[:5]) + (" …" if len(failed) > 5 else "")
        return f"CI on [PR #{number}]({url}): ✗ {names} failed"
    return f"CI on [PR #{number}]({url}): ✔ {len(runs)} check{'s' if len(runs) != 1 else ''} passed"


class PushFailed(ToolError):
    """A task branch's push to GitHub failed; the message quotes git (its command line, the push URL, the bot's
    paths): for the chat, never for a public GitHub comment."""


class PullRequests:
    """Pull requests of tasks (see the module's docstring); `client` is None when GITHUB_TOKEN is not set."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        workspaces: Workspaces,
        notifier: Notifier,
        secrets: SecretsFilter,
        client: GitHubClient | None,
    ) -> None:
        self.settings, self.store, self.workspaces, self.notifier = settings, store, workspaces, notifier
        self.client = client
        # what the bot writes on GitHub (a pull request's title and body, a comment) is masked as the chat's copy is:
        # a worker's report may quote a token it read, and a public repository shows it to the world
        self.secrets = secrets
        self.access = Access(
            settings, store, workspaces, notifier, secrets
        )  # the chat's roles, for what GitHub reaches
        self.poll_checks = not settings.github.github_webhook_listen  # no webhook: the checks are polled
        self._pollers: dict[tuple[str, int], asyncio.Task[None]] = {}

    @property
    def enabled(self) -> bool:
        return self.client is not None

    async def repository_of(self, workspace: str) -> GitHubRepository | None:
        if self.client is None:
            return None
        try:
            path = self.workspaces.resolve(workspace).path
        except ToolError:
            return None
        return await github_repository(path, self.settings.github.github_web_url)

    async def offered_for(self, task: Task) -> bool:
        """Whether the task's summary offers Open PR: GitHub is set up and the workspace is on it."""
        return task.worker is not WorkerKind.RESEARCH and await self.repository_of(task.workspace) is not None

    async def with_open_pr(self, task: Task, buttons: Buttons | None) -> Buttons | None:
        """A summary made where the bot's token is not (a task on a Temporal runner) gets the Open PR row a local
        summary has, under the same conditions: the summary has its branch buttons (the task committed) and
        `offered_for` says yes."""
        merge = f"{Action.MERGE.value}:{task.id}"
        if not buttons or not any(b.data == merge for row in buttons for b in row):
            return buttons
        opening = pull_request_buttons(stored_id(task))
        if any(b.data == opening[0][0].data for row in buttons for b in row) or not await self.offered_for(task):
            return buttons
        return [*buttons, *opening]

    async def existing(self, task: Task, repo: GitHubRepository) -> PullRequestRecord | None:
        """The pull request of this task, or of an earlier task on the same branch (a follow-up)."""
        own = await self.store.github.pull_request(stored_id(task))
        if own is not None or not task.branch:
            return own
        earlier = await self.store.github.pull_requests_on(repo.full_name, task.branch)
        return earlier[-1] if earlier else None

    async def open_for(self, task: Task) -> str:
        """Push the task's branch and open its pull request (or update the one it has); the chat's sentence."""
        if self.client is None:
            raise ToolError("GitHub is not set up (GITHUB_TOKEN is empty)")
        repo = await self.repository_of(task.workspace)
        if repo is None:
            raise ToolError(
                f"workspace {task.workspace} is not on GitHub (no GitHub `origin`, no [github] repository in its "
                ".agentlab.toml)"
            )
        if task.status.is_active:
            raise ToolError(f"task #{task.id} is still {task.status.value}; open its pull request when it has ended")
        if not task.branch or not task.commit_sha:
            raise ToolError(f"task #{task.id} made no commit, so there is nothing to open a pull request for")
        path = self.workspaces.resolve(task.workspace).path
        token = self.settings.github.github_token.get_secret_value()  # type: ignore[union-attr]  # set: checked at start
        try:
            await push_with_token(path, task.branch, repo.push_url, token if repo.on_github else None)
        except GitError as err:
            raise PushFailed(f"could not push `{task.branch}` to GitHub: {err}") from None
        sha = await _head(path, task.branch)
        title, body, draft = await self._texts(task, repo, path)
        previous = await self.existing(task, repo)
        readied = ""
        try:
            if previous is not None:
                pr = await self.client.update_pull_request(repo.full_name, previous.number, title, body)
                draft, readied = await self._ready_if_verified(pr, previous.draft, draft)
            else:
                base = await self.client.default_branch(repo.full_name)
                pr = await self.client.open_pull_request(repo.full_name, task.branch, base, title, body, draft)
                draft = pr.draft
        except GitHubUnavailable as err:
            raise ToolError(f"the branch is pushed, but {err}; try Open PR again later") from None
        record = PullRequestRecord(
            task_id=task.id,
            repository=repo.full_name,
            number=pr.number,
            url=pr.url,
            branch=task.branch,
            draft=draft,
            pushed_sha=sha,
        )
        await self.store.github.save_pull_request(record)
        await self.store.add_event(TaskEvent(task_id=task.id, kind="pull_request", detail=f"#{pr.number} {pr.url}"))
        self.watch_checks(record)
        if previous is not None:
            return (
                f"🔀 Task #{task.id}'s commits are pushed to [PR #{pr.number}]({pr.url}) (title and text updated)."
                + readied
            )
        state = "a draft (the bot's verdict is not ✔)" if draft else "ready for review"
        return f"🔀 Opened [PR #{pr.number}]({pr.url}) for task #{task.id}, {state}: {pr.url}"

    async def _ready_if_verified(self, pr: PullRequest, was_draft: bool, draft_now: bool) -> tuple[bool, str]:
        """A draft (opened for a ✗ or ⚠ verdict) whose later run ends ✔ is turned ready for review; a ready one
        stays ready whatever a later run says (people decide that). Whether it is a draft now, and the chat's extra
        sentence ('' when nothing changed)."""
        if not was_draft or draft_now or self.client is None:
            return was_draft, ""
        try:
            still_draft = await self.client.mark_ready_for_review(pr.node_id)
        except GitHubUnavailable as err:
            return True, f" It stays a draft: {err} (Open PR tries again)."
        return still_draft, " It stays a draft." if still_draft else " It is now ready for review (the verdict is ✔)."

    async def _texts(self, task: Task, repo: GitHubRepository, path: Path) -> tuple[str, str, bool]:
        """Title, body and draft flag, from the whole branch: every task on it (oldest first) and its diff."""
        records = await self.store.github.pull_requests_on(repo.full_name, task.branch or "")
        tasks = []
        for task_id in sorted({r.task_id for r in records} | {stored_id(task)}):  # oldest first: the first names the PR
            found = task if task_id == task.id else await self.store.get_task(task_id)
            if found is not None:
                tasks.append(found)
        first = tasks[0]
        shown = await self.store.bot_message_about(task.chat_id, "task", stored_id(task))
        verdict = verdict_line(task, shown.content if shown else None)
        tests = [e.detail for e in await self.store.task_events(stored_id(task)) if e.kind == "tests"]
        files = await _diffstat(path, task.base_commit or "", task.branch or "")
        reports = [(stored_id(t), t.result or "") for t in tasks]
        body = pull_request_body(task, verdict, tests[-1] if tests else None, files, reports, first.user_name)
        return self.secrets.mask(first.title), self.secrets.mask(body), task.status is not TaskStatus.COMPLETED

    # ---- after a task ends ---------------------------------------------------------------
    async def after_task(self, task: Task) -> None:
        """`task_ended`, for the code that just showed a task's end (the executor, the Temporal engine): the task is
        done and shown, so GitHub's part failing is logged and must not turn it into a failure."""
        try:
            await self.task_ended(stored_id(task))
        except Exception:
            log.exception("task %s: GitHub after the task", task.id)

    async def task_ended(self, task_id: int) -> None:
        """A follow-up's commits go to its branch's pull request; a task started from GitHub opens its pull
        request and answers its thread with the verdict and the link."""
        if self.client is None or (task := await self.store.get_task(task_id)) is None:
            return
        thread = await self.thread_of(task)
        if task.worker is WorkerKind.RESEARCH:
            if thread is not None:
                await self.comment(thread.repository, thread.number, await self._research_answer(task), task.chat_id)
            return
        repo = await self.repository_of(task.workspace)
        pr_text = public_pr_text = None
        if repo is not None and task.commit_sha and (thread is not None or await self.existing(task, repo)):
            try:
                await self._owners_push(task)
                pr_text = public_pr_text = await self.open_for(task)
            except PushFailed as err:
                pr_text = f"⚠ Task #{task.id}: {err}"
                # the why (git's command line, the push URL, the bot's paths) is for the chat alone: GitHub is public
                public_pr_text = f"⚠ Task #{task.id}: its branch was not pushed to GitHub; the owner was told why."
            except ToolError as err:  # the bot's own sentences (a member's task waits for an owner, …)
                pr_text = public_pr_text = f"⚠ Task #{task.id}: {err}"
            with contextlib.suppress(Exception):
                await self.notifier.send(task.chat_id, pr_text)
        if thread is not None:
            shown = await self.store.bot_message_about(task.chat_id, "task", stored_id(task))
            pr = await self.store.github.pull_request(stored_id(task))
            lines = [f"**{verdict_line(task, shown.content if shown else None)}**"]
            if task.result:
                lines += ["", task.result[:BODY_REPORT_CHARS]]
            if pr is not None:
                lines += ["", f"Pull request: {pr.url}"]
            elif public_pr_text:
                lines += ["", public_pr_text]
            await self.comment(thread.repository, thread.number, "\n".join(lines), task.chat_id)

    async def _owners_push(self, task: Task) -> None:
        """Pushing a branch and opening or updating its pull request is an owner's decision, as the chat's Open PR
        is: a task a member started (from a GitHub mention, or continuing a pull request) pushes nothing by itself;
        the owners get the request with its Open PR button (a ToolError says so). Roles as configured now."""
        starter = Caller(chat_id=task.chat_id, user_id=task.user_id, user_name=task.user_name)
        if task.user_id is not None and task.user_id not in self.settings.users.allowed_user_ids:
            raise ToolError("its starter is no longer allowed here, so nothing was pushed to GitHub")
        await self.access.owners_only(
            starter,
            "open a pull request",
            f"to open a pull request for **task #{task.id}**:",
            task.title,
            pull_request_buttons(stored_id(task)),
        )

    async def thread_of(self, task: Task) -> ThreadRecord | None:
        """The GitHub thread a task answers: the one whose mention started it, or, for the code task an approval
        started, the thread of the research that wrote the proposal (remembered for the task from then on)."""
        thread = await self.store.github.thread(task.id or 0)
        if thread is None and task.proposal_id is not None and task.id is not None:
            found = await self.store.github.thread_of_proposal(task.proposal_id)
            if found is not None:
                thread = found.model_copy(update={"task_id": task.id})
                await self.store.github.add_thread(thread)
        return thread

    async def _research_answer(self, task: Task) -> str:
        """What a research task started from GitHub answers there: its proposal's gist and that the owner decides in
        the chat, or why it wrote none."""
        proposal_id = proposal_number(task.result)
        proposal = await self.store.get_proposal(proposal_id) if proposal_id is not None else None
        if proposal is None:
            why = task.error or "it wrote no proposal"
            return f"**✖ Research #{task.id} ended without a proposal**: {why}."
        return "\n".join(
            [
                f"**📋 Proposal #{proposal.id} for `{proposal.workspace}`** (research #{task.id})",
                "",
                gist(proposal.body),
                "",
                "It waits for the owner's go-ahead in the chat (Approve or Reject there); once approved, the task "
                "that implements it answers here with its verdict and pull request.",
            ]
        )

    async def comment(self, repository: str, number: int, body: str, chat_id: int | None = None) -> None:
        """A comment on GitHub; an outage is one sentence in the chat (the work itself is kept)."""
        if self.client is None:
            return
        try:
            await self.client.comment(repository, number, self.secrets.mask(body))
        except GitHubUnavailable as err:
            if chat_id is not None:
                with contextlib.suppress(Exception):
                    await self.notifier.send(chat_id, f"⚠ Could not comment on {repository}#{number}: {err}.")

    # ---- checks ---------------------------------------------------------------------------
    async def report_checks(self, repository: str, sha: str) -> None:
        """A head's checks changed (a webhook's check_suite/check_run event, or the poller): when all have finished,
        one line in the chat of each task whose pull request has that head, once per head."""
        if self.client is None:
            return
        for record in await self.store.github.pull_requests_with_head(repository, sha):
            try:
                runs = await self.client.check_runs(repository, sha)
            except GitHubUnavailable as err:
                log.warning("checks of %s@%s: %s", repository, sha[:10], err)
                return
            line = checks_line(record.number, record.url, runs)
            if line is None:
                continue
            task = await self.store.get_task(record.task_id)
            # claimed in one statement: the events of one head's checks are handled side by side, and each must not
            # find the head unreported before another marks it
            if task is None or not await self.store.github.claim_checks_report(record.task_id, sha):
                continue
            failed = "✗" in line
            fix = [[button("🛠 Fix CI", Action.FIX_CI, stored_id(task))]] if failed else None
            await self.notifier.send(task.chat_id, line, buttons=fix)

    async def failed_checks(self, task_id: int) -> str:
        """What a worker fixing CI is told: the pull request's failed check runs with their summaries."""
        record = await self.store.github.pull_request(task_id)
        if self.client is None or record is None:
            raise ToolError(f"task #{task_id} has no pull request")
        try:
            runs = await self.client.check_runs(record.repository, record.pushed_sha)
        except GitHubUnavailable as err:
            raise ToolError(f"could not read the checks: {err}") from None
        failed = [r for r in runs if (r.conclusion or "") in FAILED]
        if not failed:
            raise ToolError(f"no check of PR #{record.number} has failed on its latest commit")
        parts = [f"CI failed on PR #{record.number} ({record.url}). Make these checks pass:"]
        for run in failed:
            summary = outside_text(run.summary.strip()[:3000], markdown=False) or "(no summary)"
            name = outside_text(run.name, markdown=False, one_line=True)
            parts.append(
                f"\n## {name}: {run.conclusion} ({run.url})\nIts summary, as GitHub shows it (quoted):\n{summary}"
            )
        return "\n".join(parts)

    def watch_checks(self, record: PullRequestRecord) -> None:
        """Without a webhook: poll the head's checks with back-off until they finish (or GITHUB_CHECKS_GIVE_UP)."""
        if not self.poll_checks or not record.pushed_sha:
            return
        key = (record.repository, record.number)
        if (old := self._pollers.pop(key, None)) is not None:
            old.cancel()
        self._pollers[key] = asyncio.ensure_future(self._poll(record))

    async def _poll(self, record: PullRequestRecord) -> None:
        s = self.settings
        wait, waited = s.github.github_checks_poll_seconds, 0.0
        while waited < s.github.github_checks_give_up_seconds:
            await asyncio.sleep(wait)
            waited += wait
            await self.report_checks(record.repository, record.pushed_sha)
            fresh = await self.store.github.pull_request(record.task_id)
            if fresh is None or fresh.checks_reported_sha == record.pushed_sha or fresh.pushed_sha != record.pushed_sha:
                return
            wait = min(wait * 2, s.github.github_checks_poll_max_seconds)

    async def close(self) -> None:
        for poller in self._pollers.values():
            poller.cancel()
        self._pollers.clear()
        if self.client is not None:
            await self.client.close()


async def _head(repo: Path, branch: str) -> str:
    return (await git_text("rev-parse", f"refs/heads/{branch}", cwd=repo)).strip()


async def _diffstat(repo: Path, base: str, branch: str) -> str:
    if not base or not branch:
        return ""
    result = await run_git("diff", "--stat=100", f"{base}..refs/heads/{branch}", cwd=repo)
    return result.stdout if result.exit_code == 0 else ""
