"""The store's GitHub tables: a task's pull request, webhook events (stored before acknowledged), the GitHub
threads (issue or pull request) whose mention started a task, and the account each GITHUB_USERS login was first
seen as."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agents.core.models import utcnow

if TYPE_CHECKING:
    import aiosqlite

    from agents.store.connection import Connection


class PullRequestRecord(BaseModel):
    """The pull request a task's branch was opened as (one per task; later commits are pushed to it)."""

    task_id: int
    repository: str  # OWNER/NAME
    number: int
    url: str
    branch: str
    draft: bool = False
    pushed_sha: str = ""
    checks_reported_sha: str = ""  # the head whose finished checks the chat was told about


class WebhookEvent(BaseModel):
    """One webhook event as GitHub sent it; `id` is what it is about (agents/github/webhook.event_key), the one
    key a repeat of it is known by, `delivery_id` GitHub's X-GitHub-Delivery header (unsigned: for logs only)."""

    id: str
    event: str
    payload: str
    delivery_id: str = ""


class ThreadRecord(BaseModel):
    """The GitHub issue or pull request whose mention started a task: the bot answers there when the task ends."""

    task_id: int
    repository: str
    number: int
    login: str


class GitHubRecords:
    """Reads and writes of the GitHub tables; `Store.github` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    # ---- pull requests -----------------------------------------------------------------------
    async def save_pull_request(self, pr: PullRequestRecord) -> None:
        now = utcnow().isoformat()
        await self._store.write(
            "INSERT INTO github_pull_requests (task_id, repository, number, url, branch, draft, pushed_sha, "
            "checks_reported_sha, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (task_id) DO UPDATE SET repository = excluded.repository, number = excluded.number, "
            "url = excluded.url, branch = excluded.branch, draft = excluded.draft, pushed_sha = excluded.pushed_sha, "
            "checks_reported_sha = excluded.checks_reported_sha, updated_at = excluded.updated_at",
            (
                pr.task_id,
                pr.repository,
                pr.number,
                pr.url,
                pr.branch,
                int(pr.draft),
                pr.pushed_sha,
                pr.checks_reported_sha,
                now,
                now,
            ),
        )

    async def claim_checks_report(self, task_id: int, sha: str) -> bool:
        """Mark `sha` as the head whose finished checks the task's chat is told about; False when it was so already.
        One statement: of several check events handled at once for the same head, exactly one wins the claim."""
        rows = await self._store.write(
            "UPDATE github_pull_requests SET checks_reported_sha = ?, updated_at = ? "
            "WHERE task_id = ? AND checks_reported_sha IS NOT ? RETURNING task_id",
            (sha, utcnow().isoformat(), task_id, sha),
        )
        return bool(rows)

    async def pull_request(self, task_id: int) -> PullRequestRecord | None:
        return await self._one("SELECT * FROM github_pull_requests WHERE task_id = ?", (task_id,))

    async def pull_request_by_number(self, repository: str, number: int) -> PullRequestRecord | None:
        """The newest task on that pull request (a follow-up continues from the latest one)."""
        return await self._one(
            "SELECT * FROM github_pull_requests WHERE lower(repository) = lower(?) AND number = ? "
            "ORDER BY task_id DESC LIMIT 1",
            (repository, number),
        )

    async def pull_requests_on(self, repository: str, branch: str) -> list[PullRequestRecord]:
        rows = await self._store.rows(
            "SELECT * FROM github_pull_requests WHERE lower(repository) = lower(?) AND branch = ?", (repository, branch)
        )
        return [_pull_request(row) for row in rows]

    async def pull_requests_with_head(self, repository: str, sha: str) -> list[PullRequestRecord]:
        """The pull requests whose last push was `sha` (a check event names the head it ran on)."""
        rows = await self._store.rows(
            "SELECT * FROM github_pull_requests WHERE lower(repository) = lower(?) AND pushed_sha = ?",
            (repository, sha),
        )
        return [_pull_request(row) for row in rows]

    async def _one(self, sql: str, params: tuple[Any, ...]) -> PullRequestRecord | None:
        rows = await self._store.rows(sql, params)
        return _pull_request(rows[0]) if rows else None

    # ---- webhook events ------------------------------------------------------------------------
    async def add_webhook_event(self, hook: WebhookEvent) -> bool:
        """Store a webhook event; False when one about the same thing was stored before (GitHub redelivered, or a
        replay)."""
        rows = await self._store.write(
            "INSERT INTO github_deliveries (id, event, payload, received_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING RETURNING id",
            (hook.id, hook.event, hook.payload, utcnow().isoformat()),
        )
        return bool(rows)

    async def webhook_event_handled(self, event_id: str) -> None:
        await self._store.write(
            "UPDATE github_deliveries SET handled_at = ? WHERE id = ?", (utcnow().isoformat(), event_id)
        )

    async def unhandled_webhook_events(self, before: datetime | None = None) -> list[WebhookEvent]:
        """Webhook events acknowledged but not handled yet; with `before`, those received before then (at start-up:
        what a stopped bot left; one received later is the running bot's own to handle as it arrives, never twice)."""
        rows = await self._store.rows(
            "SELECT id, event, payload FROM github_deliveries WHERE handled_at IS NULL AND received_at < ? "
            "ORDER BY received_at",
            ((before.isoformat() if before is not None else "9999"),),
        )
        return [WebhookEvent(id=r[0], event=r[1], payload=r[2]) for r in rows]

    # ---- threads that started tasks ----------------------------------------------------------
    async def add_thread(self, thread: ThreadRecord) -> None:
        await self._store.write(
            "INSERT OR IGNORE INTO github_threads (task_id, repository, number, login) VALUES (?, ?, ?, ?)",
            (thread.task_id, thread.repository, thread.number, thread.login),
        )

    async def thread_of_proposal(self, proposal_id: int) -> ThreadRecord | None:
        """The GitHub thread of the research task that wrote proposal #`proposal_id` (its result names it, as
        `proposal #N`, wherever it ran): the code task an approval starts answers there too."""
        rows = await self._store.rows(
            "SELECT g.task_id, g.repository, g.number, g.login FROM github_threads g JOIN tasks t ON t.id = g.task_id "
            "WHERE t.worker = 'research' AND t.result = ? ORDER BY g.task_id DESC LIMIT 1",
            (f"proposal #{proposal_id}",),
        )
        return (
            ThreadRecord(task_id=rows[0][0], repository=rows[0][1], number=rows[0][2], login=rows[0][3])
            if rows
            else None
        )

    async def thread(self, task_id: int) -> ThreadRecord | None:
        rows = await self._store.rows(
            "SELECT task_id, repository, number, login FROM github_threads WHERE task_id = ?", (task_id,)
        )
        return (
            ThreadRecord(task_id=rows[0][0], repository=rows[0][1], number=rows[0][2], login=rows[0][3])
            if rows
            else None
        )

    # ---- the accounts behind GITHUB_USERS' logins ---------------------------------------------------
    async def account_of(self, login: str, account_id: int) -> int:
        """The GitHub account id `login` was first seen as, recording `account_id` when it is the first: a login
        is a name its account may give up and anyone may claim, the id is the account's for good."""
        await self._store.write(
            "INSERT INTO github_accounts (login, account_id, first_seen_at) VALUES (?, ?, ?) "
            "ON CONFLICT (login) DO NOTHING",
            (login.lower(), account_id, utcnow().isoformat()),
        )
        rows = await self._store.rows("SELECT account_id FROM github_accounts WHERE login = ?", (login.lower(),))
        return int(rows[0][0])

    async def keep_accounts_of(self, logins: set[str]) -> None:
        """Forget the account of every login no longer in GITHUB_USERS (taken out and put back, a login is learnt
        afresh: how an owner accepts a user's new account under the same login)."""
        kept = sorted(login.lower() for login in logins)
        marks = ", ".join("?" for _ in kept)
        await self._store.write(f"DELETE FROM github_accounts WHERE login NOT IN ({marks})", tuple(kept))


def _pull_request(row: aiosqlite.Row) -> PullRequestRecord:
    keys = ("task_id", "repository", "number", "url", "branch", "draft", "pushed_sha", "checks_reported_sha")
    return PullRequestRecord.model_validate({k: row[k] for k in keys})
