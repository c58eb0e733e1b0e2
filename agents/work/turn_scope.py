"""What one chat turn did, kept in the turn's own asyncio context: the tasks its tool calls stored, and whether it
has asked the owners already. A context variable, set when the turn begins in the task that runs it: the tool calls
it awaits (or gathers) see it; a button pressed, a schedule firing or another conversation's turn meanwhile runs in
a context of its own and sees none of it.

The user's own words are kept too: a merge, an approval or another decision of the user's that the model calls
happens only when they ask for one (own_words.py), whatever a worker's report or a file the model read told it. So is
the proposal or task whose message they reply to: such a reply's words are about that one, not another the model
names.

A member's turn hands the owners one request at most (a model steered into forty refused calls in one answer does
not post forty requests in the owners' chats); the later ones are refused saying the owners were asked already. A
turn creates a few workspaces at most, for the same reason.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from agents.core.models import Task


@dataclass
class TurnScope:
    tasks: list[Task] = field(default_factory=list)  # stored by the turn's tool calls, a schedule's runs aside
    owners_asked: bool = False
    workspaces_made: int = 0  # create_workspace: a few a turn at most (workspace_binding.py)
    said: str = ""  # the user's own words that began the turn (a voice note's transcript): what decides a merge, …
    replied: tuple[str, int] | None = None  # the proposal or task whose message they reply to: ("proposal", 3)
    confirm_asked: bool = False  # the user was shown a notice instead of a decision they did not ask for


_SCOPE: contextvars.ContextVar[TurnScope | None] = contextvars.ContextVar("turn_scope", default=None)


def begin_turn(said: str = "", replied: tuple[str, int] | None = None) -> None:
    """The turn begins (in the asyncio task that runs it), on the user's words `said`, a reply to the message
    showing `replied` if it is one."""
    _SCOPE.set(TurnScope(said=said, replied=replied))


def end_turn() -> TurnScope:
    """The turn ends (in the task that began it): what it did."""
    scope = _SCOPE.get() or TurnScope()
    _SCOPE.set(None)
    return scope


def current_turn() -> TurnScope | None:
    """The running turn's scope; None outside a turn (a button, a schedule, a task's own end)."""
    return _SCOPE.get()
