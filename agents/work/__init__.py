"""The crew: tasks and proposals (crew.py), the queue that runs them, one task's execution from worktree
to summary, the worker, steering a running task, and orphans left by a restart."""
