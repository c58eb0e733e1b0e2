"""Seed a bot's database with what a long-serving bot holds: thousands of messages, tasks and task events.

The overhead bench's populated case: a turn whose cost grows with the store (a query scanning a table, a read of
everything stored) shows up as the gap between the fresh and the populated figures. The rows go in through SQL in
a few `executemany` batches (the store's own schema, so they are what the bot would have written), as the store's
one-row-at-a-time API would take minutes for this many.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agents.store.database import Store

CHATS = 60  # conversations besides the measured one
MESSAGES_PER_CHAT = 60
TASKS = 600
EVENTS_PER_TASK = 12
TOOL_CALLS_PER_TASK = 10
USAGE_PER_TASK = 8
OLD_MESSAGES_OF_MEASURED_CHAT = 1200  # the measured chat's earlier conversations (before a /new)


async def migrated(path: Path) -> None:
    """Create the database with the store's schema (the bot opens it afterwards)."""
    store = await Store.open(path)
    await store.close()


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def populate(path: Path, measured_chat: int) -> dict[str, int]:
    """Fill the database at `path` (migrated, not open elsewhere); the rows added per table."""
    now = datetime.now(UTC)
    older = now - timedelta(hours=6)
    chats = [measured_chat, *range(5000, 5000 + CHATS)]
    db = sqlite3.connect(path)
    try:
        db.executemany(
            "INSERT OR IGNORE INTO chats (id, created_at, conversation_started_at) VALUES (?, ?, ?)",
            [
                (chat, _iso(older), _iso(now - timedelta(minutes=5)) if chat == measured_chat else None)
                for chat in chats
            ],
        )
        messages = [
            (
                chat,
                "user" if i % 2 == 0 else "assistant",
                f"message {i} of chat {chat}: " + "words " * 40,
                "text",
                60,
                "chat",
                None,
                100 + i,
                _iso(older + timedelta(seconds=i)),
            )
            for chat in chats[1:]
            for i in range(MESSAGES_PER_CHAT)
        ]
        messages += [
            (
                measured_chat,
                "user" if i % 2 == 0 else "assistant",
                f"earlier message {i}: " + "words " * 40,
                "text",
                60,
                "task" if i % 20 == 5 else "chat",
                i // 20 + 1 if i % 20 == 5 else None,
                100 + i,
                _iso(older + timedelta(seconds=i)),
            )
            for i in range(OLD_MESSAGES_OF_MEASURED_CHAT)
        ]
        db.executemany(
            "INSERT INTO messages (chat_id, role, content, input_method, tokens, kind, ref_id, platform_message_id, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            messages,
        )
        statuses = ("completed", "failed", "cancelled", "completed", "rejected")
        task_rows = [
            (
                chats[t % len(chats)],
                "calc",
                "code",
                f"task {t}",
                "instructions " * 30,
                statuses[t % len(statuses)],
                0,
                1,
                f"agentlab/task-{t}",
                "main",
                "summary " * 50,
                chats[t % len(chats)],
                "someone",
                _iso(older + timedelta(seconds=t)),
            )
            for t in range(TASKS)
        ]
        db.executemany(
            "INSERT INTO tasks (chat_id, workspace, worker, title, instructions, status, priority, background, branch, "
            "base_branch, result, user_id, user_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            task_rows,
        )
        task_ids = [row[0] for row in db.execute("SELECT id FROM tasks ORDER BY id")]
        db.executemany(
            "INSERT INTO task_events (task_id, kind, detail, created_at) VALUES (?, ?, ?, ?)",
            [(t, "step", f"step {e} of task {t}", _iso(older)) for t in task_ids for e in range(EVENTS_PER_TASK)],
        )
        db.executemany(
            "INSERT INTO tool_calls (chat_id, task_id, agent, tool, arguments, result_chars, duration_ms, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (None, t, "code", "bash", '{"command": "pytest -q"}', 400, 120, _iso(older))
                for t in task_ids
                for _ in range(TOOL_CALLS_PER_TASK)
            ],
        )
        db.executemany(
            "INSERT INTO usage (chat_id, task_id, user_id, agent, model, input_tokens, output_tokens, "
            "cache_creation_input_tokens, cache_read_input_tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (None, t, None, "code", "claude", 9000, 400, 0, 8000, _iso(older))
                for t in task_ids
                for _ in range(USAGE_PER_TASK)
            ],
        )
        db.commit()
        counts = {
            table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("messages", "tasks", "task_events", "tool_calls", "usage")
        }
    finally:
        db.close()
    return counts
