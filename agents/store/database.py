"""SQLite store on aiosqlite: versioned migrations, WAL, and the records of models.py.

Why one module over 400 lines: every table's reads and writes go through one connection and one transaction helper;
the migrations sit above them.
"""

from __future__ import annotations

import asyncio
import contextlib
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

M = TypeVar("M", bound=BaseModel)

# Each entry is one schema version; never edit an applied migration, append a new one.
MIGRATIONS: list[str] = [
    # 1: conversations, proposals, tasks, events, audit, usage
    """
    CREATE TABLE chats (
        id INTEGER PRIMARY KEY,
        conversation_started_at TEXT,
        created_at TEXT NOT NULL
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        input_method TEXT NOT NULL DEFAULT 'text',
        tokens INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE INDEX messages_chat ON messages(chat_id, id);
    CREATE TABLE proposals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        workspace TEXT NOT NULL,
        request TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,
        supersedes INTEGER,
        task_id INTEGER,
        created_at TEXT NOT NULL,
        decided_at TEXT
    );
    CREATE INDEX proposals_chat ON proposals(chat_id, status);
    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        workspace TEXT NOT NULL,
        worker TEXT NOT NULL,
        title TEXT NOT NULL,
        instructions TEXT NOT NULL,
        status TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        background INTEGER NOT NULL DEFAULT 1,
        proposal_id INTEGER,
        branch TEXT,
        base_branch TEXT,
        base_commit TEXT,
        worktree TEXT,
        commit_sha TEXT,
        result TEXT,
        error TEXT,
        reply_to_message_id INTEGER,
        progress_message_id INTEGER,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT
    );
    CREATE INDEX tasks_status ON tasks(status, priority, id);
    CREATE INDEX tasks_chat ON tasks(chat_id, id);
    CREATE TABLE task_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE INDEX task_events_task ON task_events(task_id, id);
    CREATE TABLE tool_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER,
        task_id INTEGER,
        agent TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        result_chars INTEGER NOT NULL DEFAULT 0,
        duration_ms INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX tool_calls_task ON tool_calls(task_id, id);
    CREATE TABLE usage (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER,
        task_id INTEGER,
        agent TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE INDEX usage_time ON usage(created_at);
    CREATE INDEX usage_task ON usage(task_id);
    """,
    # 2: acceptance criteria of tasks; compacted summaries of long conversations
    """
    CREATE TABLE task_criteria (
        task_id INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        text TEXT NOT NULL,
        verified INTEGER NOT NULL DEFAULT 0,
        evidence TEXT,
        PRIMARY KEY (task_id, idx)
    );
    CREATE TABLE conversation_notes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        up_to_message_id INTEGER NOT NULL,
        summary TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX conversation_notes_chat ON conversation_notes(chat_id, id);
    """,
    # 3: repo map (agents/repo_map/maps.py): per-workspace index of files, their symbols and import edges
    """
    CREATE TABLE repo_indexes (
        workspace TEXT PRIMARY KEY,
        root TEXT NOT NULL,
        git_head TEXT,
        refreshed_at TEXT NOT NULL
    );
    CREATE TABLE repo_files (
        workspace TEXT NOT NULL,
        path TEXT NOT NULL,
        mtime_ns INTEGER NOT NULL,
        size INTEGER NOT NULL,
        language TEXT,
        git_head TEXT,
        summary TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (workspace, path)
    ) WITHOUT ROWID;
    CREATE TABLE repo_symbols (
        workspace TEXT NOT NULL,
        path TEXT NOT NULL,
        name TEXT NOT NULL COLLATE NOCASE,
        kind TEXT NOT NULL,
        line INTEGER NOT NULL,
        signature TEXT NOT NULL,
        parent TEXT
    );
    CREATE INDEX repo_symbols_file ON repo_symbols(workspace, path);
    CREATE INDEX repo_symbols_name ON repo_symbols(workspace, name);
    CREATE TABLE repo_imports (
        workspace TEXT NOT NULL,
        path TEXT NOT NULL,
        target TEXT NOT NULL
    );
    CREATE INDEX repo_imports_file ON repo_imports(workspace, path);
    CREATE INDEX repo_imports_target ON repo_imports(workspace, target);
    """,
    # 4: photos and files sent with a message (bytes in files under the data folder), and those handed to a task
    """
    CREATE TABLE attachments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        message_id INTEGER,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        media_type TEXT NOT NULL,
        path TEXT NOT NULL,
        size INTEGER NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE INDEX attachments_message ON attachments(message_id);
    CREATE TABLE task_attachments (
        task_id INTEGER NOT NULL,
        attachment_id INTEGER NOT NULL,
        save_as_file INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (task_id, attachment_id)
    );
    """,
    # 5 (issue 14): proposals and task summaries the bot showed are turns of the chat; replies can point at them
    """
    ALTER TABLE messages ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat';
    ALTER TABLE messages ADD COLUMN ref_id INTEGER;
    ALTER TABLE messages ADD COLUMN platform_message_id INTEGER;
    CREATE INDEX messages_platform ON messages(chat_id, platform_message_id);
    """,
    # 6: deliveries (store/delivery.py, issue 12): every summary, proposal and answer the bot must show, kept until
    # Telegram took it (delivered_at) so a 5xx or a restart never loses it; /task N re-sends the last one of a task
    """
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        task_id INTEGER,
        text TEXT NOT NULL,
        buttons TEXT,
        reply_to INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        created_at TEXT NOT NULL,
        delivered_at TEXT
    );
    CREATE INDEX deliveries_undelivered ON deliveries(delivered_at, id);
    CREATE INDEX deliveries_task ON deliveries(task_id, id);
    """,
    # 7: repo map ranking (issue 17): content hashes (a fresh worktree re-parses nothing unchanged), and each
    # file's referenced identifiers and words as JSON objects (name → uses) for the definition/reference graph
    """
    ALTER TABLE repo_files ADD COLUMN content_hash TEXT NOT NULL DEFAULT '';
    ALTER TABLE repo_files ADD COLUMN refs TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE repo_files ADD COLUMN words TEXT NOT NULL DEFAULT '{}';
    """,
]

