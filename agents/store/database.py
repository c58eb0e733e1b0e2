"""SQLite store on aiosqlite: WAL, the schema of migrations.py applied in order, and the records of core/models.py.

`Store` is the one connection, made of one class per kind of record, each in its own module (messages.py,
attachments.py, proposals.py, tasks.py, audit.py, usage.py, outbox.py) and each a `Connection`: a caller reaches
every record's methods on the one `Store`. The other tables are reached through the properties below, each a class
of its own handed the same connection.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import aiosqlite

from agents.store.attachments import AttachmentTable
from agents.store.attempts import AttemptGroups
from agents.store.audit import ToolCallTable
from agents.store.chat_moves import ChatMoves, MovedChats
from agents.store.conversations import Conversations, Place
from agents.store.github import GitHubRecords
from agents.store.incoming_updates import IncomingUpdates
from agents.store.kept_messages import KeptMessages
from agents.store.messages import ChatHistory
from agents.store.migrations import MIGRATIONS
from agents.store.open_decisions import OpenDecisions
from agents.store.open_turns import OpenTurns
from agents.store.outbox import OutboxTable
from agents.store.proposals import ProposalTable
from agents.store.repo_index import RepoIndex
from agents.store.reviews import TaskReviews
from agents.store.schedule_table import ScheduleTable
from agents.store.seen_events import SeenEvents
from agents.store.shown_buttons import ShownButtons
from agents.store.tasks import TaskTable
from agents.store.usage import UsageTable, start_of_day, start_of_month

__all__ = ["Store", "start_of_day", "start_of_month"]


async def _connect(path: Path) -> aiosqlite.Connection:
    db = await aiosqlite.connect(str(path), isolation_level=None)
    db.row_factory = aiosqlite.Row
    await db.execute("PRAGMA journal_mode=WAL")
    await db.execute("PRAGMA synchronous=NORMAL")
    await db.execute("PRAGMA foreign_keys=ON")
    await db.execute("PRAGMA busy_timeout=5000")
    return db


def private_file(path: Path) -> None:
    """The database file, readable by the bot's user alone (0600, its folder 0700 when made here), whatever the
    process's umask: it holds every chat's history and the tasks' audit. SQLite gives its -wal and -shm files the
    database file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)


class Store(ChatHistory, AttachmentTable, ProposalTable, TaskTable, ToolCallTable, UsageTable, OutboxTable):
    """The one place state lives. Use `await Store.open(path)`; every method is a short transaction."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        super().__init__(db)
        self.path = path
        self._conversation_starts = {}  # chat id → start of its current conversation ('' = always)
        self._kept = KeptMessages()  # the newest chat history read per conversation, kept up to date by our writes
        self._places: dict[int, Place] = {}  # topic conversation → its chat and thread (Store.conversations)
        self._bindings: dict[int, str | None] = {}  # conversation → its workspace, as read or bound
        self._moved_chats = MovedChats()  # groups upgraded to a supergroup: old chat id → new (Store.chat_moves)

    # ---- lifecycle -----------------------------------------------------------------------
    @classmethod
    async def open(cls, path: Path | str) -> Store:
        path = Path(path)
        if str(path) != ":memory:":
            private_file(path)
        store = cls(await _connect(path), path)
        await store._migrate()
        return store

    @classmethod
    async def open_copy(cls, source: Store) -> Store:
        """A new in-memory store holding a copy of everything `source` holds, schema version included: a fresh
        store made by copying an empty migrated one costs a fifteenth of running every migration again (the
        routing eval opens one per case it runs)."""
        path = Path(":memory:")
        db = await _connect(path)
        try:
            async with source._lock:
                await source._db.backup(db)
            store = cls(db, path)
            await store._migrate()  # nothing to do unless `source` was older than this code
        except BaseException:
            await db.close()
            raise
        return store

    async def close(self) -> None:
        await self._db.close()

    async def schema_version(self) -> int:
        return int((await self.rows("PRAGMA user_version"))[0][0])

    async def _migrate(self) -> None:
        """The scripts this database lacks, all in one transaction: a new database (a bot's first start, every
        test's) is made with one commit instead of one per script."""
        version = await self.schema_version()
        if version < len(MIGRATIONS):
            scripts = "\n".join(MIGRATIONS[version:])
            await self._db.executescript(f"BEGIN;\n{scripts}\nPRAGMA user_version={len(MIGRATIONS)};\nCOMMIT;")

    # ---- the other tables, each a class of its own on this connection --------------------
    @property
    def conversations(self) -> Conversations:
        """Forum topics as conversations of their own, and the workspace a conversation is bound to."""
        return Conversations(self, self._places, self._bindings)

    @property
    def chat_moves(self) -> ChatMoves:
        """Chats that moved to a new id (a group upgraded to a supergroup): what was kept under the old id follows."""
        return ChatMoves(self, self._moved_chats, self._kept, self._forget_chats)

    def _forget_chats(self, chat_ids: Iterable[int]) -> None:
        """What the store keeps in memory of these chats, read again from the store next time (a chat moved)."""
        for chat_id in chat_ids:
            self._conversation_starts.pop(chat_id, None)
            self._bindings.pop(chat_id, None)
            for key in [key for key, place in self._places.items() if place.chat_id == chat_id]:
                del self._places[key]

    @property
    def attempts(self) -> AttemptGroups:
        """Groups of tasks racing on one request (agents/work/attempts.py)."""
        return AttemptGroups(self)

    @property
    def schedules(self) -> ScheduleTable:
        """Work that starts by itself (agents/work/schedule_book.py fires it)."""
        return ScheduleTable(self)

    @property
    def open_turns(self) -> OpenTurns:
        """The chat turns under way (one left at start-up was cut short)."""
        return OpenTurns(self)

    @property
    def open_decisions(self) -> OpenDecisions:
        """The Merges and Discards under way (one left at start-up was cut short)."""
        return OpenDecisions(self)

    @property
    def incoming_updates(self) -> IncomingUpdates:
        """The updates pushed to the bot, kept from their arrival until long after they were handled."""
        return IncomingUpdates(self)

    @property
    def seen_events(self) -> SeenEvents:
        """The outside events already acted on (a repeat of one does nothing)."""
        return SeenEvents(self)

    @property
    def github(self) -> GitHubRecords:
        """Pull requests of tasks, GitHub webhook events and the GitHub threads that started tasks."""
        return GitHubRecords(self)

    @property
    def shown_buttons(self) -> ShownButtons:
        """The inline buttons the bot showed, per message: what a press may be."""
        return ShownButtons(self)

    @property
    def reviews(self) -> TaskReviews:
        """What a task's review page shows besides its diff: its verdict, its pictures."""
        return TaskReviews(self)

    @property
    def repo_index(self) -> RepoIndex:
        """The code index of agents/repo_map (a second set of tables on the same connection)."""
        return RepoIndex(self)
