"""The model calls under way in this process, and the most each may cost, counted against the daily budget until
their usage is recorded.

The day's spend is what the usage rows say, and a call's row is written once its answer has come. Calls that start
at the same moment (three tasks started in one turn, a race of attempts, a task beside a busy chat) each saw the
recorded spend under the budget, and all went through: the budget was passed by every one of them. So a call holds
its largest cost (its input as last measured, its whole output allowance) from the check before it until its usage
is recorded, and the check and the hold are one step under one lock (`admit`): the next check counts it, and waits
for it to end when only the holds stand in the way. A call's own check does not count what it may cost itself: as
before, the last call before the budget may pass it by one call. Starts of tasks and the race's check count recorded
spend only: a hold is what a call may cost, not what was spent."""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import Awaitable, Callable

from agents.core.models import Usage


class CallsInFlight:
    """The holds of the calls under way; `usage` is what they may cost together."""

    def __init__(self) -> None:
        self._held: dict[int, Usage] = {}
        self._keys = itertools.count()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._released: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def usage(self) -> Usage:
        held = Usage()
        for most in self._held.values():
            held = held + most
        return held

    async def admit(
        self, most: Usage, check: Callable[[], Awaitable[str | None]]
    ) -> tuple[str | None, Callable[[], None]]:
        """`check` (why no more may be spent, counting `usage`; None when the call may go) asked under the lock; when
        it lets the call go, `most` is held until the returned function is called (once its usage is recorded, or it
        failed). Refused while other calls are under way, the check waits for one of them to end and is asked again:
        what they really cost may leave room, and a hold is never a reason to stop a task for good."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        released = self._released.get(loop)
        if released is None:
            released = self._released[loop] = asyncio.Event()
        while True:
            async with lock:
                refusal = await check()
                if refusal is None:
                    key = next(self._keys)
                    self._held[key] = most
                    break
                if not self._held:
                    return refusal, _nothing
                released.clear()
            await released.wait()

        def release() -> None:
            if self._held.pop(key, None) is not None:
                for event in list(self._released.values()):
                    event.set()

        return None, release


def _nothing() -> None:
    return None


IN_FLIGHT = CallsInFlight()  # one per process, as the budget is one for all its calls
