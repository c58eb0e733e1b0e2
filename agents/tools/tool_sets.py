"""The tool sets: the orchestrator's, and each worker role's (a role is a prompt plus one of these).

Every tool's schema sits beside its handler, and the sets are read side by side.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from agents.core.models import Caller, WorkerKind
from agents.core.protocols import WorkDesk
from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import SandboxSpec
from agents.sandbox.network_gate import NetworkDecision
from agents.sandbox.pause import RunningCommands
from agents.sandbox.services import TaskServices
from agents.sandbox.shell import child_env, run_command
from agents.sandbox.task_limits import TaskBounds
from agents.sandbox.task_programs import task_programs
from agents.tools import file_tools
from agents.tools.desk_tools import desk_tools
from agents.tools.toolbox import Tool, ToolResult, prop
from agents.workspaces.folders import Workspaces, check_reach

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

_READ_DESC = (
    "Read a text file. Each line comes back prefixed with its line number and a tab, as `cat -n` prints it "
    "(`    12\tdef add(a, b):`): the prefix is not part of the file, leave it out of edit_file's `old`. Returns at "
    "most 2000 lines (or ~100 KB) per call, with a note saying which offset to read next; use offset/limit for "
    "large files, or grep first to find the lines you need. Reading several files? Call read_file for each in the "
    "same turn: independent look-ups run at the same time."
)
_GLOB_DESC = (
    "List the files whose path matches a glob pattern, relative to the workspace root: `**/*.py` every Python "
    "file, `src/**/test_*.js` test files under src, `*.md` the top level only; folders end in `/`. Sorted, at most "
    "500 paths; .git, node_modules, virtual environments and caches are skipped. Use it to find where things are "
    "before reading them."
)
_GREP_DESC = (
    "Search file contents with a regular expression (ripgrep syntax) and return `path:line: text` for each "
    "matching line (binaries, .git, node_modules, virtual environments and caches skipped). Narrow it with `path` "
    "(a file or folder) and `glob` (e.g. '*.ts'); ignore_case for case-insensitive search. Use it to find "
    "definitions, callers and error messages instead of reading whole files."
)


def orchestrator_tools(
    workspaces: Workspaces,
    desk: WorkDesk,
    caller: Caller,
    secrets: SecretsFilter,
    *,
    owner: bool,
    hidden: Sequence[Path] = (),
) -> list[Tool]:
    """Read-only look-ups across workspaces plus the work tools that hand off to workers. `owner`: whether the
    caller is an owner; a member's look-up in the bot's own checkout is refused (`Workspaces.reach`). `hidden`: the
    bot's own folders (`PathSettings.private_dirs`), out of the look-ups' reach in any workspace."""

    confined_to = caller.confined_to

    def root(workspace: str) -> Path:
        if confined_to is not None:
            return check_reach(workspaces.confined(confined_to, workspace), owner).path
        return workspaces.reach(workspace, owner).path

    work = desk_tools(desk, caller)
    if confined_to is not None:  # a request from outside the chat starts work in its workspace, and nothing else
        work = [tool for tool in work if tool.name in CONFINED_WORK_TOOLS]
    return [*read_only_tools(root, {"workspace": _WORKSPACE}, secrets, hidden=hidden), *work]


# The work tools of a confined turn (a GitHub mention): new work in its own workspace. The others act on what the
# conversation already holds (tasks, proposals, schedules, standing notes, workspaces), none of it the business of a
# request whose text anyone may have written and whose answer is posted in public.
CONFINED_WORK_TOOLS = frozenset({"start_research", "start_task"})


RootOf = Callable[..., Path]  # the root a look-up reads, from the arguments `read_only_tools` was given names for


def read_only_tools(
    root_of: RootOf, where: dict[str, Any], secrets: SecretsFilter, *, hidden: Sequence[Path] = ()
) -> list[Tool]:
    """read_file, glob and grep under `root_of(**where_arguments)`. `where`: the schema properties that name the
    root (the orchestrator's `workspace`), passed to `root_of`; none for a worker, whose root is its worktree.
    `secrets`: what git metadata shows is masked with it. `hidden`: the bot's own folders (its data and task
    worktrees, inside its checkout `self` by default), never read below a root (`file_tools._private`)."""

    async def read_file(
        path: str,
        offset: int | None = None,
        limit: int | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
        **place: str,
    ) -> str:
        return await file_tools.read_window(
            root_of(**place), path, offset, limit, start_line, end_line, secrets=secrets, hidden=hidden
        )

    async def glob(pattern: str, **place: str) -> str:
        return await file_tools.glob(root_of(**place), pattern, hidden=hidden)

    async def grep(
        pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False, **place: str
    ) -> str:
        return await file_tools.grep(
            root_of(**place), pattern, path=path, glob=glob, ignore_case=ignore_case, secrets=secrets, hidden=hidden
        )

    named = list(where)
    return [
        Tool(
            "read_file",
            _READ_DESC,
            {**where, "path": _PATH, "offset": _OFFSET, "limit": _LIMIT},
            read_file,
            [*named, "path"],
            read_only=True,
        ),
        Tool("glob", _GLOB_DESC, {**where, "pattern": _PATTERN_GLOB}, glob, [*named, "pattern"], read_only=True),
        Tool(
            "grep",
            _GREP_DESC,
            {**where, "pattern": _PATTERN_RE, "path": _GREP_PATH, "glob": _GREP_GLOB, "ignore_case": _ICASE},
            grep,
            [*named, "pattern"],
            read_only=True,
        ),
    ]


Screenshotter = Callable[[Path, str], Awaitable[ToolResult]]


Verifier = Callable[[int, str], Awaitable[str]]


NetworkAsker = Callable[[str, tuple[str, ...]], Awaitable[NetworkDecision]]  # (command, cautions)


async def network_cautions(
    command: str, background: bool, sandbox: SandboxSpec, env: dict[str, str], root: Path
) -> tuple[str, ...]:
    """What the owner asked to allow `command` the network must know that its text does not say: a background
    service keeps the network after the call, and a program the task can rewrite is the task's, not the system's."""
    cautions = []
    if background:
        cautions.append(
            "It starts a background service: allowed, the service keeps the network until it stops or the task "
            "ends, not only while this command runs."
        )
    for program in await asyncio.to_thread(task_programs, command, sandbox, env):
        where = program.relative_to(root) if program.is_relative_to(root) else program
        cautions.append(
            f"{program.name} here is the task's own {where} (in a folder the worker can rewrite), not the system's "
            f"{program.name}: allowed, whatever the worker put there runs with the network."
        )
    return tuple(cautions)


UserAsker = Callable[[str, list[str] | None], Awaitable[str]]  # ask_user: question, options → the answer's text


def worker_tools(
    kind: WorkerKind,
    root: Path,
    command_timeout: float,
    secrets: SecretsFilter,
    screenshot: Screenshotter | None = None,
    verify: Verifier | None = None,
    env_tag: dict[str, str] | None = None,
    sandbox: SandboxSpec | None = None,
    ask_network: NetworkAsker | None = None,
    ask_user: UserAsker | None = None,
    running: RunningCommands | None = None,
    hidden: Sequence[Path] = (),
) -> list[Tool]:
    """The tools of one worker role, all confined to `root` (the task's worktree); commands carry `env_tag`, and
    each one's first process is in `running` while it runs (the task's `TaskBounds.commands`). The file tools never
    reach the bot's own folders `hidden` below `root` (a research task's root is the live checkout, maybe `self`).

    With `sandbox`, commands run inside it (no network); `network=true` runs one with the network once
    `ask_network` allows it. Without a sandbox (SANDBOX=off) nothing confines a command, network included.

    Why long: each tool's handler is a closure over the role's root, sandbox and callbacks, written beside its
    schema so that the two are read together."""

    async def write_file(path: str, content: str) -> str:
        return await file_tools.write_file(root, path, content, hidden=hidden)

    async def edit_file(path: str, old: str, new: str) -> str:
        return await file_tools.edit_file(root, path, old, new, hidden=hidden)

    async def run(command: str, network: bool = False, background: bool = False) -> ToolResult:
        confined = sandbox
        env = {**child_env(), **(env_tag or {})}
        if network and sandbox is not None:
            decision = (
                await ask_network(command, await network_cautions(command, background, sandbox, env, root))
                if ask_network is not None
                else NetworkDecision(False, "Network access is not available to this worker; the command was not run.")
            )
            if not decision.allowed:
                return ToolResult(decision.explanation, is_error=True)
            confined = sandbox.with_network(True)
        if background:
            if confined is None or confined.task is None:
                return ToolResult("background=true needs the task's sandbox (SANDBOX=off has none)", is_error=True)
            said = await TaskServices.of(confined.task).start(confined, command, env)
            return ToolResult(said)
        result = await run_command(
            command, cwd=root, timeout=command_timeout, env=env, sandbox=confined, running=running
        )
        return ToolResult(result.format_for_model(), is_error=not result.ok)

    tools = read_only_tools(lambda: root, {}, secrets, hidden=hidden)
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
            "network=true, which asks the owner first (they may say no; then do without). background=true starts "
            "a service (e.g. a dev server) that runs until the task ends: the call returns once it printed something "
            "or opened a port, later commands reach it on localhost, its later output is in the log file named. "
            "Keep the server in the foreground of that command (no trailing &): it ends with the command.",
            {
                "command": prop("string", "the command line"),
                "network": prop(
                    "boolean", "true if the command needs the network (e.g. installing a package); default false"
                ),
                "background": prop(
                    "boolean", "true to start a long-running service (dev server) that lives until the task ends"
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
    if ask_user is not None:

        async def ask(question: str, options: list[str] | None = None) -> str:
            return await ask_user(question, options)

        tools.append(
            Tool(
                "ask_user",
                "Ask the user who started the task a question and wait for the answer (it is the result). Only when "
                "a wrong guess would waste the task: a real choice the instructions leave open. Give options when "
                "there are a few clear answers (each becomes a button; the user may also answer in words). With no "
                "answer in time the result says so: then decide yourself and say so in your report.",
                {
                    "question": prop("string", "the question, short and self-contained"),
                    "options": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "the possible answers, a few words each (optional; at most 8)",
                    },
                },
                ask,
                ["question"],
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
    if sandbox is not None and sandbox.task is not None:
        return [with_service_notes(tool, sandbox.task) for tool in tools]
    return tools


def with_service_notes(tool: Tool, bounds: TaskBounds) -> Tool:
    """`tool` whose results also say which of the task's services exited since the last tool result."""
    handler = tool.handler

    async def noted(**kwargs: Any) -> object:
        result = await handler(**kwargs)
        notes = bounds.services.exit_notes() if bounds.services is not None else []
        if not notes:
            return result
        text = "\n".join(notes)
        if isinstance(result, ToolResult):
            if isinstance(result.content, str):
                return ToolResult(f"{result.content}\n{text}", result.is_error)
            return ToolResult([*result.content, {"type": "text", "text": text}], result.is_error)
        return f"{result}\n{text}" if isinstance(result, str) else result

    return dataclasses.replace(tool, handler=noted)
