"""Strangers (users not in ALLOWED_USER_IDS): one refusal each per period, then silence, and never ahead of the owner.

Refusals have a budget of their own (REFUSALS_PER_MINUTE for all strangers together; past it strangers are ignored)
and travel in their own lane past the owner's AIORateLimiter, whose overall rate is lowered by that budget, so a
flood of strangers neither queues in front of the owner's messages nor takes their share of Telegram's limits.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any

from aiolimiter import AsyncLimiter
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


class OwnerFirstRateLimiter(AIORateLimiter):
    """PTB's AIORateLimiter for the owner's traffic; refusals (already budgeted by `Strangers`) skip its queues."""

    def __init__(self, max_retries: int = 5) -> None:
        super().__init__(overall_max_rate=OWNER_OVERALL_PER_SECOND, max_retries=max_retries)

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
        return await super().process_request(callback, args, kwargs, endpoint, data, rate_limit_args)


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
