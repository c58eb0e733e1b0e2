"""A task's MCP servers: the servers of MCP_CONFIG (and the frontend worker's browser) for one worker.

`TaskMcp.open` plans the servers of the worker's kind (`Planned`: config, how to reach it, what runs before each
call) and `open_task_servers` starts them all at once (the browser, once its tools are known, at its first call): a
stdio server inside the task's sandbox and network namespace (its command and SANDBOX_READ_PATHS readable;
`network: true` gives it a network of its own instead), a `url` server from the bot. It returns their tools
(`mcp__<server>__<tool>`; a server that did not start is one stand-in tool saying why) and closes every session when
the task's bounds close. A research worker (only when a server lists it in `roles`) gets an empty folder as the
servers' worktree, the workspace read-only: research changes nothing.
`probe` starts one server as a task would, for `agentlab doctor`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from agents.core.errors import ToolError
from agents.core.models import WorkerKind
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.sandbox.bwrap import SYSTEM_DIRS, SandboxProbe, SandboxSpec, spec_for
from agents.sandbox.egress_rules import egress_for
from agents.sandbox.reaping import start_group
from agents.sandbox.services import start_sandboxed_stdio, stdio_env
from agents.sandbox.shell import child_env
from agents.sandbox.task_limits import TaskBounds
from agents.sandbox.temp_folders import temp_folder, temp_prefix
from agents.tools import browser
from agents.tools.browser import BrowserInstall
from agents.tools.mcp_client import (
    Connector,
    Gate,
    KnownTool,
    McpSession,
    PictureSink,
    ServerTools,
    Target,
    process_transport,
)
from agents.tools.mcp_client import unavailable_tool as stand_in
from agents.tools.mcp_config import McpServerConfig, load
from agents.tools.toolbox import Tool
from agents.workspaces.credential_files import credential_files_on_disk

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class McpTimeouts:
    start: float = 30.0
    call: float = 120.0


def connector(config: McpServerConfig, sandbox: SandboxSpec | None, bounds: TaskBounds) -> Connector:
    """How one session reaches its server: a stdio server started in `sandbox` (unconfined only with SANDBOX=off),
    or the server's URL."""
    home: list[Path] = []  # SANDBOX=off: the server's own working directory, made at its first start

    async def connect() -> tuple[Target, asyncio.subprocess.Process | None]:
        if config.url is not None:
            from mcp.client.streamable_http import streamable_http_client  # mcp_client.py: imported when used
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = create_mcp_http_client(headers=config.headers or None)
            return streamable_http_client(config.url, http_client=client), None
        if sandbox is None:
            if not home:
                home.append(unconfined_home(config, bounds))
            process = await start_group(
                config.argv(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                cwd=home[0],
                env=unconfined_env(config.env, home[0]),
            )
        else:
            spec = sandbox.with_network(config.network)
            if config.address_space is not None:
                spec = dataclasses.replace(
                    spec, limits=dataclasses.replace(spec.limits, max_memory_bytes=config.address_space)
                )
            try:
                process = await start_sandboxed_stdio(spec, config.argv(), config.env, readable(config, spec))
            except OSError as err:
                raise ToolError(f"cannot start {config.command!r}: {err}") from None
        return process_transport(process), process

    return connect


def unconfined_home(config: McpServerConfig, bounds: TaskBounds) -> Path:
    """With SANDBOX=off a stdio server still starts in a folder of its own (empty, removed with the task), not in the
    bot's working directory or the worktree: `python -m server` or a relative `require` finds no module a worker
    wrote there."""
    folder = temp_folder("mcp", f"{bounds.name}_{config.name}")

    async def remove() -> None:
        shutil.rmtree(folder, ignore_errors=True)

    bounds.closers.append(remove)
    return folder


def unconfined_env(own: Mapping[str, str], home: Path) -> dict[str, str]:
    """The environment of a stdio server with SANDBOX=off: the bot's (without its secrets) and the server's own
    `env`, with the search paths a worker could have planted in cleared: the bot's PYTHONPATH and NODE_PATH are not
    inherited (the server's own `env` may name them), Python leaves the working directory off sys.path
    (PYTHONSAFEPATH), and HOME is the server's own folder."""
    inherited = {k: v for k, v in child_env().items() if k not in ("PYTHONPATH", "NODE_PATH")}
    return stdio_env({**inherited, "HOME": str(home), **own}, home)


def readable(config: McpServerConfig, spec: SandboxSpec) -> list[Path]:
    """What the server's sandbox must show besides the task's: its command's file (where the sandbox does not show
    it already: a bind inside a bound folder would fail) and the bot's own folders for it."""
    shown = (spec.worktree, *spec.read_only, *(Path(d) for d in SYSTEM_DIRS))
    extra = [p for p in config.command_paths() if not any(p == s or s in p.parents for s in shown)]
    return list(dict.fromkeys([*extra, *config.read_paths]))


@dataclasses.dataclass(frozen=True)
class Planned:
    """A server to start for one task: its config, how to reach it, what runs before each call."""

    config: McpServerConfig
    connect: Connector
    gate: Gate
    notes: Callable[[], str] | None = None
    listing: list[KnownTool] | None = None  # its tools known beforehand: started at its first call, not now
    listed: Callable[[list[Any]], None] | None = None  # told the tools (mcp Tool) of a server started now


async def research_sandbox(sandbox: SandboxSpec, bounds: TaskBounds) -> SandboxSpec:
    """A research worker's servers: an empty folder as their worktree, the workspace read-only. That workspace is
    the live checkout, which holds what a task's worktree never does (an untracked `.env`; in the bot's own checkout,
    the bot's `.env`): its credential files are shown empty (the bot's data folder is already: TaskSandboxes.spec)."""
    credentials = await asyncio.to_thread(credential_files_on_disk, sandbox.worktree)
    empty = temp_folder("mcp", bounds.name)

    async def remove() -> None:
        shutil.rmtree(empty, ignore_errors=True)

    bounds.closers.append(remove)
    return dataclasses.replace(
        sandbox,
        worktree=empty,
        read_only=(*sandbox.read_only, sandbox.worktree),
        hidden=(*sandbox.hidden, *credentials),
    )


async def open_task_servers(
    planned: list[Planned], bounds: TaskBounds, pictures: PictureSink, timeouts: McpTimeouts
) -> list[Tool]:
    """Start the planned servers of one task (all at once); their tools, every session closed with `bounds`."""
    if not planned:
        return []
    sessions = [McpSession(p.config.name, p.connect, timeouts.start, timeouts.call) for p in planned]

    async def close() -> None:
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)

    bounds.closers.append(close)
    for plan, session in zip(planned, sessions, strict=True):
        if plan.listing is not None:
            session.defer(plan.listing)
    started = await asyncio.gather(*(_start(s) for s in sessions), return_exceptions=True)
    tools: list[Tool] = []
    for plan, session, outcome in zip(planned, sessions, started, strict=True):
        if isinstance(outcome, asyncio.CancelledError):
            raise outcome
        if plan.listed is not None and plan.listing is None and isinstance(outcome, list):
            plan.listed(outcome)
        if isinstance(outcome, ToolError):
            tools.append(stand_in(plan.config, str(outcome)))
        elif isinstance(outcome, BaseException):
            name = plan.config.name
            tools.append(stand_in(plan.config, f"the MCP server {name} could not start ({type(outcome).__name__})"))
        else:
            tools += ServerTools(plan.config, session, plan.gate, pictures, plan.notes).tools()
    return tools


