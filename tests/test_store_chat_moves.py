"""A chat moved to a new id (a group upgraded to a supergroup), in the store: every table that names a chat is either
carried or kept by rule, the move is one transaction that may run any number of times, and the store's caches of both
chats follow it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from agents.core.models import ChatMessage, Delivery, Role, Schedule, Task, WorkerKind, utcnow
from agents.store.chat_moves import KEPT, MOVED
from agents.store.database import Store

OLD, NEW = -4242, -1004242
CHAT_COLUMNS = ("chat_id", "conversation")  # the names a chat's id goes by in the schema (`chats` is keyed by it)
CARRIED_APART = {"topics", "chats", "conversation_workspaces"}  # carried with rules of their own (a key may clash)


async def test_every_table_naming_a_chat_is_carried_or_kept_by_rule(store: Store) -> None:
    tables = [row[0] for row in await store.rows("SELECT name FROM sqlite_master WHERE type = 'table'")]
    naming = {"chats"}
    for table in tables:
        columns = {row[1] for row in await store.rows(f"PRAGMA table_info({table})")}
        if columns & set(CHAT_COLUMNS):
            naming.add(table)
    ruled = set(MOVED) | KEPT | CARRIED_APART
    assert naming - ruled == set(), "a new table names a chat: say in agents/store/chat_moves.py what a move does to it"
    assert ruled - naming == set(), "a table the move names is gone"


async def test_a_move_carries_the_chat_and_forgets_its_message_ids(store: Store) -> None:
    conversations = store.conversations
    await conversations.bind(OLD, "calc")
    said = await store.add_message(ChatMessage(chat_id=OLD, role=Role.USER, content="the codename is PELICAN"))
    shown = await store.add_message(
        ChatMessage(chat_id=OLD, role=Role.ASSISTANT, content="✔ Task #1", kind="task", ref_id=1)
    )
    await store.set_platform_message_id(shown.id or 0, 57)
    task = await store.add_task(
        Task(chat_id=OLD, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i", reply_to_message_id=5)
    )
    await store.update_task(task.stored_id, progress_message_id=6)
    owed = await store.add_delivery(Delivery(chat_id=OLD, kind="summary", task_id=task.id, text="done", reply_to=5))
    made = await store.schedules.add(
        Schedule(chat_id=OLD, workspace="calc", worker=WorkerKind.CODE, instructions="run", every_minutes=60)
    )
    await store.shown_buttons.record(OLD, 57, ["task:merge:1"])
    assert [m.content for m in await store.messages_after(NEW, 0)] == []  # the supergroup's (empty) history is read

    moved = await store.chat_moves.move(OLD, NEW)
    assert moved == {
        "messages": 2,
        "tasks": 1,
        "deliveries": 1,
        "schedules": 1,
        "chats": 1,
        "conversation_workspaces": 1,
    }
    assert [m.id for m in await store.messages_after(NEW, 0)] == [said.id, shown.id], "the kept history follows"
    assert await store.messages_after(OLD, 0) == []
    assert await store.conversations.bound_workspace(NEW) == "calc" and await conversations.bound_workspace(OLD) is None
    carried = await store.get_task(task.stored_id)
    assert carried is not None and carried.chat_id == NEW
    assert (carried.reply_to_message_id, carried.progress_message_id) == (None, None), "they name old messages"
    assert await store.message_by_platform_id(NEW, 57) is None, "a supergroup message 57 is another message"
    entry = await store.last_delivery(task.stored_id)
    assert entry is not None and (entry.chat_id, entry.reply_to, entry.id) == (NEW, None, owed.id)
    carried_schedule = await store.schedules.get(made.stored_id)
    assert carried_schedule is not None and carried_schedule.chat_id == NEW
    assert await store.shown_buttons.shown(OLD, 57, "task:merge:1") is False, "the old message's buttons stay there"
    assert await store.shown_buttons.shown(NEW, 57, "task:merge:1") is None
    assert await store.chat_moves.moved_to(OLD) == NEW and await store.chat_moves.moved_to(NEW) is None

    assert await store.chat_moves.move(OLD, NEW) == {}, "the second service message finds it moved"
    late = await store.add_message(ChatMessage(chat_id=OLD, role=Role.ASSISTANT, content="a late summary"))
    assert await store.chat_moves.move(OLD, NEW) == {"messages": 1, "chats": 1}, "what came late under the old id"
    assert [m.id for m in await store.messages_after(NEW, 0)] == [said.id, shown.id, late.id]


async def test_the_move_is_remembered_across_a_restart_and_a_newer_binding_of_the_supergroup_stays(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agentlab.db"
    store = await Store.open(path)
    try:
        await store.conversations.bind(OLD, "calc")
        await store.conversations.bind(NEW, "site")  # bound in the supergroup after the upgrade
        await store.start_new_conversation(NEW)
        await store.add_message(ChatMessage(chat_id=OLD, role=Role.USER, content="before /new in the supergroup"))
        await store.write(
            "UPDATE messages SET created_at = ?", ((utcnow() - timedelta(hours=1)).isoformat(),)
        )  # said in the group before the supergroup started afresh
        await store.chat_moves.move(OLD, NEW)
    finally:
        await store.close()
    store = await Store.open(path)
    try:
        assert await store.chat_moves.moved_to(OLD) == NEW
        assert await store.conversations.bound_workspace(NEW) == "site"
        assert await store.messages_after(NEW, 0) == [], "the supergroup's /new stands"
        assert len(await store.all_messages(NEW)) == 1
    finally:
        await store.close()
