"""The frontend worker's browser: chrome-devtools-mcp (pinned) with Debian's Chromium, one per task.

`make setup` installs the package into BROWSER_TOOLS_DIR (`.tools/`, never globally) where node/npm and Chromium exist
(scripts/install-browser.sh). A frontend task then gets it as the MCP server `browser` (tools `mcp__browser__*`),
started inside the task's sandbox and network namespace, Chromium included: it reaches the task's services on
`localhost` and nothing else. An outside URL given to `new_page` / `navigate_page` is asked of the owner like a
network command (Allow once: that host; Allow for this task or SANDBOX_NETWORK=on: every public host; off: never),
and only then reached, through the task's egress proxy (agents/sandbox/egress_proxy.py).
Without the package, node or Chromium the frontend worker keeps `screenshot` (its prompt says what to do then).
Once a start listed its tools (kept in the bot's data folder, `browser-tools.json`, for that version and our flags:
the install folder may not be the bot's to write), a frontend task offers them without starting anything, and the
browser starts at the worker's first call of one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shlex
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agents.core.errors import ToolError
from agents.core.models import WorkerKind
from agents.sandbox.bwrap import SandboxSpec
from agents.sandbox.egress_proxy import FORWARDER, PROXY_PORT, EgressProxy
from agents.sandbox.egress_rules import domain_allowed
from agents.sandbox.network_gate import NetworkDecision
from agents.sandbox.task_limits import TaskBounds
from agents.sandbox.temp_folders import temp_folder
from agents.tools.mcp_client import Connector, Gate, KnownTool, Target, input_schema
from agents.tools.mcp_config import McpServerConfig
from agents.tools.screenshot import on_loopback

TOOLS_DIR = Path(__file__).resolve().parents[2] / ".tools"  # the bot's own folder for it (gitignored)
PACKAGE = "chrome-devtools-mcp"
VERSION = "1.11.0"
ENTRY = Path("node_modules") / PACKAGE / "build" / "src" / "bin" / f"{PACKAGE}.js"
BROWSER_ADDRESS_SPACE = 1 << 40  # V8 and Chromium reserve far more address space than they use
NAVIGATING = ("new_page", "navigate_page")
FLAGS = (
    "--headless",
    "--isolated",
    "--no-usage-statistics",
    "--no-performance-crux",
    "--viewport=1280x800",
    "--chromeArg=--no-sandbox",  # the task's bwrap is the sandbox; Chromium's own needs namespaces it cannot make
    "--chromeArg=--disable-dev-shm-usage",
)
# chrome-devtools-mcp checks npm for a newer version of itself at each start (a detached node process that runs
# `npm config get registry`, about half a second of CPU): pointless where the version is pinned, the sandbox has
# no network and its home, where the check's cache would live, is new for every task.
ENV = {"CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1"}

NetworkAsker = Callable[[str, tuple[str, ...]], Awaitable[NetworkDecision]]  # (what it opens, cautions)
log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class BrowserInstall:
    """Where the browser's parts are on this machine."""

    node: str
    entry: Path
    chromium: str
    version: str

    @property
    def folder(self) -> Path:
        return self.entry.parents[4]  # BROWSER_TOOLS_DIR: node_modules/<package>/build/src/bin/<entry>


