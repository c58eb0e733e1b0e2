"""The cyclic garbage collector paused during bulk parsing.

Parsing thousands of files with `ast` allocates millions of short-lived node objects; each allocation burst
triggers collections that walk every object still alive (the outlines kept so far included), which made
collection about half of a cold build. AST trees hold no reference cycles, so reference counting
frees them without the collector. `gc_paused()` turns the collector off for the duration and back on after,
counting nested and concurrent users (several threads may parse at once): the collector is re-enabled when the
last one leaves, and only if it was enabled when the first one came in.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Process-wide because the collector is: one count of the users of the one collector, however many owners parse
_lock = threading.Lock()
_users = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector disabled (process-wide; restored when the last user leaves)."""
    global _users, _was_enabled
    with _lock:
        if _users == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _was_enabled:
                gc.enable()
