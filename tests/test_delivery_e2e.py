"""Finished work is never lost to a Telegram 5xx: summaries, proposals and answers are retried, kept and re-sent."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest

from agents.core.models import Caller, TaskStatus
from agents.core.settings import Settings
from agents.core.text import utf16_len
from agents.store import delivery
from tests.conftest import USER_ID, BotHarness, make_settings, running_bot, start_bot, text_now
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.attachments import tiny_png
from tests.support.tasks import ended, until

# quick_tests: what these tests check is not the verdict, so calc's tests are one quick check (tests/conftest.py)
pytestmark = pytest.mark.quick_tests


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery, "RETRY_DELAYS", (0.05, 0.05))
    monkeypatch.setattr(delivery, "FLUSH_INTERVAL", 3600.0)  # only the start-up pass, unless a test asks
    monkeypatch.setattr(delivery, "FIRST_RETRY", 0.05)


def text_has(*words: str):
    return lambda params: all(w in str(params.get("text", "")) for w in words)


def fix_calc(model: RoleScript) -> None:
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )


def held_until(go: threading.Event, reply: dict):
    """A worker's turn that answers `reply` once `go` is set (the task keeps running until then)."""

    def answer(body: dict) -> dict:
        go.wait(30)
        return reply

    return answer


def summaries(bot: BotHarness, task_id: int) -> list:
    return [
        m for m in bot.tg.messages(USER_ID) if f"Task #{task_id} done" in (m.text or "") and "Files:" in (m.text or "")
    ]


async def test_a_502_on_the_summary_keeps_the_task_completed_and_delivers_it(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    fix_calc(model)
    bot.tg.fail_next("sendMessage", error_code=502, when=text_has("Task #1 done", "Files:"))
    await bot.runtime.crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", "fix add()", background=True)
    task = await ended(bot, 1)
    assert task.status is TaskStatus.COMPLETED and task.error is None, task.error
    [summary] = await bot.tg.await_for(lambda: summaries(bot, 1) or None)
    assert summary.callback_data == ["task:merge:1", "task:diff:1", "task:discard:1"]


async def summary_owed_by_a_stopped_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root) -> Settings:
    """A bot whose task #1 completed while Telegram refused its summary (502), stopped with the summary still in its
    outbox; the settings to start it again with."""
    from telegram_bot.app import stop_application

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    model = RoleScript()
    fake_anthropic.handler = model
    fix_calc(model)
    fake_telegram.fail_next("sendMessage", error_code=502, times=1000, when=text_has("Task #1 done", "Files:"))
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        await bot.runtime.crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", "fix add()", background=True)
        assert (await ended(bot, 1)).status is TaskStatus.COMPLETED
        while len(await bot.runtime.store.undelivered(delivery.MAX_ATTEMPTS)) != 1:
            await asyncio.sleep(0.05)
        assert summaries(bot, 1) == []
    finally:
        await stop_application(bot.app)
    return settings


async def test_an_undelivered_summary_goes_out_after_a_restart_and_task_n_resends_it(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    settings = await summary_owed_by_a_stopped_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    fake_telegram.clear_faults()  # Telegram is well again; the bot restarts
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        [summary] = await fake_telegram.await_for(lambda: summaries(bot, 1) or None)
        assert summary.callback_data == ["task:merge:1", "task:diff:1", "task:discard:1"]
        assert "Fixed add()." in summary.text
        while await bot.runtime.store.undelivered(delivery.MAX_ATTEMPTS):  # marked delivered once Telegram answered
            await asyncio.sleep(0.05)

        fake_telegram.send_command(USER_ID, "/task 1")
        again = await fake_telegram.await_for(lambda: summaries(bot, 1)[1:] or None)
        assert again[0].callback_data == summary.callback_data
        fake_telegram.press_button(USER_ID, again[0].message_id, "task:merge:1")
        await fake_telegram.await_for(lambda: "a + b" in text_now(workspace_root / "calc" / "calc.py"))
    finally:
        await stop_application(bot.app)


async def test_a_summary_owed_at_start_up_is_retried_soon_while_telegram_is_still_unwell(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    """A restart's first pass over the outbox meets Telegram's 502 twice: the summary still goes out at the third pass,
    seconds later, not a whole FLUSH_INTERVAL (an hour here) later."""
    from telegram_bot.app import stop_application

    settings = await summary_owed_by_a_stopped_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    fake_telegram.clear_faults()
    fake_telegram.fail_next("sendMessage", error_code=502, times=2, when=text_has("Task #1 done", "Files:"))
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        [summary] = await fake_telegram.await_for(lambda: summaries(bot, 1) or None)
        assert "Fixed add()." in summary.text
    finally:
        await stop_application(bot.app)


async def test_a_502_on_a_proposal_keeps_it_and_delivers_it_with_buttons(bot: BotHarness) -> None:
    model = RoleScript()
    bot.claude.handler = model
    model.add("research", claude_says.text("## Summary\nAdd logging.\n## Plan\n1. import logging"))
    bot.tg.fail_next("sendMessage", error_code=502, times=2, when=text_has("Proposal #1"))
    await bot.runtime.crew.starts.start_research(Caller(chat_id=USER_ID), "group-therapy", "improve logging")
    task = await ended(bot, 1)
    assert task.status is TaskStatus.COMPLETED, task.error
    shown = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "Proposal #1" in (m.text or "")), None)
    )
    assert shown.callback_data == ["proposal:approve:1", "proposal:reject:1"]


