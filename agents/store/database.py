"""SQLite store on aiosqlite: WAL, the schema of migrations.py applied in order, and the records of core/models.py.

Why one module over 400 lines: every table's reads and writes go through one connection and one transaction helper
(the repo map's tables are in repo_index.py, on the same connection).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
from pydantic import BaseModel

from agents.core.ids import valid_id
from agents.core.models import (
    Attachment,
    ChatMessage,
    ConversationNote,
    Criterion,
    Delivery,
    Proposal,
    ProposalStatus,
    Task,
    TaskEvent,
    TaskStatus,
    ToolCallRecord,
    UsageRecord,
    utcnow,
)
from agents.store.connection import Connection
from agents.store.conversations import Conversations, Place
from agents.store.github import GitHubRecords
from agents.store.migrations import MIGRATIONS
from agents.store.repo_index import RepoIndex
from agents.store.schedules import ScheduleTable
from agents.store.shown_buttons import ShownButtons

M = TypeVar("M", bound=BaseModel)


def _to_db(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, bool):
        return int(value)
    if hasattr(value, "value"):  # enums
        return value.value
    return value


class Store(Connection):
    """The one place state lives. Use `await Store.open(path)`; every method is a short transaction."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        super().__init__(db)
        self.path = path
        self._conversation_starts: dict[int, str] = {}  # chat id → start of its current conversation ('' = always)
        self._places: dict[int, Place] = {}  # topic conversation → its chat and thread (Store.conversations)
        self._bindings: dict[int, str | None] = {}  # conversation → its workspace, as read or bound
        # conversation → (after id, conversation start, its messages after that id): the newest `messages_after`
        # answer, kept up to date by this store's writes (the bot is the only writer of its database); a read that
        # overlapped a write is not kept (`_message_writes`: the writes begun, and those not yet finished)
        self._kept: dict[int, tuple[int, str, list[ChatMessage]]] = {}
        self._message_writes: dict[int, tuple[int, int]] = {}

    # ---- lifecycle -----------------------------------------------------------------------
    @classmethod
    async def open(cls, path: Path | str) -> Store:
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(str(path), isolation_level=None)
        db.row_factory = aiosqlite.Row
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.execute("PRAGMA foreign_keys=ON")
        await db.execute("PRAGMA busy_timeout=5000")
        store = cls(db, path)
        await store._migrate()
        return store

    async def close(self) -> None:
        await self._db.close()

    async def schema_version(self) -> int:
        return int((await self.rows("PRAGMA user_version"))[0][0])

    async def _migrate(self) -> None:
        version = await self.schema_version()
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            await self._db.executescript(f"BEGIN;\n{script}\nPRAGMA user_version={number};\nCOMMIT;")

    # ---- generic helpers -----------------------------------------------------------------
    async def _insert(self, table: str, record: BaseModel) -> int:
        data = {k: _to_db(v) for k, v in record.model_dump().items() if k != "id"}
        cols = ", ".join(data)
        marks = ", ".join("?" for _ in data)
        async with self._lock:
            row = await self._db.execute_insert(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(data.values()))
        return int(row[0])

    async def _fetch(self, model: type[M], sql: str, params: Iterable[Any] = ()) -> list[M]:
        return [model.model_validate(dict(row)) for row in await self.rows(sql, params)]

    async def _fetch_one(self, model: type[M], sql: str, params: Iterable[Any] = ()) -> M | None:
        rows = await self._fetch(model, sql, params)
        return rows[0] if rows else None

    async def _update(self, table: str, row_id: int, fields: dict[str, Any]) -> None:
        if not fields:
            return
        sets = ", ".join(f"{k} = ?" for k in fields)
        await self.write(f"UPDATE {table} SET {sets} WHERE id = ?", (*(_to_db(v) for v in fields.values()), row_id))

    # ---- conversation --------------------------------------------------------------------
    async def _conversation_start(self, chat_id: int) -> str:
        if chat_id not in self._conversation_starts:
            rows = await self.rows("SELECT conversation_started_at FROM chats WHERE id = ?", (chat_id,))
            self._conversation_starts[chat_id] = rows[0][0] if rows and rows[0][0] else ""
        return self._conversation_starts[chat_id]

    async def add_message(self, message: ChatMessage) -> ChatMessage:
        if message.chat_id not in self._conversation_starts:
            await self.write(
                "INSERT OR IGNORE INTO chats (id, created_at) VALUES (?, ?)", (message.chat_id, _to_db(utcnow()))
            )
            await self._conversation_start(message.chat_id)
        chat = message.chat_id
        begun, unfinished = self._message_writes.get(chat, (0, 0))
        self._message_writes[chat] = (begun + 1, unfinished + 1)
        try:
            message.id = await self._insert("messages", message)
            for attachment in message.attachments:
                attachment.message_id = message.id
                attachment.id = await self._insert("attachments", attachment)
            self._keep(message)
        finally:
            begun, unfinished = self._message_writes[chat]
            self._message_writes[chat] = (begun, unfinished - 1)
        return message

    def _keep(self, message: ChatMessage) -> None:
        """Add a stored message to its conversation's kept messages (in id order, once)."""
        kept = self._kept.get(message.chat_id)
        if kept is None or _to_db(message.created_at) < kept[1] or message.id is None:
            return
        messages = kept[2]
        if any(m.id == message.id for m in messages[-8:]):
            return
        copy = message.model_copy(update={"attachments": [a.model_copy() for a in message.attachments]})
        messages.append(copy)
        if len(messages) > 1 and (messages[-2].id or 0) > message.id:  # two writes finished out of order
            messages.sort(key=lambda m: m.id or 0)

    async def messages_after(self, chat_id: int, after_id: int) -> list[ChatMessage]:
        """Messages of the current conversation with id > after_id, oldest first, with their attachments (the
        store's own records: read them, do not change them)."""
        since = await self._conversation_start(chat_id)
        kept = self._kept.get(chat_id)
        if kept is not None and kept[1] == since and kept[0] <= after_id:
            messages = [m for m in kept[2] if (m.id or 0) > after_id]
            if after_id > kept[0]:
                self._kept[chat_id] = (after_id, since, messages)
            return list(messages)
        writes = self._message_writes.get(chat_id, (0, 0))
        messages = await self._fetch(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND id > ? AND created_at >= ? ORDER BY id",
            (chat_id, after_id, since),
        )
        if messages:
            by_id = {m.id: m for m in messages}
            for attachment in await self._fetch(
                Attachment,
                "SELECT * FROM attachments WHERE chat_id = ? AND message_id >= ? ORDER BY id",
                (chat_id, messages[0].id),
            ):
                if attachment.message_id in by_id:
                    by_id[attachment.message_id].attachments.append(attachment)
        if writes[1] == 0 and self._message_writes.get(chat_id, (0, 0)) == writes:  # no write overlapped the read
            self._kept[chat_id] = (after_id, since, messages)
        else:
            self._kept.pop(chat_id, None)
        return list(messages)

    async def chat_attachments(self, chat_id: int, ids: Iterable[int]) -> list[Attachment]:
        """The attachments of this chat among `ids`, in the order asked (unknown ids are left out)."""
        wanted = [int(i) for i in ids]
        found = (
            {
                a.id: a
                for a in await self._fetch(
                    Attachment,
                    f"SELECT * FROM attachments WHERE chat_id = ? AND id IN ({', '.join('?' for _ in wanted)})",
                    (chat_id, *wanted),
                )
            }
            if wanted
            else {}
        )
        return [found[i] for i in dict.fromkeys(wanted) if i in found]

    async def refuse_attachment(self, attachment_id: int, reason: str) -> None:
        """The Messages API refused this attachment: it is left out of every later request."""
        await self._update("attachments", attachment_id, {"refused": reason})
        for _, _, messages in self._kept.values():
            for attachment in (a for m in messages for a in m.attachments if a.id == attachment_id):
                attachment.refused = reason

    async def task_attachments(self, task_id: int) -> list[tuple[Attachment, bool]]:
        """(attachment, save_as_file) of what was handed to the task."""
        rows = await self.rows(
            "SELECT a.*, t.save_as_file FROM task_attachments t JOIN attachments a ON a.id = t.attachment_id "
            "WHERE t.task_id = ? ORDER BY a.id",
            (task_id,),
        )
        handed = []
        for row in rows:
            fields = dict(row)
            save = bool(fields.pop("save_as_file"))
            handed.append((Attachment.model_validate(fields), save))
        return handed

    async def add_note(self, note: ConversationNote) -> ConversationNote:
        note.id = await self._insert("conversation_notes", note)
        return note

    async def latest_note(self, chat_id: int) -> ConversationNote | None:
        """The newest compacted summary of the current conversation, if any."""
        since = await self._conversation_start(chat_id)
        return await self._fetch_one(
            ConversationNote,
            "SELECT * FROM conversation_notes WHERE chat_id = ? AND created_at >= ? ORDER BY id DESC LIMIT 1",
            (chat_id, since),
        )

    async def message_by_platform_id(self, chat_id: int, platform_message_id: int) -> ChatMessage | None:
        return await self._fetch_one(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND platform_message_id = ? ORDER BY id DESC LIMIT 1",
            (chat_id, platform_message_id),
        )

    async def set_platform_message_id(self, message_id: int, platform_message_id: int) -> None:
        await self._update("messages", message_id, {"platform_message_id": platform_message_id})
        for message in (m for _, _, messages in self._kept.values() for m in messages if m.id == message_id):
            message.platform_message_id = platform_message_id

    async def shown_record_from(self, chat_id: int, platform_message_id: int) -> ChatMessage | None:
        """The first proposal or task summary sent at or after this chat message."""
        return await self._fetch_one(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND kind != 'chat' AND platform_message_id >= ? "
            "ORDER BY platform_message_id LIMIT 1",
            (chat_id, platform_message_id),
        )

    async def bot_message_about(self, chat_id: int, kind: str, ref_id: int) -> ChatMessage | None:
        """The newest message the bot showed about one proposal or task."""
        return await self._fetch_one(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND kind = ? AND ref_id = ? ORDER BY id DESC LIMIT 1",
            (chat_id, kind, ref_id),
        )

    async def shown_records_up_to(self, chat_id: int, up_to_id: int) -> list[ChatMessage]:
        """Proposals and task summaries of the current conversation with id <= up_to_id, oldest first."""
        since = await self._conversation_start(chat_id)
        return await self._fetch(
            ChatMessage,
            "SELECT * FROM messages WHERE chat_id = ? AND id <= ? AND kind != 'chat' AND created_at >= ? ORDER BY id",
            (chat_id, up_to_id, since),
        )

    async def all_messages(self, chat_id: int) -> list[ChatMessage]:
        return await self._fetch(ChatMessage, "SELECT * FROM messages WHERE chat_id = ? ORDER BY id", (chat_id,))

    async def start_new_conversation(self, chat_id: int) -> None:
        now = _to_db(utcnow())
        await self.write(
            "INSERT INTO chats (id, created_at, conversation_started_at) VALUES (?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET conversation_started_at = excluded.conversation_started_at",
            (chat_id, now, now),
        )
        self._conversation_starts[chat_id] = now
        self._kept.pop(chat_id, None)

    # ---- proposals -----------------------------------------------------------------------
    async def add_proposal(self, proposal: Proposal) -> Proposal:
        proposal.id = await self._insert("proposals", proposal)
        return proposal

    async def get_proposal(self, proposal_id: int) -> Proposal | None:
        if not valid_id(proposal_id):  # e.g. a 20-digit number: SQLite cannot bind it, and no row has it
            return None
        return await self._fetch_one(Proposal, "SELECT * FROM proposals WHERE id = ?", (proposal_id,))

    async def update_proposal(self, proposal_id: int, **fields: Any) -> None:
        await self._update("proposals", proposal_id, fields)

    async def decide_proposal(self, proposal_id: int, status: ProposalStatus) -> bool:
        """Atomically take a pending proposal to `status`; False when it was no longer pending (a double tap)."""
        rows = await self.write(
            "UPDATE proposals SET status = ?, decided_at = ? WHERE id = ? AND status = ? RETURNING id",
            (status.value, _to_db(utcnow()), proposal_id, ProposalStatus.PENDING.value),
        )
        return bool(rows)

    async def latest_proposal(self, chat_id: int) -> Proposal | None:
        return await self._fetch_one(
            Proposal, "SELECT * FROM proposals WHERE chat_id = ? ORDER BY id DESC LIMIT 1", (chat_id,)
        )

    async def task_by_message(self, chat_id: int, message_id: int) -> Task | None:
        """The task whose progress message (or request) is this chat message."""
        return await self._fetch_one(
            Task,
            "SELECT * FROM tasks WHERE chat_id = ? AND (progress_message_id = ? OR reply_to_message_id = ?) "
            "ORDER BY id DESC LIMIT 1",
            (chat_id, message_id, message_id),
        )

    async def pending_proposals(self, chat_id: int) -> list[Proposal]:
        return await self._fetch(
            Proposal,
            "SELECT * FROM proposals WHERE chat_id = ? AND status = ? ORDER BY id",
            (chat_id, ProposalStatus.PENDING.value),
        )

    # ---- tasks ---------------------------------------------------------------------------
    async def add_task(
        self,
        task: Task,
        criteria: list[str] | None = None,
        attachments: Iterable[int] = (),
        save_attachments: bool = False,
    ) -> Task:
        """Insert a task, its acceptance criteria and attachments in one transaction (a runner sees all or none)."""
        async with self.transaction() as db:
            await self._insert_task(db, task, criteria, attachments, save_attachments)
        return task

    @staticmethod
    async def _insert_task(
        db: aiosqlite.Connection,
        task: Task,
        criteria: list[str] | None,
        attachments: Iterable[int] = (),
        save_attachments: bool = False,
    ) -> None:
        data = {k: _to_db(v) for k, v in task.model_dump().items() if k != "id"}
        row = await db.execute_insert(
            f"INSERT INTO tasks ({', '.join(data)}) VALUES ({', '.join('?' for _ in data)})", tuple(data.values())
        )
        task.id = int(row[0])
        await db.executemany(
            "INSERT INTO task_criteria (task_id, idx, text) VALUES (?, ?, ?)",
            [(task.id, idx, text) for idx, text in enumerate(criteria or [], start=1)],
        )
        await db.executemany(
            "INSERT OR IGNORE INTO task_attachments (task_id, attachment_id, save_as_file) VALUES (?, ?, ?)",
            [(task.id, a, int(save_attachments)) for a in attachments],
        )

    async def approve_proposal(self, proposal_id: int, task: Task, criteria: list[str] | None = None) -> Task | None:
        """Approve a pending proposal and create its task in ONE transaction (a SIGKILL leaves both or neither).

        None when the proposal was no longer pending (a double tap); then no task is created.
        """
        async with self.transaction() as db:
            decided = await db.execute_fetchall(
                "UPDATE proposals SET status = ?, decided_at = ? WHERE id = ? AND status = ? RETURNING id",
                (ProposalStatus.APPROVED.value, _to_db(utcnow()), proposal_id, ProposalStatus.PENDING.value),
            )
            if not decided:
                return None
            await self._insert_task(db, task, criteria)
            await db.execute_fetchall("UPDATE proposals SET task_id = ? WHERE id = ?", (task.id, proposal_id))
        return task

    async def repair_approvals_without_task(self) -> list[int]:
        """At start-up: proposals an older bot approved but was killed before creating their task go back to pending."""
        rows = await self.write(
            "UPDATE proposals SET status = ?, decided_at = NULL WHERE status = ? AND task_id IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.proposal_id = proposals.id) RETURNING id",
            (ProposalStatus.PENDING.value, ProposalStatus.APPROVED.value),
        )
        return sorted(int(row[0]) for row in rows)

    async def transition_task(self, task_id: int, from_statuses: Iterable[TaskStatus], to: TaskStatus) -> bool:
        """Atomically move a task from one of `from_statuses` to `to`; False when it was in none of them."""
        values = [s.value for s in from_statuses]
        rows = await self.write(
            f"UPDATE tasks SET status = ? WHERE id = ? AND status IN ({', '.join('?' for _ in values)}) RETURNING id",
            (to.value, task_id, *values),
        )
        return bool(rows)

    async def get_task(self, task_id: int) -> Task | None:
        if not valid_id(task_id):  # e.g. a 20-digit number: SQLite cannot bind it, and no row has it
            return None
        return await self._fetch_one(Task, "SELECT * FROM tasks WHERE id = ?", (task_id,))

    async def task_by_progress_message(self, chat_id: int, message_id: int) -> Task | None:
        return await self._fetch_one(
            Task, "SELECT * FROM tasks WHERE chat_id = ? AND progress_message_id = ?", (chat_id, message_id)
        )

    async def update_task(self, task_id: int, **fields: Any) -> None:
        await self._update("tasks", task_id, fields)

    async def list_tasks(
        self, chat_id: int | None = None, statuses: Iterable[TaskStatus] | None = None, limit: int = 20
    ) -> list[Task]:
        where, params = [], []
        if chat_id is not None:
            where.append("chat_id = ?")
            params.append(chat_id)
        if statuses is not None:
            values = [s.value for s in statuses]
            where.append(f"status IN ({', '.join('?' for _ in values)})")
            params.extend(values)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        return await self._fetch(Task, f"SELECT * FROM tasks {clause} ORDER BY id DESC LIMIT ?", (*params, limit))

    async def claim_next_task(self) -> Task | None:
        """Atomically move the best pending task (priority, then age) to in_progress and return it."""
        now = _to_db(utcnow())
        rows = await self.write(
            "UPDATE tasks SET status = ?, started_at = ? WHERE id = ("
            " SELECT id FROM tasks WHERE status = ? ORDER BY priority DESC, id ASC LIMIT 1"
            ") AND status = ? RETURNING *",
            (TaskStatus.IN_PROGRESS.value, now, TaskStatus.PENDING.value, TaskStatus.PENDING.value),
        )
        return Task.model_validate(dict(rows[0])) if rows else None

    async def mirror_task(self, task: Task, criteria: list[str] | None = None) -> None:
        """A runner's copy of a task the bot stored: inserted, or replaced whole, under the bot's number,
        with its acceptance criteria afresh."""
        data = {k: _to_db(v) for k, v in task.model_dump().items()}
        async with self.transaction() as db:
            await db.execute("DELETE FROM task_criteria WHERE task_id = ?", (task.id,))
            await db.execute(
                f"INSERT OR REPLACE INTO tasks ({', '.join(data)}) VALUES ({', '.join('?' for _ in data)})",
                tuple(data.values()),
            )
            await db.executemany(
                "INSERT INTO task_criteria (task_id, idx, text) VALUES (?, ?, ?)",
                [(task.id, idx, text) for idx, text in enumerate(criteria or [], start=1)],
            )

    async def mirror_task_attachments(self, task_id: int, handed: list[tuple[Attachment, bool]]) -> None:
        """A runner's copy of the files handed to a task (their bytes already under its attachments folder), replacing
        what an earlier run of the task mirrored; each under the bot's id (the worktree's copies are named after it,
        as on the bot; a runner's store holds no attachments of its own)."""
        async with self.transaction() as db:
            await db.execute("DELETE FROM task_attachments WHERE task_id = ?", (task_id,))
            for attachment, save in handed:
                data = {k: _to_db(v) for k, v in attachment.model_dump().items() if k != "message_id"}
                await db.execute(
                    f"INSERT OR REPLACE INTO attachments ({', '.join(data)}) VALUES ({', '.join('?' for _ in data)})",
                    tuple(data.values()),
                )
                await db.execute(
                    "INSERT INTO task_attachments (task_id, attachment_id, save_as_file) VALUES (?, ?, ?)",
                    (task_id, attachment.id, int(save)),
                )

    async def interrupt_running_tasks(self) -> list[Task]:
        """At start-up: tasks left in_progress by a killed bot become interrupted."""
        stuck = await self.list_tasks(statuses=[TaskStatus.IN_PROGRESS], limit=1000)
        for task in stuck:
            await self.update_task(task.id, status=TaskStatus.INTERRUPTED)
            await self.add_event(TaskEvent(task_id=task.id, kind="status", detail=TaskStatus.INTERRUPTED.value))
        return stuck

    async def add_event(self, event: TaskEvent) -> TaskEvent:
        event.id = await self._insert("task_events", event)
        return event

    async def task_events(self, task_id: int) -> list[TaskEvent]:
        return await self._fetch(TaskEvent, "SELECT * FROM task_events WHERE task_id = ? ORDER BY id", (task_id,))

    async def criteria(self, task_id: int) -> list[Criterion]:
        return await self._fetch(Criterion, "SELECT * FROM task_criteria WHERE task_id = ? ORDER BY idx", (task_id,))

    async def verify_criterion(self, task_id: int, idx: int, evidence: str) -> bool:
        rows = await self.write(
            "UPDATE task_criteria SET verified = 1, evidence = ? WHERE task_id = ? AND idx = ? RETURNING idx",
            (evidence, task_id, idx),
        )
        return bool(rows)

    # ---- audit and usage -----------------------------------------------------------------
    async def record_tool_call(self, record: ToolCallRecord) -> None:
        record.id = await self._insert("tool_calls", record)

    async def tool_calls(self, task_id: int | None = None, chat_id: int | None = None) -> list[ToolCallRecord]:
        if task_id is not None:
            return await self._fetch(
                ToolCallRecord, "SELECT * FROM tool_calls WHERE task_id = ? ORDER BY id", (task_id,)
            )
        return await self._fetch(
            ToolCallRecord, "SELECT * FROM tool_calls WHERE chat_id = ? AND task_id IS NULL ORDER BY id", (chat_id,)
        )

    async def record_usage(self, record: UsageRecord) -> None:
        record.id = await self._insert("usage", record)

    async def usage_since(self, since: datetime, task_id: int | None = None) -> list[UsageRecord]:
        if task_id is not None:
            return await self._fetch(UsageRecord, "SELECT * FROM usage WHERE task_id = ? ORDER BY id", (task_id,))
        return await self._fetch(UsageRecord, "SELECT * FROM usage WHERE created_at >= ? ORDER BY id", (_to_db(since),))

    # ---- deliveries (outbox) -------------------------------------------------------------
    async def add_delivery(self, delivery: Delivery) -> Delivery:
        delivery.id = await self._insert("deliveries", delivery)
        return delivery

    async def delivery_done(self, delivery_id: int) -> None:
        await self.write(
            "UPDATE deliveries SET delivered_at = ?, attempts = attempts + 1 WHERE id = ?",
            (_to_db(utcnow()), delivery_id),
        )

    async def delivery_failed(self, delivery_id: int, error: str) -> None:
        await self.write(
            "UPDATE deliveries SET attempts = attempts + 1, last_error = ? WHERE id = ?", (error[:500], delivery_id)
        )

    async def undelivered(self, max_attempts: int) -> list[Delivery]:
        return await self._fetch(
            Delivery,
            "SELECT * FROM deliveries WHERE delivered_at IS NULL AND attempts < ? ORDER BY id",
            (max_attempts,),
        )

    async def last_delivery(self, task_id: int) -> Delivery | None:
        """The newest summary or proposal shown for a task."""
        return await self._fetch_one(
            Delivery, "SELECT * FROM deliveries WHERE task_id = ? ORDER BY id DESC LIMIT 1", (task_id,)
        )

    @property
    def conversations(self) -> Conversations:
        """Forum topics as conversations of their own, and the workspace a conversation is bound to."""
        return Conversations(self, self._places, self._bindings)

    @property
    def schedules(self) -> ScheduleTable:
        """Work that starts by itself (agents/work/schedules.py fires it)."""
        return ScheduleTable(self)

    @property
    def github(self) -> GitHubRecords:
        """Pull requests of tasks, GitHub webhook deliveries and the GitHub threads that started tasks."""
        return GitHubRecords(self)

    @property
    def shown_buttons(self) -> ShownButtons:
        """The inline buttons the bot showed, per message: what a press may be."""
        return ShownButtons(self)

    @property
    def repo_index(self) -> RepoIndex:
        """The code index of agents/repo_map (a second set of tables on the same connection)."""
        return RepoIndex(self)


def start_of_day(now: datetime | None = None) -> datetime:
    now = now or utcnow()
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def start_of_month(now: datetime | None = None) -> datetime:
    return start_of_day(now).replace(day=1)
