"""The store's single statements and its transactions: statements issued together reach SQLite's thread together,
and none runs inside another caller's open transaction."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from agents.chat.turn_context import TurnContext
from agents.core.models import ChatMessage, InputMethod, Role
from agents.core.secrets_filter import SecretsFilter
from agents.store.database import Store
from agents.workspaces.folders import Workspaces
from tests.conftest import make_settings
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram


async def _held_thread(store: Store) -> threading.Event:
    """Block the store's SQLite thread on a statement until the returned event is set (a real SQL function that
    waits), so what the event loop queues meanwhile can be seen."""
    release = threading.Event()
    await store._db.create_function("held", 0, lambda: int(release.wait(10)))
    return release


async def test_statements_issued_together_are_queued_together_not_one_after_each_answer(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "state.db")
    try:
        release = await _held_thread(store)
        first = asyncio.create_task(store.rows("SELECT held()"))
        others = [asyncio.create_task(store.rows("SELECT ?", (n,))) for n in range(3)]
        await asyncio.sleep(0.05)  # every task has run up to its wait on the thread
        queued = store._db._tx.qsize()  # requests waiting behind the held one
        release.set()
        assert [row[0][0] for row in await asyncio.gather(*others)] == [0, 1, 2]
        assert (await first)[0][0] == 1
        assert queued == 3, "each statement waits for its own answer only, not for the ones before it to be answered"
    finally:
        await store.close()


async def test_a_statement_issued_while_a_transaction_is_open_runs_after_it_and_outside_it(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "state.db")
    try:
        inside = asyncio.Event()
        go_on = asyncio.Event()

        async def rolled_back() -> None:
            async with store.transaction() as db:
                await db.execute_fetchall(
                    "INSERT INTO messages (chat_id, role, content, created_at) VALUES (1, 'user', 'undone', '2026-01-01T00:00:00+00:00')"
                )
                inside.set()
                await go_on.wait()
                raise RuntimeError("roll it back")

        transaction = asyncio.create_task(rolled_back())
        await inside.wait()
        write = asyncio.create_task(
            store.write(
                "INSERT INTO messages (chat_id, role, content, created_at) VALUES (1, 'user', 'kept', '2026-01-01T00:00:00+00:00')"
            )
        )
        read = asyncio.create_task(store.rows("SELECT content FROM messages ORDER BY id"))
        await asyncio.sleep(0.05)
        assert not write.done() and not read.done(), "nothing else runs while the transaction is open"
        go_on.set()
        await asyncio.gather(transaction, return_exceptions=True)
        await write
        assert [row[0] for row in await read] == ["kept"], "the read saw neither the rolled-back row nor ran inside"
        assert [m.content for m in await store.all_messages(1)] == ["kept"], "the write was not rolled back with it"
        await store.add_message(ChatMessage(chat_id=1, role=Role.USER, content="after"))  # the store goes on as usual
    finally:
        await store.close()


async def test_recording_an_events_keys_is_one_statement_on_sqlites_thread(tmp_path: Path) -> None:
    """Every message's answer first records its update's keys (a repeat is dropped): one statement, one trip to the
    store's thread, not a transaction of BEGIN, an INSERT per key and COMMIT."""
    store = await Store.open(tmp_path / "state.db")
    try:
        statements: list[str] = []
        await store._db.set_trace_callback(statements.append)
        assert await store.seen_events.first_time(["telegram:update:1", "telegram:callback:a", "telegram:update:1"])
        assert len(statements) == 1, statements
        assert not await store.seen_events.first_time(["telegram:update:2", "telegram:callback:a"])
        assert await store.seen_events.first_time([]), "no keys: nothing to repeat"
        assert len(statements) == 2, "no statement for no keys"
        assert not await store.seen_events.first_time(["telegram:update:2"]), "recorded with the repeat it came in"
    finally:
        await store.close()


async def test_a_turns_history_note_is_read_with_the_questions_write_not_after_it(
    tmp_path: Path, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic
) -> None:
    """Building a turn's request: the conversation's latest note goes to the store's thread with the question's
    write and the context's reads (one hand-over), not after the write has been answered (a hand-over more before
    the model is asked). Seen as the statements queued while the thread is held."""
    (tmp_path / "ws").mkdir()
    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, tmp_path / "ws")
    settings.paths.database_path.parent.mkdir(parents=True, exist_ok=True)
    store = await Store.open(settings.paths.database_path)
    try:
        await store.add_message(ChatMessage(chat_id=1, role=Role.USER, content="earlier"))
        context = TurnContext(settings, store, None, Workspaces(tmp_path / "ws"), SecretsFilter())  # type: ignore[arg-type]  # never asked to summarise
        statements: list[str] = []
        await store._db.set_trace_callback(statements.append)
        release = await _held_thread(store)
        held = asyncio.create_task(store.rows("SELECT held()"))
        asked = ChatMessage(chat_id=1, role=Role.USER, content="now")
        storing = asyncio.create_task(store.add_message(asked))
        building = asyncio.create_task(
            context.request_messages(1, asked, "now", InputMethod.TEXT, None, [], {}, stored=storing)
        )
        await asyncio.sleep(0.05)  # everything the turn can issue before an answer is queued behind the held one
        marker = asyncio.create_task(store.rows("SELECT 'queued while held'"))
        release.set()
        await asyncio.gather(held, storing, marker)
        messages = await building
        assert messages[-1]["role"] == "user"
        queued = statements[: next(i for i, sql in enumerate(statements) if "queued while held" in sql)]
        assert any("FROM conversation_notes" in sql for sql in queued), queued
    finally:
        await store.close()


async def test_a_read_in_chunks_converts_plain_rows_and_keeps_transactions_out_until_it_is_done(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "state.db")
    try:
        for n in range(5):
            await store.write(
                "INSERT INTO messages (chat_id, role, content, created_at) VALUES (1, 'user', ?, '2026-01-01T00:00:00+00:00')",
                (f"m{n}",),
            )

        async def added_by_a_transaction() -> None:
            async with store.transaction() as db:
                await db.execute_fetchall(
                    "INSERT INTO messages (chat_id, role, content, created_at) VALUES (1, 'user', 'late', '2026-01-01T00:00:00+00:00')"
                )

        transactions: list[asyncio.Task[None]] = []
        no_transaction_open: list[bool] = []

        def convert(row: object) -> tuple[object, ...]:
            assert type(row) is tuple, "each row is handed over as a plain tuple, not a row object"
            if not transactions:  # the first chunk is in: a transaction asks to open before the next is fetched
                transactions.append(asyncio.create_task(added_by_a_transaction()))
            no_transaction_open.append(store._no_transaction.is_set())
            return (*row, "converted")

        rows = await store.converted_rows("SELECT content FROM messages ORDER BY id", (), convert, chunk=1)
        await transactions[0]
        assert rows == [(f"m{n}", "converted") for n in range(5)], "every chunk, in order, without the later row"
        assert no_transaction_open == [True] * 5, "the transaction opened only once the read was done"
        assert [m.content for m in await store.all_messages(1)][-1] == "late"
    finally:
        await store.close()