async def test_a_500_on_a_direct_answer_does_not_lose_it(bot: BotHarness) -> None:
    bot.claude.script(claude_says.text("The answer you asked for."))
    bot.tg.fail_next("sendMessage", error_code=500, when=text_has("The answer you asked for."))
    bot.say("a question")
    answer = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if m.text == "The answer you asked for."), None)
    )
    assert answer.reply_to_message_id is not None
    assert not any("went wrong" in (m.text or "") for m in bot.tg.messages(USER_ID))

    async def on_record() -> int:  # a message answered is on record no more: a restart would not call it lost
        return int((await bot.runtime.store.rows("SELECT count(*) FROM open_turns"))[0][0])

    await until(lambda: _none(on_record))


async def _none(count: Callable[[], Awaitable[int]]) -> bool:
    return await count() == 0


async def test_a_chat_that_cannot_be_reached_does_not_hold_back_the_others(tmp_path) -> None:
    from agents.store.database import Store

    class Notifier:
        def __init__(self) -> None:
            self.sent: list[tuple[int, str]] = []

        async def send(self, chat_id, markdown, *, buttons=None, reply_to=None):
            if chat_id == 1:
                raise ConnectionError("Forbidden: bot was blocked by the user")
            self.sent.append((chat_id, markdown))
            return 1

    store = await Store.open(tmp_path / "db.sqlite")
    notifier = Notifier()
    outbox = delivery.Deliveries(store, notifier, retry_delays=())
    assert not await outbox.deliver(1, "to the blocked chat")
    assert not await outbox.deliver(1, "later, same chat")
    for chat in (2, 3):
        await store.add_delivery(delivery.Delivery(chat_id=chat, kind="answer", text=f"owed to {chat}"))
    assert await outbox.flush() == 2
    assert notifier.sent == [(2, "owed to 2"), (3, "owed to 3")]
    assert [d.text for d in await store.undelivered(delivery.MAX_ATTEMPTS)] == [
        "to the blocked chat",
        "later, same chat",
    ]
    await store.close()


async def test_marking_a_sent_message_delivered_is_off_the_senders_path_and_never_sends_it_twice(tmp_path) -> None:
    from agents.store.database import Store

    class SlowToMarkStore(Store):  # the real store, its "delivered" write held until the test lets it go
        gate = asyncio.Event()

        async def delivery_done(self, delivery_id: int) -> None:
            await self.gate.wait()
            await super().delivery_done(delivery_id)

    class Notifier:
        def __init__(self) -> None:
            self.sent: list[str] = []

        async def send(self, chat_id, markdown, *, buttons=None, reply_to=None):
            self.sent.append(markdown)
            return len(self.sent)

    store = await SlowToMarkStore.open(tmp_path / "db.sqlite")
    notifier = Notifier()
    outbox = delivery.Deliveries(store, notifier, retry_delays=())
    assert await asyncio.wait_for(outbox.deliver(7, "the answer", kind="answer"), timeout=5) == 1
    assert [d.text for d in await store.undelivered(delivery.MAX_ATTEMPTS)] == ["the answer"]  # not marked yet
    assert await outbox.flush() == 0 and notifier.sent == ["the answer"], "a send in progress is not sent again"
    SlowToMarkStore.gate.set()
    await outbox.close()  # waits for the write
    assert await store.undelivered(delivery.MAX_ATTEMPTS) == []
    assert notifier.sent == ["the answer"]
    await store.close()


