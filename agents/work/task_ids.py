"""A running task's id: the store gave it one before any part of the executor sees the task."""

from __future__ import annotations

from agents.core.models import Task


def stored_id(task: Task) -> int:
    """`task.id`, which only a task not yet stored lacks; such a task reaching the executor is a bug, said here."""
    if task.id is None:
        raise ValueError(f"task {task.title!r} was never stored: only a stored task runs")
    return task.id
