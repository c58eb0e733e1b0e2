"""`Store.open_copy`: a new in-memory store holding what another holds, without running the migrations again."""

from __future__ import annotations

from agents.core.models import ChatMessage, Role
from agents.store.database import Store
from agents.store.migrations import MIGRATIONS


async def test_a_copy_holds_the_schema_and_rows_and_is_a_store_of_its_own() -> None:
    source = await Store.open(":memory:")
    copy = None
    try:
        await source.add_message(ChatMessage(chat_id=1, role=Role.USER, content="kept"))
        copy = await Store.open_copy(source)
        assert await copy.schema_version() == len(MIGRATIONS)
        assert [m.content for m in await copy.all_messages(1)] == ["kept"]
        await copy.add_message(ChatMessage(chat_id=1, role=Role.USER, content="only in the copy"))
        assert [m.content for m in await source.all_messages(1)] == ["kept"], "the source is left as it was"
        assert (await copy.rows("PRAGMA foreign_keys"))[0][0] == 1, "the copy's connection is set up like any store's"
    finally:
        await source.close()
        if copy is not None:
            await copy.close()
