"""Git for tasks: one hardened git command, repositories, worktrees, commits, merge, diff, the guard."""