async def _start(session: McpSession) -> list[Any]:
    """The session's tools: a deferred one's as known, else those of the server it starts now."""
    return session.tools if session.deferred else await session.start()


@dataclasses.dataclass
class TaskMcp:
    """The MCP servers workers may get (MCP_CONFIG's, plus the frontend worker's browser where it is installed)."""

    servers: list[McpServerConfig]
    timeouts: McpTimeouts
    browser: BrowserInstall | None = None
    browser_note: str = ""  # what the browser is, or why there is none
    may_go_out: bool = True  # SANDBOX_NETWORK is not off: an outside page may be allowed
    problems: list[str] = dataclasses.field(default_factory=list)
    listing_dir: Path | None = None  # where the browser's tools are kept between tasks (the bot's data folder)

    @classmethod
    def from_settings(cls, settings: Settings, secrets: SecretsFilter, chromium: str | None) -> TaskMcp:
        """MCP_CONFIG's servers, their own secrets added to `secrets` (masked like the bot's), and the browser."""
        servers, problems = load(settings.tools.mcp_config)
        for problem in problems:
            log.warning("%s", problem)
        secrets.add(v for c in servers for v in c.secret_values())  # a server's own secrets: masked like the bot's
        timeouts = McpTimeouts(settings.tools.mcp_start_timeout_seconds, settings.tools.mcp_call_timeout_seconds)
        install, note = browser.find(settings.tools.browser_tools_dir, chromium)
        if install is None:
            log.info("the frontend worker has no browser, only screenshot: %s", note)
        may_go_out = settings.network.sandbox_network != "off"
        return cls(servers, timeouts, install, note, may_go_out, problems, settings.paths.data_dir)

    def bind(self, approve: Mapping[str, Iterable[str]], offline: Iterable[str]) -> None:
        """Another config's gates on the servers of the same name (a Temporal runner's task, bound by the bot's
        MCP_CONFIG): its `approve` entries gate here too, besides this config's own, and a server it runs without
        network runs without here. Only ever adds gates."""
        no_network = set(offline)
        self.servers = [
            dataclasses.replace(
                c,
                approve=c.approve | frozenset(approve.get(c.name, ())),
                network=c.network and c.name not in no_network,
            )
            for c in self.servers
        ]

    async def open(
        self,
        kind: WorkerKind,
        sandbox: SandboxSpec | None,
        bounds: TaskBounds,
        gates: Gates,
        pictures: PictureSink,
    ) -> list[Tool]:
        """Start the servers of `kind` for one task; their tools (closed with `bounds`)."""
        if kind is WorkerKind.RESEARCH and sandbox is not None and any(kind in c.roles for c in self.servers):
            sandbox = await research_sandbox(sandbox, bounds)
        mine = [c for c in self.servers if kind in c.roles]
        planned = [Planned(c, connector(c, sandbox, bounds), gates.approval(c)) for c in mine]
        if kind is WorkerKind.FRONTEND and self.browser is not None:
            run = browser.BrowserRun(self.browser, self.may_go_out)
            gate = run.gate(gates.ask, gates.whole_task)
            install, kept = self.browser, self.listing_dir
            planned.append(
                Planned(
                    run.config,
                    run.connector(sandbox, bounds, connector),
                    gate,
                    run.refused_note,
                    listing=browser.known_tools(install, kept) if kept is not None else None,
                    listed=(lambda tools: browser.keep_tools(install, tools, kept)) if kept is not None else None,
                )
            )
        return await open_task_servers(planned, bounds, pictures, self.timeouts)


