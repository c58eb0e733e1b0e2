"""Delivery that survives Telegram's bad moments: what the bot owes a chat is stored first, then sent.

A summary, a proposal or an answer goes into the store's `deliveries` outbox before the first try; a failed send (a 5xx,
a timeout) is retried with backoff, and what is still undelivered stays in the outbox and is sent again by a background
flusher and after a restart, for as long as Telegram is unavailable (a message refused for itself is given up after
MAX_ATTEMPTS tries). The task's status never depends on it. The flusher's first pass
runs at start-up, so what finished while the bot was down (or could not be delivered before it stopped) goes out at
once; while a pass leaves something undelivered, the next one comes sooner than the regular interval (1 s, 2 s, 4 s … up
to it), so a Telegram that is slow to come back after a restart costs seconds, not a whole interval.

A chat that refuses the bot itself (its user blocked the bot, the bot was removed from the group, the chat is not
found: ChatUnreachable) is no fault of its messages: they are kept, never given up, and that chat is left alone for
UNREACHABLE_RETRY (any message to it would be refused alike, so trying it at every pass would be a loop of refusals);
as soon as the chat is heard from again (`chat_heard`: the user unblocked the bot and wrote, the bot was added back),
what it is owed goes out at once.

A send whose answer did not come in time (SendTimedOut) may be in the chat already: it is tried again only after
TIMED_OUT_RETRY, not at once, so a slow Telegram is not sent the same message again and again. It can still be shown
twice: the Bot API has no way to send a message only once, and no way to ask whether one went.

A chat in a flood wait (SendUnavailable with the platform's retry_after) is not tried before it ends; its wait holds
that chat only, never the other chats' messages.

Once Telegram has taken a message, marking it delivered is a background write: the chat's next turn does not wait for it
(a crash before that write means the message is sent again after the restart, never that it is lost).

A question a worker waits on is worth nothing later, so it is not stored: `send_retried` sends it with the same inline
retries, and the worker is told if it still cannot go.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from agents.core.actions import Button, Buttons, button_fields
from agents.core.errors import ChatUnreachable, SendTimedOut, SendUnavailable
from agents.core.models import Delivery, TaskEvent
from agents.core.protocols import Notifier
from agents.store.database import Store

log = logging.getLogger(__name__)

RETRY_DELAYS = (1.0, 3.0)  # seconds between the inline tries of one send
FLUSH_INTERVAL = 30.0  # seconds between background passes over the outbox
FIRST_RETRY = 1.0  # after a pass that left something undelivered, the next comes this soon (doubling to the interval)
MAX_ATTEMPTS = 50  # after this many refusals of the message itself it is given up (Telegram's outages do not count)
TIMED_OUT_RETRY = 60.0  # seconds before a send whose answer never came is tried again (it may be in the chat)
SHORT_FLOOD_WAIT = 5.0  # seconds of a chat's flood wait that a send waits out itself (a longer one, the flusher)
UNREACHABLE_RETRY = 3600.0  # seconds a chat that refused the bot is left alone (unless it is heard from sooner)


async def send_retried(
    notifier: Notifier,
    chat_id: int,
    markdown: str,
    *,
    buttons: Buttons | None = None,
    reply_to: int | None = None,
    literal: bool = False,
    delays: tuple[float, ...] = RETRY_DELAYS,
) -> int | None:
    """`notifier.send`, tried again after each of `delays` on a failure (a 5xx, a timeout); the last failure is
    raised. For a message that is only worth sending now (a question a worker waits on), never kept for later."""
    for attempt, delay in enumerate((*delays, None)):
        try:
            return await notifier.send(chat_id, markdown, buttons=buttons, reply_to=reply_to, literal=literal)
        except Exception as err:  # Telegram-agnostic, as the outbox's sends
            if delay is None:
                raise
            log.warning("chat %s: a message not sent (try %d), trying again: %s", chat_id, attempt + 1, err)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable: the last try returns or raises")


def owed(
    chat_id: int,
    markdown: str,
    buttons: Buttons | None = None,
    reply_to: int | None = None,
    kind: str = "notice",
    task_id: int | None = None,
    shown_record: int | None = None,
) -> Delivery:
    """The outbox entry of a message owed to a chat (not stored yet); `shown_record`: the chat history's record of
    it (shown.remember_shown), which gets the chat message's id once it is sent, however it is sent."""
    return Delivery(
        chat_id=chat_id,
        kind=kind,
        task_id=task_id,
        text=markdown,
        buttons=encode_buttons(buttons),
        reply_to=reply_to,
        shown_record=shown_record,
    )


def encode_buttons(buttons: Buttons | None) -> str | None:
    return json.dumps([[button_fields(b) for b in row] for row in buttons]) if buttons else None