async def test_a_summary_outlasts_a_telegram_outage_of_any_length(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telegram answers 502 to every send for longer than MAX_ATTEMPTS tries (the flusher's passes: 1 s, 2 s, 4 s …
    then every 30 s, so 50 tries came after about 22 minutes, and the summary was given up for good, at the next
    start too). An outage is waited out; only a refusal of the message itself counts. Time is compressed here (a pass
    every 10 ms)."""
    from telegram_bot.app import stop_application

    monkeypatch.setattr(delivery, "RETRY_DELAYS", (0.01, 0.01))
    monkeypatch.setattr(delivery, "FLUSH_INTERVAL", 0.01)
    monkeypatch.setattr(delivery, "FIRST_RETRY", 0.01)
    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    model = RoleScript()
    fake_anthropic.handler = model
    fix_calc(model)
    outage = delivery.MAX_ATTEMPTS + 10
    fake_telegram.fail_next("sendMessage", error_code=502, times=outage, when=text_has("Task #1 done", "Files:"))
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        await bot.runtime.crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", "fix add()", background=True)
        assert (await ended(bot, 1)).status is TaskStatus.COMPLETED
        summary = await bot.tg.await_for(lambda: next(iter(summaries(bot, 1)), None), timeout=60)
        tries = [c for c in fake_telegram.calls("sendMessage") if "Task #1 done" in str(c.params)]
        assert len(tries) == outage + 1 and summary
    finally:
        await stop_application(bot.app)


async def test_an_answer_owed_is_off_the_record_of_cut_short_messages(bot: BotHarness) -> None:
    """Telegram refuses the answer (502) while the bot retries it: the answer is in the outbox, and its message is no
    longer on the record of messages a stop or a crash cut short. A SIGKILL then sent the answer after the restart,
    and also told the chat "that answer was lost" (the record ended only once the inline tries were over)."""
    answer = "The answer you asked for."
    bot.claude.script(claude_says.text(answer))
    bot.tg.fail_next("sendMessage", error_code=502, times=2, when=text_has(answer))  # the third inline try goes
    bot.say("a question")
    store = bot.runtime.store

    async def owed_and_refused() -> bool:
        owed = await store.undelivered(delivery.MAX_ATTEMPTS)
        refused = [c for c in bot.tg.calls("sendMessage") if answer in str(c.params)]
        return bool(owed) and owed[0].text == answer and len(refused) >= 1

    await until(owed_and_refused, timeout=30)
    assert await store.open_turns.cut_short() == [], "the message is answered: nothing to tell at the next start"
    await bot.tg.await_for(lambda: any(m.text == answer for m in bot.tg.messages(USER_ID)) or None, timeout=30)


async def test_a_task_interrupted_once_is_announced_once_not_at_every_later_start(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo
) -> None:
    """A stop interrupts task #1; the next start tells its chat, with Resume / Discard; a start after that does not
    tell it again (every start did, for up to 20 interrupted tasks, so older ones were never told at all)."""
    model = RoleScript()
    go = threading.Event()
    model.add("code", held_until(go, claude_says.text("Done.")))
    try:
        async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
            bot.claude.handler = model
            await bot.runtime.crew.races.start_task(
                Caller(chat_id=USER_ID), "group-therapy", "code", "Tidy app.py.", background=True
            )
            await bot.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=20)
    finally:
        go.set()

    def notices() -> list:
        return [m for m in fake_telegram.messages(USER_ID) if "while task #1 was running" in (m.text or "")]

    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo):
        await fake_telegram.await_for(lambda: notices() or None)
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as again:
        await again.runtime.deliveries.flush()  # whatever the outbox owes is out
    assert len(notices()) == 1, f"task #1's interruption was announced {len(notices())} times"


@pytest.mark.settings(progress_interval_seconds=0.1, progress_refresh_seconds=0.2)
async def test_a_progress_message_the_user_deleted_is_sent_again_not_edited_forever(bot: BotHarness) -> None:
    """The user deletes a running task's progress message. Each edit was refused ("message to edit not found") for
    the task's whole life, and the chat had no steps and no Cancel any more; a new progress message takes its
    place."""
    model = RoleScript()
    bot.claude.handler = model
    go = threading.Event()
    model.add("code", held_until(go, claude_says.text("Done.")))
    try:
        await bot.runtime.crew.races.start_task(
            Caller(chat_id=USER_ID), "group-therapy", "code", "Tidy app.py.", background=True
        )
        await bot.tg.await_for(lambda: len(model.requests["code"]) == 1, timeout=20)
        first = (await bot.runtime.store.get_task(1)).progress_message_id
        assert first is not None
        bot.tg.message(USER_ID, first).deleted = True  # the user deleted it
        store = bot.runtime.store

        async def replaced() -> int | None:
            now = (await store.get_task(1)).progress_message_id
            return now if now not in (None, first) else None

        second = await until(replaced, timeout=20)
        await asyncio.sleep(1.0)  # a few more of the ticker's edits
        refused = [r for r in bot.tg.refused if r.method == "editMessageText" and "to edit not found" in r.description]
        assert len(refused) == 1, f"the deleted progress message was edited {len(refused)} times, each refused"
        shown = bot.tg.message(USER_ID, second)
        assert "task:cancel:1" in str(shown.reply_markup), "the new progress message carries Cancel"
    finally:
        go.set()
    await ended(bot, 1)


async def test_a_5xx_on_the_second_part_of_a_long_answer_sends_the_first_part_once(bot: BotHarness) -> None:
    """An answer of two messages; Telegram answers 502 to the second one, once. The retry sent the whole answer
    again, so the chat had its first part twice; it now sends the rest."""
    long = "\n\n".join(f"Paragraph {i}: " + "word " * 150 for i in range(8))  # ~6,100 characters: two messages
    bot.claude.script(claude_says.text(long))
    bot.tg.fail_next("sendMessage", error_code=502, when=text_has("Paragraph 7:"))
    bot.say("a long question")
    await bot.tg.await_for(lambda: any("Paragraph 7:" in (m.text or "") for m in bot.tg.messages(USER_ID)) or None)

    async def delivered() -> bool:  # Telegram has the message before the bot has its answer and writes it down
        return not await bot.runtime.store.undelivered(delivery.MAX_ATTEMPTS)

    await until(delivered)
    await bot.runtime.deliveries.settled()
    texts = [m.text or "" for m in bot.tg.messages(USER_ID)]
    assert [t for t in texts if "Paragraph 0:" in t] == [next(t for t in texts if "Paragraph 0:" in t)]
    assert sum("Paragraph 7:" in t for t in texts) == 1


async def test_a_reply_to_a_proposal_the_flusher_delivered_is_a_reply_to_that_proposal(bot: BotHarness) -> None:
    """The proposal meets a 502 at each of its inline tries and goes out at the flusher's next pass. Only the inline
    path recorded which chat message shows it, so the user's reply to it read as a reply to "your earlier message"."""
    model = RoleScript()
    bot.claude.handler = model
    model.add("research", claude_says.text("## Summary\nAdd logging.\n## Plan\n1. import logging"))
    bot.tg.fail_next("sendMessage", error_code=502, times=3, when=text_has("Proposal #1"))
    await bot.runtime.crew.starts.start_research(Caller(chat_id=USER_ID), "group-therapy", "improve logging")

    async def owed_proposal() -> bool:
        return any("Proposal #1" in d.text for d in await bot.runtime.store.undelivered(delivery.MAX_ATTEMPTS))

    await until(owed_proposal, timeout=60)
    await bot.tg.await_for(lambda: len(bot.tg.refused) >= 3 or None, timeout=30)  # the three inline tries

    async def flushed() -> bool:  # the flusher's pass (again, while the last inline try still holds the entry)
        await bot.runtime.deliveries.flush()
        return any("Proposal #1" in (m.text or "") for m in bot.tg.messages(USER_ID))

    await until(flushed, timeout=30)
    shown = next(m for m in bot.tg.messages(USER_ID) if "Proposal #1" in (m.text or ""))
    model.add("orchestrator", claude_says.text("Noted."))
    bot.tg.send_text(USER_ID, "why logging?", reply_to_message_id=shown.message_id)
    await bot.tg.await_for(lambda: any(m.text == "Noted." for m in bot.tg.messages(USER_ID)) or None)
    asked = str(model.requests["orchestrator"][-1]["messages"])
    assert "replying to: proposal #1" in asked, asked[-600:]


async def test_captions_are_cut_to_telegrams_limit_in_utf16_units_so_a_picture_is_never_refused(
    bot: BotHarness,
) -> None:
    """Telegram counts a caption's 1024 in UTF-16 code units (an emoji is two): 600 emoji are 1200 units, under 1000
    Python characters, and a cut by characters had the screenshot refused as "caption is too long"."""
    caption = "Task #1: " + "😀" * 600
    n = bot.runtime.notifier
    await n.send_photo(USER_ID, tiny_png(), caption=caption)
    await n.send_document(USER_ID, "task-1.log", b"a log\n", caption=caption)
    await n.send_album(USER_ID, [(caption, tiny_png()), (caption, tiny_png())])
    assert not [r for r in bot.tg.refused if "too long" in r.description], bot.tg.refused
    shown = [m for m in bot.tg.messages(USER_ID) if m.kind in ("photo", "document")]
    assert len(shown) == 4
    for message in shown:
        assert message.caption is not None and message.caption.startswith("Task #1: 😀")
        assert utf16_len(message.caption) in (1023, 1024)  # never half an emoji


@pytest.mark.parametrize(
    ("code", "description"),
    [
        (403, "Forbidden: bot was blocked by the user"),
        (403, "Forbidden: bot was kicked from the group chat"),
        (400, "Bad Request: chat not found"),
    ],
)
async def test_a_summary_the_chat_refuses_is_kept_uncounted_and_sent_when_the_chat_is_heard_from(
    bot: BotHarness, code: int, description: str
) -> None:
    """A chat that refuses the bot (blocked, kicked, not found) is no fault of the summary: it is not counted toward
    giving it up (it was given up after MAX_ATTEMPTS passes, and the user who came back never got it), the chat is
    not tried again at every pass, and when the user writes again the summary goes out unasked."""
    model = RoleScript()
    bot.claude.handler = model
    fix_calc(model)
    bot.tg.fail_next(
        "sendMessage", error_code=code, description=description, times=10_000, when=text_has("Task #1 done")
    )
    await bot.runtime.crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", "fix add()", background=True)
    assert (await ended(bot, 1)).status is TaskStatus.COMPLETED
    store = bot.runtime.store

    async def refused_once() -> bool:
        rows = await store.rows("SELECT last_error FROM deliveries WHERE kind = 'summary'")
        return bool(rows) and rows[0][0] is not None

    await until(refused_once, timeout=30)
    refusals = len(bot.tg.refused)
    for _ in range(3):  # the flusher's passes leave the chat alone until it is heard from
        assert await bot.runtime.deliveries.flush() == 0
    assert len(bot.tg.refused) == refusals
    [[attempts]] = await store.rows("SELECT attempts FROM deliveries WHERE kind = 'summary'")
    assert attempts == 0, "a refusal by the chat counted toward giving the summary up"

    bot.tg.clear_faults()  # the user unblocks the bot (or adds it back) and writes
    model.add("orchestrator", claude_says.text("Hello again."))
    bot.say("hi, anything new?")
    [summary] = await bot.tg.await_for(lambda: summaries(bot, 1) or None, timeout=30)
    assert summary.callback_data[:1] == ["task:merge:1"]
    await bot.tg.await_for(lambda: any(m.text == "Hello again." for m in bot.tg.messages(USER_ID)) or None)


def test_sends_wait_for_a_slow_telegrams_answer_longer_than_ptbs_five_seconds(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import build_application

    app = build_application(make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root))
    assert app.bot.request.read_timeout is not None and app.bot.request.read_timeout >= 30


async def test_a_summary_whose_answer_times_out_is_not_sent_again_at_once(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telegram takes the summary but its answer comes after the bot's read timeout (shortened here from 30 s): the
    send may well be in the chat, so it is not tried again at once (it was, at the next inline try, and showed twice)
    but after TIMED_OUT_RETRY, when it can still show twice: the Bot API cannot send a message only once."""
    import telegram_bot.app

    monkeypatch.setattr(telegram_bot.app, "SEND_TIMEOUT", 2.0, raising=False)
    monkeypatch.setattr(delivery, "TIMED_OUT_RETRY", 3600.0, raising=False)
    async with running_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) as bot:
        model = RoleScript()
        bot.claude.handler = model
        fix_calc(model)
        release = bot.tg.hold_answer("sendMessage", text_has("Task #1 done", "Files:"))
        store = bot.runtime.store
        try:
            await bot.runtime.crew.races.start_task(
                Caller(chat_id=USER_ID), "calc", "code", "fix add()", background=True
            )
            await ended(bot, 1)

            async def timed_out() -> bool:
                rows = await store.rows("SELECT last_error FROM deliveries WHERE kind = 'summary'")
                return bool(rows) and "TimedOut" in str(rows[0][0])

            await until(timed_out, timeout=30)
            for _ in range(10):  # the inline tries' delays (50 ms) pass, and the flusher's passes leave it for later
                await asyncio.sleep(0.05)
                await bot.runtime.deliveries.flush()
        finally:
            release.set()
        await bot.runtime.deliveries.settled()
        assert len(summaries(bot, 1)) == 1
        assert [d.kind for d in await store.undelivered(delivery.MAX_ATTEMPTS)] == ["summary"]  # tried again later


OTHER_USER = 1002


@pytest.mark.settings(allowed_user_ids=f"{USER_ID},{OTHER_USER}")
async def test_a_flood_wait_on_one_chats_summary_holds_that_chat_only(bot: BotHarness) -> None:
    """Telegram answers chat A's summary with 429 retry_after (minutes in the field): chat B's question, asked
    meanwhile, is answered at once (PTB's rate limiter paused every chat's calls for the wait, up to 5 times), and
    A's summary is kept, uncounted, and not tried before the wait ends."""
    model = RoleScript()
    bot.claude.handler = model
    fix_calc(model)
    bot.tg.fail_next("sendMessage", error_code=429, retry_after=300, when=text_has("Task #1 done", "Files:"))
    await bot.runtime.crew.races.start_task(Caller(chat_id=USER_ID), "calc", "code", "fix add()", background=True)
    await bot.tg.await_for(lambda: any(r.error_code == 429 for r in bot.tg.refused) or None, timeout=60)
    model.add("orchestrator", claude_says.text("Answer for B."))
    bot.tg.send_text(OTHER_USER, "a quick question")
    await bot.tg.await_for(lambda: any(m.text == "Answer for B." for m in bot.tg.messages(OTHER_USER)) or None)
    store = bot.runtime.store

    async def owed_uncounted() -> bool:
        rows = await store.rows("SELECT attempts, last_error FROM deliveries WHERE kind = 'summary'")
        return bool(rows) and rows[0][1] is not None

    await until(owed_uncounted, timeout=30)
    calls = len(bot.tg.calls("sendMessage"))
    assert await bot.runtime.deliveries.flush() == 0
    assert len(bot.tg.calls("sendMessage")) == calls, "the flooded chat was tried again before its wait ended"
    [[attempts]] = await store.rows("SELECT attempts FROM deliveries WHERE kind = 'summary'")
    assert attempts == 0 and not summaries(bot, 1)


@pytest.mark.settings(allowed_user_ids=f"{USER_ID},{OTHER_USER}")
async def test_a_flood_wait_on_a_progress_edit_skips_that_chats_edits_and_holds_no_other_chat(bot: BotHarness) -> None:
    """Edits are what Telegram floods first: a 429 on one chat's progress edit skips that edit and the next ones in the
    wait (a later step shows everything), where PTB's rate limiter held every chat's replies for the wait."""
    from telegram.error import RetryAfter

    model = RoleScript()
    bot.claude.handler = model
    n = bot.runtime.notifier
    mid = await n.send(USER_ID, "⏳ progress")
    assert mid is not None
    bot.tg.fail_next("editMessageText", error_code=429, retry_after=300)
    with pytest.raises(RetryAfter):
        await n.edit(USER_ID, mid, "⏳ progress, a step later")
    edits = len(bot.tg.calls("editMessageText"))
    with pytest.raises(RetryAfter):  # still in the wait: skipped without troubling Telegram
        await n.edit(USER_ID, mid, "⏳ progress, two steps later")
    assert len(bot.tg.calls("editMessageText")) == edits
    model.add("orchestrator", claude_says.text("Answer for B."))
    bot.tg.send_text(OTHER_USER, "a quick question")
    await bot.tg.await_for(lambda: any(m.text == "Answer for B." for m in bot.tg.messages(OTHER_USER)) or None)