LATEST_VERSION = len(MIGRATIONS)


def _to_db(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, bool):
        return int(value)
    if hasattr(value, "value"):  # enums
        return value.value
    return value


class Store:
    """The one place state lives. Use `await Store.open(path)`; every method is a short transaction."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        # Autocommit connection: each statement is one round trip to aiosqlite's thread and commits itself; the lock
        # keeps other statements out of the few explicit multi-statement transactions (BEGIN … COMMIT).
        self._lock = asyncio.Lock()
        self._conversation_starts: dict[int, str] = {}  # chat id → start of its current conversation ('' = always)

    async def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        async with self._lock:
            return list(await self._db.execute_fetchall(sql, tuple(params)))

    async def _write(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        """Run one modifying statement (committed on completion); returns any RETURNING rows."""
        async with self._lock:
            return list(await self._db.execute_fetchall(sql, tuple(params)))

    @contextlib.asynccontextmanager
    async def _transaction(self):
        """Several statements as one transaction, rolled back on any error."""
        async with self._lock:
            try:
                await self._db.execute_fetchall("BEGIN")
                yield self._db
                await self._db.execute_fetchall("COMMIT")
            except BaseException:
                # Also when cancelled mid-way: the connection's thread runs requests in order, so this ROLLBACK comes
                # after a BEGIN/COMMIT whose await was cancelled; "no transaction is active" is fine.
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._db.execute_fetchall("ROLLBACK"))
                raise

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
        return int((await self._rows("PRAGMA user_version"))[0][0])

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
        return [model.model_validate(dict(row)) for row in await self._rows(sql, params)]

    async def _fetch_one(self, model: type[M], sql: str, params: Iterable[Any] = ()) -> M | None:
        rows = await self._fetch(model, sql, params)
        return rows[0] if rows else None

    async def _update(self, table: str, row_id: int, fields: dict[str, Any]) -> None:
        if not fields:
            return
        sets = ", ".join(f"{k} = ?" for k in fields)
        await self._write(f"UPDATE {table} SET {sets} WHERE id = ?", (*(_to_db(v) for v in fields.values()), row_id))

    # ---- conversation --------------------------------------------------------------------
    async def _conversation_start(self, chat_id: int) -> str:
        if chat_id not in self._conversation_starts:
            rows = await self._rows("SELECT conversation_started_at FROM chats WHERE id = ?", (chat_id,))
            self._conversation_starts[chat_id] = rows[0][0] if rows and rows[0][0] else ""
        return self._conversation_starts[chat_id]

    async def add_message(self, message: ChatMessage) -> ChatMessage:
        if message.chat_id not in self._conversation_starts:
            await self._write(
                "INSERT OR IGNORE INTO chats (id, created_at) VALUES (?, ?)", (message.chat_id, _to_db(utcnow()))
            )
            await self._conversation_start(message.chat_id)
        message.id = await self._insert("messages", message)
        for attachment in message.attachments:
            attachment.message_id = message.id
            attachment.id = await self._insert("attachments", attachment)
        return message

    async def messages_after(self, chat_id: int, after_id: int) -> list[ChatMessage]:
        """Messages of the current conversation with id > after_id, oldest first, with their attachments."""
        since = await self._conversation_start(chat_id)
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
        return messages

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

    async def task_attachments(self, task_id: int) -> list[tuple[Attachment, bool]]:
        """(attachment, save_as_file) of what was handed to the task."""
        rows = await self._rows(
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
        await self._write(
            "INSERT INTO chats (id, created_at, conversation_started_at) VALUES (?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET conversation_started_at = excluded.conversation_started_at",
            (chat_id, now, now),
        )
        self._conversation_starts[chat_id] = now

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
        rows = await self._write(
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
        async with self._transaction() as db:
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
        async with self._transaction() as db:
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
        rows = await self._write(
            "UPDATE proposals SET status = ?, decided_at = NULL WHERE status = ? AND task_id IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.proposal_id = proposals.id) RETURNING id",
            (ProposalStatus.PENDING.value, ProposalStatus.APPROVED.value),
        )
        return sorted(int(row[0]) for row in rows)

    async def transition_task(self, task_id: int, from_statuses: Iterable[TaskStatus], to: TaskStatus) -> bool:
        """Atomically move a task from one of `from_statuses` to `to`; False when it was in none of them."""
        values = [s.value for s in from_statuses]
        rows = await self._write(
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
        rows = await self._write(
            "UPDATE tasks SET status = ?, started_at = ? WHERE id = ("
            " SELECT id FROM tasks WHERE status = ? ORDER BY priority DESC, id ASC LIMIT 1"
            ") AND status = ? RETURNING *",
            (TaskStatus.IN_PROGRESS.value, now, TaskStatus.PENDING.value, TaskStatus.PENDING.value),
        )
        return Task.model_validate(dict(rows[0])) if rows else None

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
        rows = await self._write(
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
        await self._write(
            "UPDATE deliveries SET delivered_at = ?, attempts = attempts + 1 WHERE id = ?",
            (_to_db(utcnow()), delivery_id),
        )

    async def delivery_failed(self, delivery_id: int, error: str) -> None:
        await self._write(
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

    # ---- repo map ------------------------------------------------------------------------
    # The code index of agents/repo_map/maps.py. Rows are plain tuples / dicts so the store need not import that module.

    async def _write_batch(self, statements: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """Run several executemany statements as one transaction (one index refresh)."""
        async with self._transaction() as db:
            for sql, rows in statements:
                if rows:
                    await db.executemany(sql, rows)

    async def _rows_in(self, sql: str, workspace: str, values: Iterable[Any], chunk: int = 500) -> list[aiosqlite.Row]:
        """`sql` has `workspace = ?` and one `IN ({marks})`; run it over `values` in chunks."""
        values = list(dict.fromkeys(values))
        rows: list[aiosqlite.Row] = []
        for begin in range(0, len(values), chunk):
            part = values[begin : begin + chunk]
            rows += await self._rows(sql.format(marks=", ".join("?" for _ in part)), (workspace, *part))
        return rows

    async def repo_file_states(self, workspace: str) -> dict[str, tuple[int, int]]:
        """path → (mtime_ns, size) of every indexed file of the workspace."""
        rows = await self._rows("SELECT path, mtime_ns, size FROM repo_files WHERE workspace = ?", (workspace,))
        return {row[0]: (row[1], row[2]) for row in rows}

    async def save_repo_index(
        self,
        workspace: str,
        root: str,
        git_head: str | None,
        *,
        files: list[tuple[str, int, int, str | None, str | None, str, str, str, str]],
        symbols: list[tuple[str, str, str, int, str, str | None]],
        imports: list[tuple[str, str]],
        drop: list[str],
        touched: list[tuple[str, int, int]] = (),  # type: ignore[assignment]
    ) -> None:
        """One refresh in one transaction: forget the `drop` paths, then store the (re)parsed files.

        files: (path, mtime_ns, size, language, git_head, summary, content_hash, refs JSON, words JSON) · symbols:
        (path, name, kind, line, signature, parent) · imports: (path, target) · touched: (path, mtime_ns, size) of
        files whose content is unchanged.
        """
        gone = [(workspace, path) for path in drop]
        await self._write_batch(
            [
                ("DELETE FROM repo_files WHERE workspace = ? AND path = ?", gone),
                ("DELETE FROM repo_symbols WHERE workspace = ? AND path = ?", gone),
                ("DELETE FROM repo_imports WHERE workspace = ? AND path = ?", gone),
                (
                    "UPDATE repo_files SET mtime_ns = ?, size = ? WHERE workspace = ? AND path = ?",
                    [(mtime_ns, size, workspace, path) for path, mtime_ns, size in touched],
                ),
                (
                    "INSERT OR REPLACE INTO repo_files (workspace, path, mtime_ns, size, language, git_head, summary, "
                    "content_hash, refs, words) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(workspace, *row) for row in files],
                ),
                (
                    "INSERT INTO repo_symbols (workspace, path, name, kind, line, signature, parent) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(workspace, *row) for row in symbols],
                ),
                (
                    "INSERT INTO repo_imports (workspace, path, target) VALUES (?, ?, ?)",
                    [(workspace, *row) for row in imports],
                ),
                (
                    "INSERT INTO repo_indexes (workspace, root, git_head, refreshed_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(workspace) DO UPDATE SET root = excluded.root, git_head = excluded.git_head, "
                    "refreshed_at = excluded.refreshed_at",
                    [(workspace, root, git_head, _to_db(utcnow()))],
                ),
            ]
        )

    async def repo_file_hashes(self, workspace: str) -> dict[str, str]:
        """path → content hash of every indexed file of the workspace."""
        rows = await self._rows("SELECT path, content_hash FROM repo_files WHERE workspace = ?", (workspace,))
        return {row[0]: row[1] for row in rows}

    async def copy_repo_index(self, source: str, target: str) -> None:
        """Make the index of `target` a copy of the index of `source` (a task's worktree starts from its
        workspace's)."""
        await self._write_batch(
            [
                *[
                    (f"DELETE FROM {table} WHERE workspace = ?", [(target,)])
                    for table in ("repo_files", "repo_symbols", "repo_imports", "repo_indexes")
                ],
                (
                    "INSERT INTO repo_files (workspace, path, mtime_ns, size, language, git_head, summary, "
                    "content_hash, refs, words) SELECT ?, path, mtime_ns, size, language, git_head, summary, "
                    "content_hash, refs, words FROM repo_files WHERE workspace = ?",
                    [(target, source)],
                ),
                (
                    "INSERT INTO repo_symbols (workspace, path, name, kind, line, signature, parent) "
                    "SELECT ?, path, name, kind, line, signature, parent FROM repo_symbols WHERE workspace = ?",
                    [(target, source)],
                ),
                (
                    "INSERT INTO repo_imports (workspace, path, target) SELECT ?, path, target FROM repo_imports "
                    "WHERE workspace = ?",
                    [(target, source)],
                ),
            ]
        )

    async def repo_file_terms(self, workspace: str) -> list[tuple[str, str, str]]:
        """(path, refs JSON, words JSON) of every indexed text file."""
        rows = await self._rows(
            "SELECT path, refs, words FROM repo_files WHERE workspace = ? AND language IS NOT 'binary'", (workspace,)
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def repo_all_symbols(self, workspace: str) -> list[dict[str, Any]]:
        """Every symbol of the workspace: path, name, kind, line, signature, parent (by path and line)."""
        rows = await self._rows(
            "SELECT path, name, kind, line, signature, parent FROM repo_symbols "
            "WHERE workspace = ? ORDER BY path, line",
            (workspace,),
        )
        return [dict(row) for row in rows]

    async def repo_all_imports(self, workspace: str) -> list[tuple[str, str]]:
        """(path, target) of every import of the workspace."""
        rows = await self._rows("SELECT path, target FROM repo_imports WHERE workspace = ?", (workspace,))
        return [(row[0], row[1]) for row in rows]

    async def repo_index_info(self, workspace: str) -> dict[str, Any] | None:
        """root, git_head and refreshed_at of the workspace's last refresh, or None if never indexed."""
        rows = await self._rows("SELECT * FROM repo_indexes WHERE workspace = ?", (workspace,))
        return dict(rows[0]) if rows else None

    async def repo_file_list(self, workspace: str) -> list[dict[str, Any]]:
        """The indexed text files: path, size, language, summary, mtime_ns."""
        rows = await self._rows(
            "SELECT path, size, language, summary, mtime_ns FROM repo_files "
            "WHERE workspace = ? AND language IS NOT 'binary'",
            (workspace,),
        )
        return [dict(row) for row in rows]

    async def repo_file_count(self, workspace: str) -> int:
        rows = await self._rows(
            "SELECT count(*) FROM repo_files WHERE workspace = ? AND language IS NOT 'binary'", (workspace,)
        )
        return int(rows[0][0])

    async def search_repo_symbols(
        self, workspace: str, query: str, parent: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Symbols named `query` (case-insensitive): exact matches (same case first), then prefix, then substring."""
        like = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where, params = ["workspace = ?", "name LIKE ? ESCAPE '\\'"], [workspace, f"%{like}%"]
        if parent:
            where.append("(parent = ? COLLATE NOCASE OR parent LIKE ? ESCAPE '\\')")
            params += [parent, "%." + parent.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")]
        rows = await self._rows(
            "SELECT path, name, kind, line, signature, parent, "
            "CASE WHEN name = ? COLLATE BINARY THEN 0 WHEN name = ? THEN 1 WHEN name LIKE ? ESCAPE '\\' THEN 2 "
            "ELSE 3 END AS rank "
            f"FROM repo_symbols WHERE {' AND '.join(where)} ORDER BY rank, length(name), path, line LIMIT ?",
            (query, query, f"{like}%", *params, limit),
        )
        return [dict(row) for row in rows]

    async def delete_repo_index(self, workspace: str) -> None:
        """Forget everything indexed for the workspace."""
        await self._write_batch(
            [
                (f"DELETE FROM {table} WHERE workspace = ?", [(workspace,)])
                for table in ("repo_files", "repo_symbols", "repo_imports", "repo_indexes")
            ]
        )


def start_of_day(now: datetime | None = None) -> datetime:
    now = now or utcnow()
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def start_of_month(now: datetime | None = None) -> datetime:
    return start_of_day(now).replace(day=1)
