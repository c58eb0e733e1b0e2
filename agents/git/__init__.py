"""Git for tasks: one hardened runner, repositories, worktrees, commits, merge, diff, the guard."""
