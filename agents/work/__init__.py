"""The crew: tasks and proposals (crew.py, a front over access, work starts, proposal and branch decisions, running
tasks, look-ups and workspace binding), the queue that runs them, one task's execution from worktree
to summary, the worker, steering a running task, and orphans left by a restart."""
