"""Users' turns in flight, so that work which can wait runs between them, never during one.

A turn is what a user waits on: from their message to the answer. Work nobody is waiting on (loading the speech
model, indexing the workspaces) competes with it for the one interpreter (the GIL) and the event loop; run it in
the gaps instead. `quiet()` returns once no turn is in flight; `settled()` once the bot's first turn has its answer
(or a grace period after the start passed without any) and no turn has been in flight for `quiet_seconds`, which
is when start-up work begins.

A turn that waits on a foreground task (`waiting_on_work()` around the wait) does not count as in flight meanwhile:
the task it waits on may itself wait for a quiet moment (a task's first repository map is drawn from an index brought
up to date in the gaps), and would otherwise sit still until the turn gave up waiting on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Iterator


class UserTurns:
    """Counts the turns in flight (`turn()` around each); the waits below are for work that can wait."""

    def __init__(self, quiet_seconds: float = 1.0) -> None:
        self.quiet_seconds = quiet_seconds
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._answered = asyncio.Event()  # the first turn ended (or `hurry()`)
        self._last_end = -float("inf")

    @property
    def active(self) -> int:
        return self._active

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        self._begin()
        current = _CURRENT.set(self)
        try:
            yield
        finally:
            _CURRENT.reset(current)
            self._end()
            self._answered.set()

    def _begin(self) -> None:
        self._active += 1
        self._idle.clear()

    def _end(self) -> None:
        self._active -= 1
        self._last_end = time.monotonic()
        if not self._active:
            self._idle.set()

    async def quiet(self) -> None:
        """Return once no turn is in flight (at once when none is)."""
        while self._active:
            await self._idle.wait()

    async def settled(self, grace: float) -> None:
        """Return once the first turn has its answer (or `grace` seconds passed without one) and no turn has been in
        flight for `quiet_seconds`."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self._answered.wait()
        while True:
            await self.quiet()
            left = self._last_end + self.quiet_seconds - time.monotonic()
            if left <= 0 or self.quiet_seconds <= 0:
                if not self._active:
                    return
                continue
            await asyncio.sleep(left)

    def hurry(self) -> None:
        """Start-up work need not wait for a first turn or a quiet moment any more (benches and tests that time
        answers let it finish first)."""
        self.quiet_seconds = 0.0
        self._answered.set()


_CURRENT: contextvars.ContextVar[UserTurns | None] = contextvars.ContextVar("user_turns", default=None)


@contextlib.contextmanager
def waiting_on_work() -> Iterator[None]:
    """Around a turn's wait on work of the bot's (a foreground task): the turn in flight here, if any, does not count
    while it waits (see the module's docstring)."""
    turns = _CURRENT.get()
    if turns is None:
        yield
        return
    turns._end()
    try:
        yield
    finally:
        turns._begin()