def decode_buttons(data: str | None) -> Buttons | None:
    return [[Button(*fields) for fields in row] for row in json.loads(data)] if data else None


class Deliveries:
    """Send through the notifier with retries and an outbox; `start()` runs the flusher, `close()` stops it."""

    def __init__(
        self,
        store: Store,
        notifier: Notifier,
        retry_delays: tuple[float, ...] | None = None,
        flush_interval: float | None = None,
    ) -> None:
        self.store, self.notifier = store, notifier
        self.retry_delays = RETRY_DELAYS if retry_delays is None else retry_delays
        self.flush_interval = FLUSH_INTERVAL if flush_interval is None else flush_interval
        self._flusher: asyncio.Task[None] | None = None
        self._sending: set[int] = set()  # outbox ids being sent right now (never twice at once)
        self._settling: set[asyncio.Task[None]] = set()  # "delivered" writes still running
        # chats that refused the bot (ChatUnreachable), by the outbox's chat key → (the platform's chat that refused,
        # the monotonic time before which the flusher leaves it alone)
        self._unreachable: dict[int, tuple[int, float]] = {}
        self._heard: set[asyncio.Task[int]] = set()  # passes for a chat heard from again, still running
        self._not_before: dict[int, float] = {}  # outbox ids whose send timed out → when to try them again
        self._flooded: dict[int, float] = {}  # chats in a flood wait (the platform's retry_after) → when it ends

    async def deliver(
        self,
        chat_id: int,
        markdown: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        kind: str = "notice",
        task_id: int | None = None,
        shown_record: int | None = None,
    ) -> int | None:
        """Store, then send with retries; the id of the message sent, None when it stays in the outbox for later.

        Never raises on a send error.
        """
        entry = await self.store.add_delivery(owed(chat_id, markdown, buttons, reply_to, kind, task_id, shown_record))
        return await self._send(entry, self.retry_delays)

    async def end_owing(self, task_id: int, fields: dict[str, Any], event: TaskEvent, owed: Delivery) -> Delivery:
        """The task's end and its owed message stored in one transaction (`Store.end_task_owing`)."""
        return await self.store.end_task_owing(task_id, fields, event, owed)

    async def send_stored(self, owed: Delivery) -> int | None:
        """`deliver` of an entry stored already (`end_owing`): sent with retries unless the flusher has sent it
        meanwhile (or is sending it now). Never raises on a send error."""
        if owed.id is None or owed.id in self._sending or await self.store.delivered(owed.id):
            return None
        return await self._send(owed, self.retry_delays)

    async def _send(self, entry: Delivery, delays: tuple[float, ...]) -> int | None:
        """The message id when Telegram took it (0 if it gave none), else None."""
        if entry.id is None:
            raise ValueError("an outbox entry is stored before it is sent")
        delivery_id = entry.id
        if delivery_id in self._sending:
            return None
        self._sending.add(delivery_id)
        settling = False
        try:
            for attempt, delay in enumerate((*delays, None)):
                try:
                    sent = await self.notifier.send(
                        entry.chat_id, entry.text, buttons=decode_buttons(entry.buttons), reply_to=entry.reply_to
                    )
                except Exception as err:  # Telegram-agnostic: a 5xx, a timeout, a network error …
                    # only a refusal of the message itself counts toward giving it up: an outage of any length
                    # (SendUnavailable) is waited out
                    counted = not isinstance(err, SendUnavailable)
                    await self.store.delivery_failed(delivery_id, f"{type(err).__name__}: {err}", counted)
                    if isinstance(err, ChatUnreachable):  # no later try can do better until the chat is heard from
                        self._unreachable[entry.chat_id] = (err.chat_id, time.monotonic() + UNREACHABLE_RETRY)
                        delay = None
                    if isinstance(err, SendUnavailable) and err.retry_after:  # the chat's flood wait: not before
                        self._flooded[entry.chat_id] = time.monotonic() + err.retry_after
                        # a short one is waited out here (the chat's turn waits on it as on any retry); a long one
                        # is left to the flusher, which skips the chat until it ends
                        if delay is not None and err.retry_after <= SHORT_FLOOD_WAIT:
                            delay = max(delay, err.retry_after)
                        else:
                            delay = None
                    if isinstance(err, SendTimedOut):  # it may be in the chat: not again at once (see SendTimedOut)
                        self._not_before[delivery_id] = time.monotonic() + TIMED_OUT_RETRY
                        delay = None
                    log.warning(
                        "chat %s: %s #%s not delivered (try %d): %s",
                        entry.chat_id,
                        entry.kind,
                        delivery_id,
                        attempt + 1,
                        err,
                    )
                    if delay is None:
                        return None
                    await asyncio.sleep(delay)
                else:
                    self._unreachable.pop(entry.chat_id, None)
                    self._not_before.pop(delivery_id, None)
                    self._flooded.pop(entry.chat_id, None)
                    # off the caller's path
                    task = asyncio.create_task(self._mark_delivered(delivery_id, entry.shown_record, sent))
                    self._settling.add(task)
                    task.add_done_callback(self._settling.discard)
                    settling = True
                    return sent or 0
            return None
        finally:
            if not settling:
                self._sending.discard(delivery_id)

    async def _mark_delivered(self, delivery_id: int, shown_record: int | None, sent: int | None) -> None:
        """The outbox row is done, and the chat history's record of it knows its chat message (a reply to it is one
        to the proposal or summary); the id stays in `_sending` until then, so the flusher never sends it again."""
        try:
            await self.store.delivery_done(delivery_id)
            if shown_record is not None and sent:
                await self.store.set_platform_message_id(shown_record, sent)
        except Exception:  # the row stays undelivered: sent once more later, never lost
            log.exception("outbox #%s: could not mark it delivered", delivery_id)
        finally:
            self._sending.discard(delivery_id)

    async def settled(self) -> None:
        """Wait for the "delivered" writes still running."""
        while self._settling:
            await asyncio.gather(*self._settling, return_exceptions=True)

    async def flush(self) -> int:
        """One pass over the outbox (oldest first); returns how many were delivered."""
        delivered, _ = await self._pass()
        return delivered

    def chat_heard(self, chat_id: int) -> None:
        """The platform's chat `chat_id` was heard from (any update from it): if it had refused the bot, it can be
        written to again, and what it is owed goes out now (a pass of its own, in the background)."""
        keys = [key for key, (chat, _) in self._unreachable.items() if chat == chat_id]
        if not keys:
            return
        for key in keys:
            del self._unreachable[key]
        log.info("chat %s was heard from again: sending what it is owed", chat_id)
        task = asyncio.create_task(self._flush_heard(set(keys)))
        self._heard.add(task)
        task.add_done_callback(self._heard.discard)

    async def _flush_heard(self, keys: set[int]) -> int:
        try:
            delivered, _ = await self._pass(keys)
        except Exception:  # the flusher's next pass tries again
            log.exception("outbox: sending what a chat heard from again is owed failed")
            return 0
        return delivered

    async def _pass(self, only: set[int] | None = None) -> tuple[int, bool]:
        """One pass over the outbox (over the chats `only`, if given): how many were delivered, and whether any
        stayed undelivered. A chat that refused the bot is left alone until UNREACHABLE_RETRY or `chat_heard`."""
        delivered, stuck = 0, set()
        earlier = set(self._settling)
        now = time.monotonic()
        for entry in await self.store.undelivered(MAX_ATTEMPTS):
            if only is not None and entry.chat_id not in only:
                continue
            if entry.chat_id in stuck:
                continue  # keep each chat's order: its later messages wait for the stuck one
            unreachable = self._unreachable.get(entry.chat_id)
            if unreachable is not None and unreachable[1] > now:
                continue  # refused the bot a while ago: it is tried again once heard from, or after the wait
            if self._not_before.get(entry.id or 0, 0.0) > now or self._flooded.get(entry.chat_id, 0.0) > now:
                # its send timed out a moment ago, or the chat is in a flood wait: its messages wait (in order)
                stuck.add(entry.chat_id)
                continue
            if await self._send(entry, ()) is not None:
                delivered += 1
            else:
                stuck.add(entry.chat_id)  # this chat (or Telegram) is still unwell: next pass
        mine = self._settling - earlier  # no chat waits on a flush: its own "delivered" marks are in before it returns
        if mine:
            await asyncio.gather(*mine, return_exceptions=True)
        return delivered, bool(stuck)

    async def resend(self, task_id: int, chat_id: int) -> bool:
        """Send a task's last summary or proposal again, with its buttons (for /task N). False if there is none."""
        last = await self.store.last_delivery(task_id)
        if last is None or last.chat_id != chat_id:
            return False
        await self.deliver(chat_id, last.text, buttons=decode_buttons(last.buttons), kind=last.kind, task_id=task_id)
        return True

    def start(self) -> None:
        """Flush what an earlier run left undelivered now, then every `flush_interval` seconds."""
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush_forever(), name="deliveries-flusher")

    async def _flush_forever(self) -> None:
        retry = FIRST_RETRY
        while True:
            left = True
            try:
                _, left = await self._pass()
            except Exception:  # the flusher must outlive any one bad pass
                log.exception("outbox flush failed")
            if left:  # Telegram (or a chat) is still unwell: look again soon, then less and less often
                await asyncio.sleep(min(retry, self.flush_interval))
                retry *= 2
            else:
                retry = FIRST_RETRY
                await asyncio.sleep(self.flush_interval)

    async def close(self) -> None:
        for task in list(self._heard):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.settled()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