@dataclasses.dataclass(frozen=True)
class Gates:
    """What the bot decides before MCP calls: approvals (per server) and the browser's outside URLs."""

    approval: Callable[[McpServerConfig], Gate]
    ask: browser.NetworkAsker  # the network question, for an outside URL
    whole_task: Callable[[], bool]  # the network is allowed for the rest of the task (Allow for this task, on)


async def probe(
    config: McpServerConfig, settings: Settings, sandbox_probe: SandboxProbe, call: str | None = None
) -> list[str]:
    """Start `config` as a task would (a sandbox of an empty folder), list its tools' names, end it (`agentlab doctor`);
    with `call`, that tool (no arguments) must answer without an error too (the browser's `list_pages` starts
    Chromium). Raises ToolError saying why it does not start."""
    with tempfile.TemporaryDirectory(prefix=temp_prefix("doctor", "probe")) as folder:
        bounds = TaskBounds(
            "doctor", settings.sandboxing.sandbox_max_memory_mb << 20, settings.sandboxing.sandbox_max_processes
        )
        sandbox = None
        if settings.sandboxing.sandbox != "off":
            # an empty temporary folder: no git config for the spec to mask, and the doctor shows no server output
            spec = spec_for(
                SecretsFilter(), sandbox_probe, Path(folder), extra_read_only=settings.sandboxing.sandbox_read_paths
            )
            egress = egress_for(settings.network.sandbox_network_domains, settings.network.sandbox_network_private)
            sandbox = dataclasses.replace(spec, task=bounds, egress=egress)
        timeouts = McpTimeouts(settings.tools.mcp_start_timeout_seconds, settings.tools.mcp_call_timeout_seconds)
        session = McpSession(config.name, connector(config, sandbox, bounds), timeouts.start, timeouts.call)
        try:
            names = [tool.name for tool in await session.start()]
            if call is not None:
                answer = await session.call(call, {})
                if answer.is_error:
                    said = " ".join(getattr(c, "text", "") for c in answer.content)[:300]
                    raise ToolError(f"its {call} failed: {said}")
            return names
        finally:
            await session.close()
            await bounds.close()
