"""The sandbox a task's processes run in, and the task's shared limits (cgroup, disk budget) while it runs.

One `TaskSandboxes` per executor: `open` when a task starts, `close` when it ends; `spec` is the one place that
builds the sandbox a task's commands, screenshots and MCP servers share. Its disk budget is polled while commands run
(agents/sandbox/task_limits.py); `own_disk_budget` sizes the worktree's file system of its own, the hard ceiling
(agents/sandbox/task_disk.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from agents.core.models import Task
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.sandbox.bwrap import ResourceLimits, SandboxMode, SandboxProbe, SandboxSpec, spec_for
from agents.sandbox.egress_rules import egress_for
from agents.sandbox.git_masks import GitMetadataMasks
from agents.sandbox.task_limits import DiskBudget, TaskBounds, disk_budget


class TaskSandboxes:
    """Each running task's `TaskBounds`, and the sandbox spec its processes get."""

    def __init__(self, settings: Settings, secrets: SecretsFilter, probe: SandboxProbe) -> None:
        """`secrets`: the process's output filter (each task's values get a scope of it; the specs mask with it);
        `probe`: the process's bwrap probe, which every spec carries."""
        self.settings = settings
        self.secrets = secrets
        self.probe = probe
        self.git_masks = GitMetadataMasks(secrets)  # the masked git metadata copies, remembered between specs
        self.bounds: dict[int, TaskBounds] = {}  # task id → its cgroup and disk budget while it runs

    def open(self, task: Task) -> TaskBounds:
        """The task's shared limits: memory and processes (a cgroup, made at its first command), disk (its worktree)."""
        s = self.settings
        bounds = TaskBounds(
            f"{task.id}",
            s.sandboxing.sandbox_max_memory_mb << 20,
            s.sandboxing.sandbox_max_processes,
            max_services=s.sandboxing.sandbox_max_services,
            secrets=self.secrets.scope(f"task {task.id}"),
        )
        self.bounds[task.stored_id] = bounds
        return bounds

    def paused(self, task: Task) -> contextlib.AbstractAsyncContextManager[None]:
        """The task's processes stopped for the body (TaskBounds.paused); nothing to stop for a task with none."""
        bounds = self.bounds.get(task.stored_id)
        return bounds.paused() if bounds is not None else contextlib.nullcontext()

    def activity(self, task: Task) -> tuple[int, bool] | None:
        """What the task's processes did, for the repository guard (TaskBounds.activity); None where none of them can
        write the owner's repository's shared state: the sandbox shows the git metadata read-only to all of them."""
        if SandboxMode(self.settings.sandboxing.sandbox) is not SandboxMode.OFF:
            return None
        bounds = self.bounds.get(task.stored_id)
        return bounds.activity() if bounds is not None else (0, True)  # nothing known of it: counted as running

    async def end_processes(self, task: Task) -> None:
        """Every process the task started ends now (TaskBounds.end_processes); its bounds stay until `close`."""
        bounds = self.bounds.get(task.stored_id)
        if bounds is not None:
            await bounds.end_processes()

    async def close(self, task: Task) -> None:
        """The task's cgroup: what is left in it is killed, the folder removed."""
        bounds = self.bounds.pop(task.stored_id, None)
        if bounds is not None:
            await bounds.close()

    def own_disk_budget(self) -> int | None:
        """The disk budget a new worktree's file system of its own makes room for (bytes); None with
        SANDBOX_DISK_FS=off (a plain folder, its budget only polled)."""
        s = self.settings
        return (
            disk_budget(s.sandboxing.sandbox_max_disk_mb, s.paths.worktrees_dir)
            if s.sandboxing.sandbox_disk_fs == "auto"
            else None
        )

    def watch_disk(
        self,
        task: Task,
        root: Path,
        baseline: int | None = None,
        on_baseline: Callable[[int], Awaitable[None]] | None = None,
    ) -> TaskBounds | None:
        """The task's bounds, their disk budget watching `root` (the task's worktree) from now on if none did;
        `baseline`: what an earlier run of the task counted at its first command, else `on_baseline` keeps this
        run's."""
        bounds = self.bounds.get(task.stored_id)
        if bounds is not None and bounds.disk is None:
            s = self.settings
            budget = disk_budget(s.sandboxing.sandbox_max_disk_mb, s.paths.worktrees_dir)
            bounds.watch_disk(DiskBudget(root.resolve(), budget, baseline=baseline, on_baseline=on_baseline))
        return bounds

    def spec(
        self, root: Path, repository: Path, read_only: Iterable[Path] = (), task: Task | None = None
    ) -> SandboxSpec | None:
        """The sandbox a task's processes run in; None only when SANDBOX=off was set explicitly.
        What it binds besides `root` is read from `repository` (the owner's checkout), never from the worktree.
        With `task`, the command joins the task's cgroup and counts against its disk budget. The bot's data folder
        (database, attachments) and the task worktrees folder (every chat's tasks) are shown empty wherever a bound
        folder holds them: a research task's root is the live checkout, and in the bot's own checkout those are
        `data/` and `data-worktrees/` by default. A task's own worktree lies in the latter, which then stays."""
        s = self.settings
        if SandboxMode(s.sandboxing.sandbox) is SandboxMode.OFF:
            return None
        limits = ResourceLimits(
            max_processes=s.sandboxing.sandbox_max_processes,
            max_file_bytes=s.sandboxing.sandbox_max_file_mb << 20,
            max_memory_bytes=s.sandboxing.sandbox_max_memory_mb << 20,
            tmp_bytes=s.sandboxing.sandbox_tmp_mb << 20,
        )
        spec = spec_for(
            self.secrets,
            self.probe,
            root,
            repository=repository,
            limits=limits,
            extra_read_only=[*s.sandboxing.sandbox_read_paths, *read_only],
            git_masks=self.git_masks,
        )
        egress = egress_for(s.network.sandbox_network_domains, s.network.sandbox_network_private, repository)
        spec = dataclasses.replace(spec, egress=egress, hidden=s.paths.private_dirs_hidden_from(root))
        bounds = self.bounds.get(task.stored_id) if task is not None else None
        return dataclasses.replace(spec, task=bounds) if bounds is not None else spec
