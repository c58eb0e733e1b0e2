"""Notes for running workers: the chat (a reply to a progress message, or `message_task`) posts one, the worker
reads it before its next step. Only a running task has an inbox; notes live in memory, and as task events: a `note`
event when one is posted, a `notes read` event (how many) when the worker takes them, so a note a restart kept from
the worker is handed to the resumed one (`unread_notes`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agents.core.models import TaskEvent

NOTE_PREFIX = "[A note from the user, sent while you work; take it into account from this step on]\n"

OnNote = Callable[[str], Awaitable[None]]
OnRead = Callable[[int], None]  # the worker took this many notes (recorded in the background)
NOTE_EVENT, READ_EVENT = "note", "notes read"
NOTE_CHARS = 2000  # of a note, kept in its event: what a resumed worker is handed


def unread_notes(events: list[TaskEvent]) -> list[str]:
    """The notes posted to a task that its worker never took (in order), from its events."""
    notes = [e.detail for e in events if e.kind == NOTE_EVENT]
    read = sum(int(e.detail) for e in events if e.kind == READ_EVENT and e.detail.isdigit())
    return notes[read:]


class Inboxes:
    """One inbox per running task, opened and closed by the task's executor."""

    def __init__(self) -> None:
        self._notes: dict[int, list[str]] = {}
        self._on_note: dict[int, OnNote] = {}
        self._on_read: dict[int, OnRead] = {}

    def open(self, task_id: int, on_note: OnNote, on_read: OnRead | None = None) -> None:
        self._notes.setdefault(task_id, [])
        self._on_note[task_id] = on_note
        if on_read is not None:
            self._on_read[task_id] = on_read

    def close(self, task_id: int) -> list[str]:
        """Close the inbox; returns the notes the worker never read."""
        self._on_note.pop(task_id, None)
        self._on_read.pop(task_id, None)
        return self._notes.pop(task_id, [])

    def is_open(self, task_id: int) -> bool:
        return task_id in self._notes

    async def post(self, task_id: int, text: str) -> bool:
        """Leave a note for the task's worker; False when the task has no inbox (it is not running)."""
        if task_id not in self._notes:
            return False
        self._notes[task_id].append(text)
        on_note = self._on_note.get(task_id)
        if on_note is not None:
            await on_note(text)
        return True

    def reader(self, task_id: int) -> Callable[[], list[str]]:
        """What the worker calls before each step: the notes posted since, as prompts, once each."""

        def read() -> list[str]:
            notes = self._notes.get(task_id)
            if not notes:
                return []
            taken, notes[:] = list(notes), []
            if (on_read := self._on_read.get(task_id)) is not None:
                on_read(len(taken))
            return [NOTE_PREFIX + note for note in taken]

        return read
