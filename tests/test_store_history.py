"""The store keeps each conversation's newest messages in memory (agents/store/kept_messages.py): what it answers from them
is always what the database holds, through writes, refusals, /new and reads racing writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.core.models import Attachment, ChatMessage, Role
from agents.store.database import Store

CHAT = 42


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = await Store.open(tmp_path / "bot.db")
    yield store
    await store.close()


def said(text: str, role: Role = Role.USER, **fields: object) -> ChatMessage:
    return ChatMessage(chat_id=CHAT, role=role, content=text, **fields)


async def from_disk(store: Store, after_id: int = 0) -> list[ChatMessage]:
    """What a store with nothing kept answers (another Store on the same file)."""
    other = await Store.open(store.path)
    try:
        return await other.messages_after(CHAT, after_id)
    finally:
        await other.close()


async def test_kept_messages_follow_every_write(store: Store, tmp_path: Path) -> None:
    await store.add_message(said("one"))
    assert [m.content for m in await store.messages_after(CHAT, 0)] == ["one"]  # read, and kept from now on
    picture = Attachment(
        chat_id=CHAT, kind="image", name="p.png", media_type="image/png", path="p.png", size=3, tokens=10
    )
    second = await store.add_message(said("two", attachments=[picture]))
    await store.add_message(said("an answer", Role.ASSISTANT))
    await store.set_platform_message_id(second.id or 0, 777)
    await store.refuse_attachment(second.attachments[0].id or 0, "too big")
    kept = await store.messages_after(CHAT, 0)
    assert [m.model_dump() for m in kept] == [m.model_dump() for m in await from_disk(store)]
    assert kept[1].platform_message_id == 777 and kept[1].attachments[0].refused == "too big"
    second.content = "changed by its caller"  # the kept copy is the store's own
    assert (await store.messages_after(CHAT, 0))[1].content == "two"
    assert [m.content for m in await store.messages_after(CHAT, second.id or 0)] == ["an answer"]
    await store.start_new_conversation(CHAT)
    assert await store.messages_after(CHAT, 0) == []
    await store.add_message(said("after /new"))
    assert [m.content for m in await store.messages_after(CHAT, 0)] == ["after /new"]


async def test_a_read_racing_a_write_is_not_kept(store: Store) -> None:
    await store.add_message(said("one"))
    read = asyncio.create_task(store.messages_after(CHAT, 0))
    write = asyncio.create_task(store.add_message(said("two")))
    await asyncio.gather(read, write)
    assert [m.content for m in await store.messages_after(CHAT, 0)] == ["one", "two"]
    picture = Attachment(chat_id=CHAT, kind="image", name="p.png", media_type="image/png", path="p.png", size=3)
    write = asyncio.create_task(store.add_message(said("with a picture", attachments=[picture])))
    await asyncio.sleep(0)  # the write has begun (its message row is on its way, its attachment row not yet)
    await store.messages_after(CHAT, 0)
    await write
    kept = await store.messages_after(CHAT, 0)
    assert [m.model_dump() for m in kept] == [m.model_dump() for m in await from_disk(store)]
    writes = [store.add_message(said(f"w{i}")) for i in range(5)]  # writes finishing in any order
    await asyncio.gather(*writes)
    kept = await store.messages_after(CHAT, 0)
    assert [m.id for m in kept] == sorted(m.id for m in kept)
    assert [m.model_dump() for m in kept] == [m.model_dump() for m in await from_disk(store)]
