"""Strangers (users not in ALLOWED_USER_IDS): one refusal each per period, then silence, and never ahead of the owner.

Refusals have a budget of their own (REFUSALS_PER_MINUTE for all strangers together; past it strangers are ignored)
and travel in their own lane past the owner's AIORateLimiter, whose overall rate is lowered by that budget, so a
flood of strangers neither queues in front of the owner's messages nor takes their share of Telegram's limits.

A flood wait Telegram sets on one chat (429 retry_after, minutes at times) holds that chat only: PTB's AIORateLimiter
would pause every request of every chat while it waits, so a call naming a chat is not retried by it. The chat is
remembered as flooded until then: a call to it waits (this call only), or, under `floods_raised` (the notifier's
sends and edits, the streamed previews: their callers skip a frame or keep the message for later), raises RetryAfter
at once without troubling Telegram.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from typing import Any

from aiolimiter import AsyncLimiter
from telegram.error import RetryAfter
from telegram.ext import AIORateLimiter

REFUSE_ONCE_PER_SECONDS = 3600.0
REFUSALS_PER_MINUTE = 20
REMEMBERED_STRANGERS = 10_000
TELEGRAM_OVERALL_PER_SECOND = 30  # Telegram's limit for a bot's messages across all chats
OWNER_OVERALL_PER_SECOND = TELEGRAM_OVERALL_PER_SECOND - 1  # the refusal lane keeps at most 1 a second on average


class RefusalLane:
    """The `rate_limit_args` that marks a refusal: OwnerFirstRateLimiter sends it without queueing."""


REFUSAL_LANE = RefusalLane()
_ApiResult = bool | dict[str, Any] | list[dict[str, Any]]  # what a Bot API call answers (PTB's own union)
RateLimitArgs = int | RefusalLane  # what the bot's limiter takes: AIORateLimiter's retries, or the refusal lane


_FLOODS_RAISED: ContextVar[bool] = ContextVar("floods_raised", default=False)


@contextlib.contextmanager
def floods_raised() -> Iterator[None]:
    """Around calls whose caller copes with a chat's flood wait itself: RetryAfter at once instead of a wait."""
    token = _FLOODS_RAISED.set(True)
    try:
        yield
    finally:
        _FLOODS_RAISED.reset(token)


def seconds(wait: int | float | dtm.timedelta) -> float:
    return wait.total_seconds() if isinstance(wait, dtm.timedelta) else float(wait)


class _ChatFlood(Exception):
    """A chat's RetryAfter carried past AIORateLimiter, which would retry it pausing every chat."""

    def __init__(self, error: RetryAfter) -> None:
        super().__init__(str(error))
        self.error = error


class OwnerFirstRateLimiter(AIORateLimiter):
    """PTB's AIORateLimiter for the owner's traffic; refusals (already budgeted by `Strangers`) skip its queues; a
    chat's flood wait holds that chat only (the module's docstring says how)."""

    def __init__(self, max_retries: int = 5) -> None:
        super().__init__(overall_max_rate=OWNER_OVERALL_PER_SECOND, max_retries=max_retries)
        self.max_retries = max_retries
        self._flooded: dict[Any, float] = {}  # chat → the monotonic time Telegram allows it calls again

    def flooded_for(self, chat: Any) -> float:
        """Seconds the chat's flood wait still lasts (0 when there is none)."""
        until = self._flooded.get(chat)
        if until is None:
            return 0.0
        left = until - time.monotonic()
        if left <= 0:
            del self._flooded[chat]
            return 0.0
        return left

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, _ApiResult]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: RateLimitArgs | None,
    ) -> _ApiResult:
        if isinstance(rate_limit_args, RefusalLane):
            return await callback(*args, **kwargs)
        chat = data.get("chat_id")
        if chat is None:  # not one chat's call: PTB's own handling
            return await super().process_request(callback, args, kwargs, endpoint, data, rate_limit_args)

        async def once(*call_args: Any, **call_kwargs: Any) -> _ApiResult:
            try:
                return await callback(*call_args, **call_kwargs)
            except RetryAfter as err:
                raise _ChatFlood(err) from err

        retries = rate_limit_args if isinstance(rate_limit_args, int) else self.max_retries  # 0: no retry
        for attempt in range(retries + 1):
            if wait := self.flooded_for(chat):
                if _FLOODS_RAISED.get():
                    raise RetryAfter(dtm.timedelta(seconds=wait))
                await asyncio.sleep(wait)
            try:
                return await super().process_request(once, args, kwargs, endpoint, data, rate_limit_args)
            except _ChatFlood as flood:
                wait = seconds(flood.error.retry_after)
                self._flooded[chat] = max(self._flooded.get(chat, 0.0), time.monotonic() + wait)
                if _FLOODS_RAISED.get() or attempt == retries:
                    raise flood.error from None
        raise AssertionError("unreachable: the last try returns or raises")


class Strangers:
    """Who was refused when: `should_refuse(user_id)` is True once per period per stranger, within the budget."""

    def __init__(
        self,
        period: float = REFUSE_ONCE_PER_SECONDS,
        per_minute: int = REFUSALS_PER_MINUTE,
        remembered: int = REMEMBERED_STRANGERS,
    ) -> None:
        self.period, self.remembered = period, remembered
        self.budget = AsyncLimiter(per_minute, 60)
        self._refused_at: OrderedDict[Any, float] = OrderedDict()

    async def should_refuse(self, user_id: Any) -> bool:
        now = time.monotonic()
        last = self._refused_at.get(user_id)
        if last is not None and now - last < self.period:
            return False  # refused already this period: stay silent
        if not self.budget.has_capacity():
            return False  # a flood of strangers: the rest are ignored, not queued
        await self.budget.acquire()  # there is capacity: this takes it without waiting
        self._refused_at[user_id] = now
        self._refused_at.move_to_end(user_id)
        while len(self._refused_at) > self.remembered:
            self._refused_at.popitem(last=False)
        return True
