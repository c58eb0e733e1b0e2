"""Whether a task's change is good: finding a workspace's test command and environment, running it
(sandboxed), reading the verdict, and comparing with the base commit."""