def find(tools_dir: Path | None, chromium: str | None) -> tuple[BrowserInstall | None, str]:
    """The installed browser, or None and one sentence on what is missing (for doctor and the log)."""
    tools_dir = tools_dir or TOOLS_DIR
    entry = (tools_dir / ENTRY).resolve()
    node = shutil.which("node")
    if chromium is None:
        return None, "Chromium is not installed (apt install chromium)"
    if node is None:
        return None, "node is not installed (apt install nodejs npm)"
    if not entry.is_file():
        return None, f"{PACKAGE} is not installed in {tools_dir} (make setup, or scripts/install-browser.sh)"
    try:
        version = json.loads((tools_dir / "node_modules" / PACKAGE / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        version = "unknown"
    return BrowserInstall(node, entry, chromium, str(version)), f"{PACKAGE} {version} with {chromium}"


def config(install: BrowserInstall, proxy: bool) -> McpServerConfig:
    """The browser as an MCP server of the frontend worker (with the forwarder to the egress proxy when `proxy`)."""
    args = [str(install.entry), *FLAGS, f"--executablePath={install.chromium}"]
    if proxy:
        args.append(f"--proxyServer=http://127.0.0.1:{PROXY_PORT}")
    return McpServerConfig(
        name="browser",
        command=install.node,
        args=tuple(args),
        env=dict(ENV),
        roles=frozenset({WorkerKind.FRONTEND}),
        read_paths=(install.folder.resolve(),),
        address_space=BROWSER_ADDRESS_SPACE,
    )


LISTING = "browser-tools.json"  # in the bot's data folder: the tools the installed version listed at a start


def _listing_key(install: BrowserInstall) -> str:
    """What the listing depends on: the installed package (its version and entry file) and our flags."""
    return json.dumps([install.version, str(install.entry), install.entry.stat().st_mtime_ns, FLAGS])


def known_tools(install: BrowserInstall, folder: Path) -> list[KnownTool] | None:
    """The browser's tools as the installed version listed them at an earlier start, kept in `folder` (None when
    none matches): a frontend task offers them at once and starts the browser at the worker's first call of one of
    them, so a task that never looks at a page never starts node (about a second of CPU) or Chromium."""
    try:
        saved = json.loads((folder / LISTING).read_text())
        if saved.get("key") != _listing_key(install):
            return None
        return [
            KnownTool(t["name"], dict(t["inputSchema"]), t.get("description"), t.get("title")) for t in saved["tools"]
        ]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def keep_tools(install: BrowserInstall, tools: list[Any], folder: Path) -> None:
    """Remember in `folder` the tools (mcp Tool) a started browser listed, for the next frontend task
    (`known_tools`)."""
    try:
        listing = [
            {"name": t.name, "inputSchema": input_schema(t), "description": t.description, "title": t.title}
            for t in tools
        ]
        target = folder / LISTING
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, prefix=LISTING, delete=False) as file:
            json.dump({"key": _listing_key(install), "tools": listing}, file)
        os.replace(file.name, target)  # whole or not at all, whoever reads it meanwhile
    except (OSError, ValueError, TypeError, AttributeError) as err:
        log.info("the browser's tools are not remembered (%s): each frontend task starts it", err)


def outside_url(url: str) -> str | None:
    """The host of `url` when it is outside the task (not loopback, not a page of the browser itself), else None."""
    parts = urlsplit(url.strip())
    if parts.scheme in ("about", "data", "blob", "file", "chrome", "devtools", "javascript"):
        return None
    host = (parts.hostname or "").lower()
    if not host and parts.scheme not in ("http", "https", "ws", "wss"):
        return None
    return None if on_loopback(url) else host or url


def url_port(url: str) -> int:
    """The port `url` names, or its scheme's (443 for anything but plain http and ws)."""
    parts = urlsplit(url.strip())
    try:
        explicit = parts.port
    except ValueError:  # not a number, or out of range: no page there to allow
        explicit = None
    return explicit or (80 if parts.scheme in ("http", "ws") else 443)


class BrowserRun:
    """The browser of one task: its connector (the forwarder beside it when outside pages may be allowed) and its
    gate (outside URLs asked of the owner, then opened in the proxy)."""

    def __init__(self, install: BrowserInstall, may_go_out: bool) -> None:
        self.install = install
        self.proxy: EgressProxy | None = None
        self.config = config(install, proxy=may_go_out)
        self.may_go_out = may_go_out

    def connector(self, sandbox: SandboxSpec | None, bounds: TaskBounds, start: Callable[..., Connector]) -> Connector:
        """`start(config, sandbox, bounds)` is the ordinary stdio connector; the forwarder runs before the server."""
        if sandbox is None or not self.may_go_out:
            return start(self.config, sandbox, bounds)
        folder = temp_folder("proxy", bounds.name)
        folder.chmod(0o755)
        # the same egress as the task's commands: public addresses only, the allowed domains, the opened private ranges
        self.proxy = EgressProxy(folder, domains=sandbox.egress.domains, private=sandbox.egress.private)
        proxy = self.proxy

        async def close() -> None:
            await proxy.close()
            shutil.rmtree(folder, ignore_errors=True)

        bounds.closers.append(close)
        forward = f"python3 {shlex.quote(str(FORWARDER))} {shlex.quote(str(proxy.socket_path))} {PROXY_PORT}"
        server = shlex.join(self.config.argv())
        wrapped = dataclasses.replace(
            self.config,
            command="/bin/sh",
            args=("-c", f"{forward} </dev/null >/dev/null 2>&1 & exec {server}"),
            read_paths=(*self.config.read_paths, FORWARDER, folder),
        )
        inner = start(wrapped, sandbox, bounds)

        async def connect() -> tuple[Target, asyncio.subprocess.Process | None]:
            if not proxy.listening:
                await proxy.start()
            return await inner()

        return connect

    def refused_note(self) -> str:
        """After a browser call: the outside hosts its pages asked for and the proxy refused (not allowed), once."""
        if self.proxy is None or not self.proxy.refused:
            return ""
        hosts = self.proxy.refused_names()
        return (
            f"[The browser was refused these hosts, not allowed by the owner: {hosts}. Resources from them did not "
            "load; to ask for one, open a URL there with new_page or navigate_page.]"
        )

    def gate(self, ask: NetworkAsker, whole_task: Callable[[], bool]) -> Gate:
        """Before new_page / navigate_page: an outside URL is asked of the owner (like a network command)."""

        async def gate(tool: str, arguments: dict[str, Any], asks: bool) -> None:  # no `approve`: asks is False
            url = arguments.get("url")
            if tool not in NAVIGATING or not isinstance(url, str):
                return
            host = outside_url(url)
            port = url_port(url)
            if host is None or (self.proxy is not None and self.proxy.allowed(host, port)):
                return
            if self.proxy is None:
                raise ToolError(
                    f"{url} is outside the task and this browser has no way out (SANDBOX_NETWORK=off or no sandbox); "
                    "open the task's own pages on localhost"
                )
            if self.proxy.domains and not domain_allowed(host, self.proxy.domains):
                raise ToolError(f"{url} was not opened: {self.proxy.refusal(host, port)}")
            decision = await ask(
                f"open {url} in the browser ({tool})",
                (
                    f"Allowed once, the browser reaches {host} for the rest of the task (the page's own requests "
                    "and later pages there too), not only this page; the task's commands do not.",
                ),
            )
            if not decision.allowed:
                raise ToolError(f"{url} was not opened: {decision.explanation}")
            if whole_task():
                self.proxy.allow_all()
            else:
                self.proxy.allow(host, port)

        return gate
