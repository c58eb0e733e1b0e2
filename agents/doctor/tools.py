"""The agents' outside tools: ripgrep (their grep) and Chromium (screenshots) found; the frontend worker's browser
and the MCP servers of MCP_CONFIG started in a task's sandbox, as a task would start them.
"""

from __future__ import annotations

import asyncio

from agents.core.errors import ToolError
from agents.core.settings import Settings
from agents.doctor.checks import Check, Level
from agents.sandbox import bwrap
from agents.tools import browser
from agents.tools.mcp_config import McpServerConfig
from agents.tools.mcp_config import load as load_mcp_config
from agents.tools.mcp_tasks import probe as probe_mcp
from agents.tools.ripgrep import ripgrep_path
from agents.tools.screenshot import find_chromium


def check_ripgrep(settings: Settings) -> Check:
    """ripgrep, the engine of the agents' grep tool (never Python's backtracking re)."""
    found = ripgrep_path()
    if found:
        return Check(Level.ok, "ripgrep", f"{found} (the agents' grep)")
    return Check(Level.warn, "ripgrep", "not found: the agents' grep tool refuses every search", "apt install ripgrep")


def check_chromium(settings: Settings) -> Check:
    """Chromium for the frontend worker's screenshots (optional)."""
    found = find_chromium(settings.tools.chromium_path)
    if found:
        return Check(Level.ok, "chromium", f"{found} (frontend screenshots)")
    if settings.tools.chromium_path:
        return Check(
            Level.warn,
            "chromium",
            f"CHROMIUM_PATH {settings.tools.chromium_path} is not an executable",
            "fix CHROMIUM_PATH or leave it empty to look for chromium on PATH",
        )
    return Check(
        Level.warn,
        "chromium",
        "not found: the frontend worker cannot take screenshots",
        "optional: apt install chromium (or set CHROMIUM_PATH)",
    )


async def check_browser(settings: Settings) -> Check:
    """The frontend worker's browser (chrome-devtools-mcp): installed, and whether it starts in a task's sandbox."""
    install, what = browser.find(settings.tools.browser_tools_dir, find_chromium(settings.tools.chromium_path))
    if install is None:
        return Check(
            Level.warn,
            "browser",
            f"{what}: the frontend worker keeps only `screenshot`",
            "make setup (scripts/install-browser.sh) where node, npm and chromium are installed",
        )
    sandbox = bwrap.SandboxProbe()
    if settings.sandboxing.sandbox != "off" and await sandbox.unavailable_reason():
        return Check(Level.warn, "browser", f"{what} cannot start: it runs in a task's sandbox", "see the sandbox line")
    try:
        count = len(await probe_mcp(browser.config(install, proxy=False), settings, sandbox, call="list_pages"))
    except ToolError as err:
        return Check(Level.warn, "browser", f"{what} does not start: {err}", "run it by hand to see why")
    pinned = "" if install.version == browser.VERSION else f" (the set-up pins {browser.VERSION})"
    return Check(Level.ok, "browser", f"{what}{pinned} starts in a task's sandbox, Chromium too ({count} tools)")


async def check_mcp_servers(settings: Settings) -> list[Check]:
    """Each server of MCP_CONFIG: whether it starts (stdio: in a task's sandbox) and how many tools it offers."""
    if settings.tools.mcp_config is None:
        return [Check(Level.ok, "MCP", "none (MCP_CONFIG unset; the frontend worker's browser is built in)")]
    sandbox = bwrap.SandboxProbe()  # one probe for the servers' checks
    servers, problems = load_mcp_config(settings.tools.mcp_config)
    checks = [Check(Level.warn, "MCP_CONFIG", p, "fix the file (its shape is in .env.example)") for p in problems]
    if not servers and not problems:
        checks.append(Check(Level.ok, "MCP", f"none ({settings.tools.mcp_config} names no server)"))

    async def one(config: McpServerConfig) -> Check:
        how = "stdio in a task's sandbox" if config.stdio else f"{config.url} from the bot"
        roles = ", ".join(sorted(r.value for r in config.roles))
        approve = f"; approve: {', '.join(sorted(config.approve))}" if config.approve else ""
        if config.stdio and settings.sandboxing.sandbox != "off" and await sandbox.unavailable_reason():
            return Check(Level.warn, f"MCP {config.name}", f"cannot start ({how})", "see the sandbox line")
        try:
            names = await probe_mcp(config, settings, sandbox)
        except ToolError as err:
            fix = (
                "check its command, args and env; its folder must be in SANDBOX_READ_PATHS"
                if config.stdio
                else f"check that {config.url} is up and reachable from the bot, and its headers (a token) in "
                "MCP_CONFIG"
            )
            return Check(Level.warn, f"MCP {config.name}", f"does not start ({how}): {err}", fix)
        said = f"starts ({how}), {len(names)} tools; roles {roles}{approve}"
        if unmatched := config.unmatched_approvals(names):
            return Check(
                Level.warn,
                f"MCP {config.name}",
                f"{said}; approve names {', '.join(unmatched)}, which it does not offer, so every call of its tools "
                "waits for an owner's Allow",
                f"name its tools under approve as it lists them: {', '.join(sorted(names)[:20])}",
            )
        return Check(Level.ok, f"MCP {config.name}", said)

    return checks + list(await asyncio.gather(*(one(c) for c in servers)))
