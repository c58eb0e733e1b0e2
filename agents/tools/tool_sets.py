"""The tool sets of INTERFACE.md: the orchestrator's, and each worker role's (a role is a prompt plus one of these).

Why one module over 400 lines: every tool's schema sits beside its handler, and the sets are read side by side.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from agents.core.models import WorkerKind
from agents.core.protocols import WorkDesk
from agents.sandbox.bwrap import SandboxSpec
from agents.sandbox.network_gate import NetworkDecision
from agents.sandbox.shell import child_env, run_command
from agents.tools import file_tools
from agents.tools.toolbox import Tool, ToolResult, prop
from agents.tools.workspaces import Workspaces

_PATH = prop("string", "path relative to the workspace root")
_WORKSPACE = prop(
    "string", "workspace name as listed in the context (loose spelling is resolved); 'self' is the bot's own code"
)
_OFFSET = prop("integer", "first line to read (1-based, optional; default 1)")
_LIMIT = prop("integer", "how many lines to read (optional; at most 2000 per call)")
_PATTERN_GLOB = prop("string", "glob pattern relative to the workspace, e.g. '**/*.py'")
_PATTERN_RE = prop("string", "regular expression to search for (ripgrep/Rust syntax: no look-around or backreferences)")
_GREP_PATH = prop("string", "file or folder to search in, relative to the workspace (default: all)")
_GREP_GLOB = prop("string", "only search files matching this glob, e.g. '*.py' (optional)")
_ICASE = prop("boolean", "case-insensitive search (default false)")
_ATTACHMENTS = prop(
    "array",
    "ids of photos/files the user sent (shown as [attachment #N: …]) that the worker should "
    "see, e.g. a screenshot to match (optional)",
    items={"type": "integer"},
)

_READ_DESC = (
    "Read a text file (numbered lines). Returns at most 2000 lines (or ~100 KB) per call, with a note "
    "saying which offset to read next; use offset/limit for large files, or grep first."
)
_GLOB_DESC = "List files matching a glob pattern."
_GREP_DESC = "Search file contents with a regular expression; returns path:line: text matches."


def orchestrator_tools(workspaces: Workspaces, desk: WorkDesk, chat_id: int) -> list[Tool]:
    """Read-only look-ups across workspaces plus the work tools that hand off to workers."""

    def root(workspace: str) -> Path:
        return workspaces.resolve(workspace).path

    async def read_file(
        workspace: str,
        path: str,
        offset: int | None = None,
        limit: int | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
    ) -> str:
        return await file_tools.read_window(root(workspace), path, offset, limit, start_line, end_line)

    async def glob(workspace: str, pattern: str) -> str:
        return await file_tools.glob(root(workspace), pattern)

    async def grep(
        workspace: str, pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False
    ) -> str:
        return await file_tools.grep(root(workspace), pattern, path=path, glob=glob, ignore_case=ignore_case)

    async def start_research(
        workspace: str, request: str, refines: int | None = None, attachments: list[int] | None = None
    ) -> str:
        return await desk.start_research(chat_id, workspace, request, refines, attachments)

    async def start_task(
        workspace: str,
        worker: str,
        instructions: str,
        background: bool = True,
        acceptance_criteria: list[str] | None = None,
        attachments: list[int] | None = None,
        save_attachments: bool = False,
    ) -> str:
        return await desk.start_task(
            chat_id, workspace, worker, instructions, background, acceptance_criteria, attachments, save_attachments
        )

    async def approve_proposal(proposal_id: int | None = None, notes: str | None = None) -> str:
        return await desk.approve_proposal(chat_id, proposal_id, notes)

    async def reject_proposal(proposal_id: int | None = None, reason: str | None = None) -> str:
        return await desk.reject_proposal(chat_id, proposal_id, reason)

    async def list_tasks() -> str:
        return await desk.list_tasks(chat_id)

    async def cancel_task(task_id: int) -> str:
        return await desk.cancel_task(chat_id, task_id)

    async def message_task(task_id: int, text: str) -> str:
        return await desk.message_task(chat_id, task_id, text)

    async def get_proposal(proposal_id: int | None = None) -> str:
        return await desk.get_proposal(chat_id, proposal_id)

    async def get_task(task_id: int) -> str:
        return await desk.get_task(chat_id, task_id)

    async def merge_task(task_id: int) -> str:
        return await desk.merge_task(chat_id, task_id)

    async def discard_task(task_id: int) -> str:
        return await desk.discard_task(chat_id, task_id)

    async def create_workspace(name: str) -> str:
        return await desk.create_workspace(name)

    workers = [w.value for w in WorkerKind if w is not WorkerKind.RESEARCH]
    return [
        Tool(
            "read_file",
            _READ_DESC,
            {"workspace": _WORKSPACE, "path": _PATH, "offset": _OFFSET, "limit": _LIMIT},
            read_file,
            ["workspace", "path"],
        ),
        Tool("glob", _GLOB_DESC, {"workspace": _WORKSPACE, "pattern": _PATTERN_GLOB}, glob, ["workspace", "pattern"]),
        Tool(
            "grep",
            _GREP_DESC,
            {
                "workspace": _WORKSPACE,
                "pattern": _PATTERN_RE,
                "path": _GREP_PATH,
                "glob": _GREP_GLOB,
                "ignore_case": _ICASE,
            },
            grep,
            ["workspace", "pattern"],
        ),
        Tool(
            "start_research",
            "Start the read-only research worker on a workspace; it writes a proposal that is shown to the user with "
            "Approve/Reject buttons. Use for improvement/refactor/review requests, and to rework a proposal "
            "(pass its id as refines: the worker then sees that proposal whole and the new one replaces it).",
            {
                "workspace": _WORKSPACE,
                "request": prop("string", "what to study and propose, self-contained"),
                "refines": prop("integer", "id of the proposal being changed (optional)"),
                "attachments": _ATTACHMENTS,
            },
            start_research,
            ["workspace", "request"],
        ),
        Tool(
            "start_task",
            "Start a worker that changes code in a workspace (on its own git branch) and reports back.",
            {
                "workspace": _WORKSPACE,
                "worker": prop("string", "code, frontend or test", enum=workers),
                "instructions": prop("string", "complete, self-contained instructions for the worker"),
                "background": prop("boolean", "true: run in the background and notify when done; false: wait for it"),
                "acceptance_criteria": prop(
                    "array",
                    "2-5 checkable statements that define done (written from the request); the worker verifies each",
                    items={"type": "string"},
                ),
                "attachments": _ATTACHMENTS,
                "save_attachments": prop(
                    "boolean",
                    "also save those files in the worker's checkout (under "
                    ".agentlab/attachments/, ignored by git), for work that needs the file itself, "
                    "e.g. an image to put on a page (default false)",
                ),
            },
            start_task,
            ["workspace", "worker", "instructions", "background"],
        ),
        Tool(
            "approve_proposal",
            "Approve a pending proposal and start a code worker on it. No id: the chat's only pending proposal (with "
            "several pending, the tool lists them instead: ask the user which). Small changes the user asked for "
            "with the approval go in notes; they reach the code worker with the proposal.",
            {
                "proposal_id": prop("integer", "proposal id (optional)"),
                "notes": prop(
                    "string", "small changes to the proposal the user asked for, e.g. 'call it parse_all' (optional)"
                ),
            },
            approve_proposal,
        ),
        Tool(
            "reject_proposal",
            "Reject a pending proposal. No id: the chat's only pending one.",
            {"proposal_id": prop("integer", "proposal id (optional)"), "reason": prop("string", "why (optional)")},
            reject_proposal,
        ),
        Tool("list_tasks", "List this chat's recent tasks with their status.", {}, list_tasks),
        Tool(
            "cancel_task",
            "Cancel a running or pending task and kill every process it started.",
            {"task_id": prop("integer", "task number")},
            cancel_task,
            ["task_id"],
        ),
        Tool(
            "message_task",
            "Pass a note to a running task's worker (it reads it before its next step), e.g. 'also "
            "update the README'. Only running tasks take notes.",
            {"task_id": prop("integer", "task number"), "text": prop("string", "the note, in the user's words")},
            message_task,
            ["task_id", "text"],
        ),
        Tool(
            "get_proposal",
            "Show a proposal whole (no id: the chat's pending one, or the newest).",
            {"proposal_id": prop("integer", "proposal id (optional)")},
            get_proposal,
        ),
        Tool(
            "get_task",
            "Show one task: status, the worker's report, tests, files changed, branch and commit.",
            {"task_id": prop("integer", "task number")},
            get_task,
            ["task_id"],
        ),
        Tool(
            "merge_task",
            "Merge a finished task's branch into the branch it started from.",
            {"task_id": prop("integer", "task number")},
            merge_task,
            ["task_id"],
        ),
        Tool(
            "discard_task",
            "Throw a task's work away: stop it if it runs, delete its branch.",
            {"task_id": prop("integer", "task number")},
            discard_task,
            ["task_id"],
        ),
        Tool(
            "create_workspace",
            "Create a new, empty project: a git repository under the workspaces folder (for a new project that has "
            "no folder yet, e.g. 'build me a portfolio site'); then start work in it.",
            {"name": prop("string", "folder name: letters, digits, - and _ (e.g. portfolio-site)")},
            create_workspace,
            ["name"],
        ),
    ]


Screenshotter = Callable[[Path, str], Awaitable[ToolResult]]


Verifier = Callable[[int, str], Awaitable[str]]


NetworkAsker = Callable[[str], Awaitable[NetworkDecision]]


def worker_tools(
    kind: WorkerKind,
    root: Path,
    command_timeout: float,
    screenshot: Screenshotter | None = None,
    verify: Verifier | None = None,
    env_tag: dict[str, str] | None = None,
    sandbox: SandboxSpec | None = None,
    ask_network: NetworkAsker | None = None,
) -> list[Tool]:
    """The tools of one worker role, all confined to `root` (the task's worktree); commands carry `env_tag`.

    With `sandbox`, commands run inside it (no network); `network=true` runs one with the network once
    `ask_network` allows it. Without a sandbox (SANDBOX=off) nothing confines a command, network included."""

    async def read_file(
        path: str,
        offset: int | None = None,
        limit: int | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
    ) -> str:
        return await file_tools.read_window(root, path, offset, limit, start_line, end_line)

    async def glob(pattern: str) -> str:
        return await file_tools.glob(root, pattern)

    async def grep(pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> str:
        return await file_tools.grep(root, pattern, path=path, glob=glob, ignore_case=ignore_case)

    async def write_file(path: str, content: str) -> str:
        return await file_tools.write_file(root, path, content)

    async def edit_file(path: str, old: str, new: str) -> str:
        return await file_tools.edit_file(root, path, old, new)

    async def run(command: str, network: bool = False) -> ToolResult:
        confined = sandbox
        if network and sandbox is not None:
            decision = (
                await ask_network(command)
                if ask_network is not None
                else NetworkDecision(False, "Network access is not available to this worker; the command was not run.")
            )
            if not decision.allowed:
                return ToolResult(decision.explanation, is_error=True)
            confined = sandbox.with_network(True)
        result = await run_command(
            command, cwd=root, timeout=command_timeout, env={**child_env(), **(env_tag or {})}, sandbox=confined
        )
        return ToolResult(result.format_for_model(), is_error=not result.ok)

    tools = [
        Tool("read_file", _READ_DESC, {"path": _PATH, "offset": _OFFSET, "limit": _LIMIT}, read_file, ["path"]),
        Tool("glob", _GLOB_DESC, {"pattern": _PATTERN_GLOB}, glob, ["pattern"]),
        Tool(
            "grep",
            _GREP_DESC,
            {"pattern": _PATTERN_RE, "path": _GREP_PATH, "glob": _GREP_GLOB, "ignore_case": _ICASE},
            grep,
            ["pattern"],
        ),
    ]
    if kind is WorkerKind.RESEARCH:
        return tools
    tools += [
        Tool(
            "write_file",
            "Create or overwrite a file (parents are created).",
            {"path": _PATH, "content": prop("string", "the whole new file content")},
            write_file,
            ["path", "content"],
        ),
        Tool(
            "edit_file",
            "Replace one exact occurrence of `old` with `new` in a file. `old` must match exactly once.",
            {"path": _PATH, "old": prop("string", "exact text to replace"), "new": prop("string", "replacement text")},
            edit_file,
            ["path", "old", "new"],
        ),
        Tool(
            "run_command",
            f"Run a shell command in the workspace root (bash; timeout {int(command_timeout)} s; output trimmed). "
            "It runs in a sandbox: only the workspace is writable, and there is no network unless you set "
            "network=true, which asks the owner first (they may say no; then do without).",
            {
                "command": prop("string", "the command line"),
                "network": prop(
                    "boolean", "true if the command needs the network (e.g. installing a package); default false"
                ),
            },
            run,
            ["command"],
        ),
    ]
    if verify is not None:
        tools.append(
            Tool(
                "verify_criterion",
                "Mark acceptance criterion number `index` as verified, with the evidence (test run, command "
                "output, file content) that shows it holds. Only verify what you have checked.",
                {
                    "index": prop("integer", "criterion number (1-based)"),
                    "evidence": prop("string", "what shows the criterion holds"),
                },
                verify,
                ["index", "evidence"],
            )
        )
    if kind is WorkerKind.FRONTEND and screenshot is not None:

        async def take_screenshot(target: str) -> ToolResult:
            return await screenshot(root, target)

        tools.append(
            Tool(
                "screenshot",
                "Render an HTML file of the workspace or a URL in headless Chromium at desktop and phone "
                "widths; returns the pictures (they are also sent to the user).",
                {"target": prop("string", "a workspace file (e.g. index.html) or an http(s) URL")},
                take_screenshot,
                ["target"],
            )
        )
    return tools
