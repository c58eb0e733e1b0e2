"""Strict the other way: a reply scripted for the fake model and never served fails the test, named.

A scripted call nobody made means the test did not see what it scripted for (the bot took another path, stopped
early, or a role answered from the wrong queue), so a passing test would claim more than it saw. Each script (the
fake Anthropic server's queue, a `tests.scripted.RoleScript`) registers itself here when it is made (`track`); after
a test that passed, the `tests/conftest.py` check lists every reply still queued in them and fails the test with one
line per reply (whose queue, which one, what it says).

A reply that may stay unused by design is marked so where it is scripted, with the reason in words:
`spare(say("late answer"), why="the task is cancelled before it asks")`. Marked replies are served as any other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Spare:
    """A reply that may stay unused, and why."""

    reply: Any
    why: str


def spare(reply: Any, *, why: str) -> Spare:
    """`reply`, allowed to stay unused for the reason `why` (words a reader understands, never empty)."""
    if not why.strip():
        raise ValueError("say why this reply may stay unused")
    if isinstance(reply, Spare):
        return reply
    return Spare(reply, why)


def unwrap(item: Any) -> Any:
    """The reply itself, whether marked spare or not."""
    return item.reply if isinstance(item, Spare) else item


class Script(Protocol):
    def unserved(self) -> list[str]:
        """One line per reply still queued and not marked spare."""
        ...


_made: list[Script] | None = None  # the scripts made since the running test began; None outside a test (a bench)


def track(script: Script) -> None:
    if _made is not None:
        _made.append(script)


def begin() -> None:
    global _made
    _made = []


def end() -> list[str]:
    """The unserved replies of every script made since `begin`; forgets them (and tracks nothing until `begin`)."""
    global _made
    made, _made = _made or [], None
    return [line for script in made for line in script.unserved()]


def leftovers(owner: str, queue: Iterable[Any]) -> list[str]:
    """Lines for the replies of `queue` not marked spare: `owner`, the reply's place among those left, what it is
    (a run of equal replies is one line)."""
    items = list(queue)
    runs: list[tuple[int, int, str]] = []  # first place, last place, what the replies say
    for place, item in enumerate(items, 1):
        if isinstance(item, Spare):
            continue
        said = describe(item)
        if runs and runs[-1][1] == place - 1 and runs[-1][2] == said:
            runs[-1] = (runs[-1][0], place, said)
        else:
            runs.append((place, place, said))
    return [
        f"{owner}, {f'reply {first}' if first == last else f'replies {first}-{last}'} of the {len(items)} left: {said}"
        for first, last, said in runs
    ]


def describe(reply: Any) -> str:
    """A reply in one short line: its text and tool calls, its error, or the callable's name."""
    if callable(reply) and not isinstance(reply, dict):
        return f"callable {getattr(reply, '__qualname__', None) or type(reply).__qualname__ + ' object'}"
    if isinstance(reply, str):
        return f"text {_short(reply)}"
    if isinstance(reply, dict):
        if "error" in reply:
            err = reply["error"]
            return f"error {err.get('status')} {err.get('type')}" if isinstance(err, dict) else f"error {err!r}"
        blocks = reply.get("content") or []
    else:  # an SDK message
        blocks = [block.model_dump() for block in getattr(reply, "content", [])]
    parts = []
    for block in blocks:
        if block.get("type") == "text":
            parts.append(f"text {_short(block.get('text', ''))}")
        elif block.get("type") == "tool_use":
            arguments = json.dumps(block.get("input"))
            parts.append(f"tool_use {block.get('name')}({arguments if len(arguments) <= 80 else arguments[:80] + '…'})")
        else:
            parts.append(str(block.get("type")))
    return ", ".join(parts) or "an empty reply"


def _short(text: str, limit: int = 100) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")
