"""Building a task's worker: its role prompt, its tools (confined to the task's root and sandbox), its callbacks.

The sandbox is computed once per worker and shared by its commands, its screenshots and its MCP servers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from agents.core.models import Task, TaskEvent, WorkerKind
from agents.core.settings import Settings
from agents.llm import prompts
from agents.llm.reasoning import Reasoning
from agents.llm.tool_loop import RunClock
from agents.repo_map.maps import RepoMap, repo_map_tools
from agents.sandbox.bwrap import SandboxSpec
from agents.sandbox.task_limits import TaskBounds
from agents.tools.mcp_tasks import TaskMcp
from agents.tools.screenshot import find_chromium
from agents.tools.tool_sets import worker_tools
from agents.tools.toolbox import Audit, Tool, Toolbox
from agents.work.orphans import instance_token, task_tag
from agents.work.progress import Progress
from agents.work.repo_rules import FOLDER_TOOLS, FolderRules, with_folder_rules
from agents.work.role_tools import RoleCallbacks
from agents.work.task_briefing import task_index
from agents.work.task_collaborators import Collaborators, TaskLines
from agents.work.task_sandbox import TaskSandboxes
from agents.work.worker import Limits, Worker

ROLE_PROMPTS = {
    WorkerKind.RESEARCH: prompts.RESEARCH,
    WorkerKind.CODE: prompts.CODE,
    WorkerKind.FRONTEND: prompts.FRONTEND,
    WorkerKind.TEST: prompts.TEST,
}

DISK_BASELINE_EVENT = "disk baseline"  # a task event: bytes its worktree held at its first command (DiskBudget)

RepositoryCheck = Callable[[Task], Awaitable[list[str]]]  # before each step: the owner's repository checked


def worker_limits(settings: Settings) -> Limits:
    s = settings
    return Limits(
        max_steps=s.workers.worker_max_steps,
        max_seconds=s.workers.worker_max_seconds,
        max_tokens=s.workers.worker_max_tokens,
    )


def worker_reasoning(settings: Settings) -> Reasoning:
    s = settings
    return Reasoning(s.workers.worker_thinking, s.workers.worker_thinking_budget, s.workers.worker_effort)


class WorkerMaker:
    """Makes the worker of each task run (one per run; correction turns continue its conversation)."""

    def __init__(
        self,
        base: Collaborators,
        lines: TaskLines,
        sandboxes: TaskSandboxes,
        repo_map: RepoMap | None,
        check_repository: RepositoryCheck,
        *,
        asks: bool = True,
    ) -> None:
        self.base, self.lines, self.sandboxes, self.repo_map = base, lines, sandboxes, repo_map
        self.asks = asks  # workers may ask their task's starter (ask_user): not on a runner, whose chat cannot answer
        self.check_repository = check_repository
        self.chromium = find_chromium(base.settings.tools.chromium_path)
        # the owner's MCP servers and the browser
        self.mcp = TaskMcp.from_settings(base.settings, base.secrets, self.chromium)

    async def _disk_baseline(self, task: Task) -> tuple[int | None, Callable[[int], Awaitable[None]] | None]:
        """The disk baseline an earlier run of the task kept (a task event), else how to keep this run's: a resumed
        task's first run's writes count against its budget. None for research: its root is the live checkout,
        which the owner may change between runs."""
        if task.worker is WorkerKind.RESEARCH:
            return None, None
        store, task_id = self.base.store, task.stored_id
        kept = [e.detail for e in await store.task_events(task_id) if e.kind == DISK_BASELINE_EVENT]
        if kept and kept[0].isdigit():
            return int(kept[0]), None

        async def keep(size: int) -> None:
            await store.add_event(TaskEvent(task_id=task_id, kind=DISK_BASELINE_EVENT, detail=str(size)))

        return None, keep

    async def make(
        self,
        task: Task,
        root: Path,
        progress: Progress,
        read_only: Iterable[Path] = (),
        folder_rules: FolderRules | None = None,
    ) -> Worker:
        """The worker of `task` in `root` (its worktree, or the workspace for research); `read_only`: paths its
        commands may read besides the root (the borrowed node_modules and the like)."""
        s, store = self.base.settings, self.base.store
        # the worktree is what the task's disk budget watches, from its first run's first command on
        bounds = self.sandboxes.watch_disk(task, root, *await self._disk_baseline(task))
        sandbox = self.sandboxes.spec(root, self.base.workspaces.resolve(task.workspace).path, read_only, task)
        clock = RunClock()  # the worker's run's time limit: ask_user stops the worker's clock while it waits
        callbacks = RoleCallbacks(
            task,
            store,
            self.base.notifier,
            progress,
            self.lines.network,
            self.chromium,
            lambda _root: sandbox,  # the worker's screenshots are taken in its own root, in its sandbox
            questions=self.lines.questions,
            clock=clock,
        )
        tools = self.tools(task, root, sandbox, callbacks, folder_rules, bounds)
        if bounds is not None:  # MCP servers of this kind (MCP_CONFIG, the browser): started now, ended with the task
            tools += await self.mcp.open(task.worker, sandbox, bounds, callbacks.mcp_gates(), callbacks.pictures)
        toolbox = Toolbox(
            tools,
            Audit(store, agent=f"{task.worker.value}-worker", chat_id=task.chat_id, task_id=task.id),
            self.base.secrets,
            max_result_chars=s.workers.tool_result_max_chars,
        )
        worker = Worker(
            client=self.base.client,
            model=s.workers.worker_model,
            system=ROLE_PROMPTS[task.worker],
            toolbox=toolbox,
            limits=worker_limits(s),
            max_output_tokens=s.workers.worker_max_output_tokens,
            # streamed: the time allowed between reads, not for all
            request_timeout=s.anthropic.anthropic_timeout_seconds,
            on_step=lambda step: self.on_step(task, progress, step),
            on_usage=callbacks.on_usage,
            inbox=self.lines.inboxes.reader(task.stored_id),
            context_window=s.workers.worker_context_tokens,
            reasoning=worker_reasoning(s),
            warn_steps=s.workers.worker_warn_steps,
            clock=clock,
            spending=self.base.spending,  # a running task stops once the day's budget is spent
        )
        return worker

    def tools(
        self,
        task: Task,
        root: Path,
        sandbox: SandboxSpec | None,
        callbacks: RoleCallbacks,
        folder_rules: FolderRules | None,
        bounds: TaskBounds | None = None,
    ) -> list[Tool]:
        """The role's tools in `root`, then the repository map's look-ups (not for research: read_file/glob/grep)."""
        s = self.base.settings
        asks = self.asks and task.worker is not WorkerKind.RESEARCH
        tools = worker_tools(
            task.worker,
            root,
            s.workers.command_timeout_seconds,
            self.base.secrets,
            callbacks.screenshot,
            callbacks.verify if task.worker is not WorkerKind.RESEARCH else None,
            task_tag(instance_token(s.paths.database_path), task.stored_id),
            sandbox=sandbox,
            ask_network=callbacks.ask_network,
            ask_user=callbacks.ask_user if asks else None,
            running=bounds.commands if bounds is not None else None,  # stopped with the task's other processes
            hidden=s.paths.private_dirs_hidden_from(root),  # a research task's root is the live checkout: maybe `self`
        )
        if folder_rules is not None:  # a folder with its own AGENTS.md gets one line in the result that first meets it
            tools = [with_folder_rules(t, folder_rules) if t.name in FOLDER_TOOLS else t for t in tools]
        if self.repo_map is not None and task.worker is not WorkerKind.RESEARCH:
            tools += repo_map_tools(self.repo_map, task_index(task), root)
        return tools

    async def on_step(self, task: Task, progress: Progress, step: str) -> None:
        """Before each worker step: progress, and the owner's repository checked (what the last step moved undone)."""
        await progress.update(step)
        await self.check_repository(task)
