"""`agentlab doctor`: is this machine ready to run the bot? One ✓ / ✗ / ! line per check, each failure with a fix.

The checks never spend money (Anthropic's `count_tokens` is free) and never import `telegram`: getMe is a plain
HTTP call. Network checks are time-boxed. The exit code is non-zero when a required check fails; `!` lines
are optional features (frontend screenshots, a whisper model still to download, folders not yet git repositories).

This module runs the checks and prints the report; the checks live beside it, one module per family: accounts.py
(Telegram, Anthropic, GitHub, who may use the bot), workspaces.py (git and the project folders), voice.py (whisper,
the voice engine, memory), tools.py (ripgrep, Chromium, the browser, MCP servers), sandbox.py (bubblewrap, network
reach, disk bounds) and runtime.py (database, updates, task engine); checks.py is what each returns.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

from agents.core.settings import Settings, SettingsError, load_settings
from agents.doctor.accounts import (
    check_access,
    check_anthropic,
    check_env_file,
    check_github,
    check_telegram,
    token_looks_valid,
)
from agents.doctor.checks import Check, Level
from agents.doctor.runtime import check_database, check_task_engine, check_updates_mode
from agents.doctor.sandbox import (
    check_disk_bound,
    check_disk_budget,
    check_network_reach,
    check_sandbox,
    check_task_disks,
)
from agents.doctor.tools import check_browser, check_chromium, check_mcp_servers, check_ripgrep
from agents.doctor.voice import (
    VOICE_MEMORY_MB,
    WHISPER_DOWNLOADS,
    check_memory,
    check_voice_engine,
    check_whisper,
    voice_memory_mb,
    whisper_cache_dir,
)
from agents.doctor.workspaces import check_bot_repository, check_git, check_workspaces

__all__ = [
    "VOICE_MEMORY_MB",
    "WHISPER_DOWNLOADS",
    "Check",
    "Level",
    "check_access",
    "check_anthropic",
    "check_bot_repository",
    "check_browser",
    "check_chromium",
    "check_database",
    "check_env_file",
    "check_disk_bound",
    "check_disk_budget",
    "check_git",
    "check_github",
    "check_mcp_servers",
    "check_memory",
    "check_network_reach",
    "check_ripgrep",
    "check_sandbox",
    "check_task_disks",
    "check_task_engine",
    "check_telegram",
    "check_updates_mode",
    "check_voice_engine",
    "check_whisper",
    "check_workspaces",
    "doctor",
    "run_checks",
    "token_looks_valid",
    "voice_memory_mb",
    "whisper_cache_dir",
]


CheckResult = Check | list[Check] | None  # one line, several, or none (the check does not apply here)


async def _guarded(name: str, check: Callable[[], CheckResult | Awaitable[CheckResult]]) -> list[Check]:
    """Run one check (plain or async); a crash becomes a ✗ line instead of a traceback."""
    try:
        called = check()
        result: CheckResult = await called if isinstance(called, Awaitable) else called
    except Exception as err:  # noqa: BLE001 - every failure is reported, none is fatal to the report
        return [
            Check(
                Level.fail,
                name,
                f"the check itself failed: {type(err).__name__}: {err}",
                "run with LOG_LEVEL=DEBUG and report it",
            )
        ]
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


async def run_checks(settings: Settings) -> list[Check]:
    """Every check after the settings, concurrently, in a fixed order."""
    groups = await asyncio.gather(
        _guarded(".env", lambda: check_env_file(Path(".env"))),
        _guarded("ALLOWED_USER_IDS", lambda: check_access(settings)),
        _guarded("Telegram", lambda: check_telegram(settings)),
        _guarded("Anthropic", lambda: check_anthropic(settings)),
        _guarded("updates", lambda: check_updates_mode(settings)),
        _guarded("workspaces", lambda: check_workspaces(settings)),
        _guarded("BOT_REPOSITORY", lambda: check_bot_repository(settings)),
        _guarded("git", lambda: check_git(settings)),
        _guarded("whisper", lambda: check_whisper(settings)),
        _guarded("voice engine", lambda: check_voice_engine(settings)),
        _guarded("memory", lambda: check_memory(settings)),
        _guarded("ripgrep", lambda: check_ripgrep(settings)),
        _guarded("chromium", lambda: check_chromium(settings)),
        _guarded("browser", lambda: check_browser(settings)),
        _guarded("MCP", lambda: check_mcp_servers(settings)),
        _guarded("database", lambda: check_database(settings)),
        _guarded("sandbox", lambda: check_sandbox(settings)),
        _guarded("network reach", lambda: check_network_reach(settings)),
        _guarded("disk budget", lambda: check_disk_bound(settings)),
        _guarded("task disks", lambda: check_task_disks(settings)),
        _guarded("task engine", lambda: check_task_engine(settings)),
        _guarded("GitHub", lambda: check_github(settings)),
    )
    return [check for group in groups for check in group]


def _settings_source() -> str:
    env_file = Path(".env")
    if env_file.is_file():
        return f"from the environment and {env_file.resolve()}"
    return f"from the environment (no .env in {Path.cwd()})"


async def doctor(out: TextIO | None = None, load: Callable[[], Settings] = load_settings) -> int:
    """Print the report; 0 when every required check passed, 1 otherwise."""
    out = out or sys.stdout

    def emit(check: Check) -> None:
        for line in check.lines():
            print(line, file=out)

    try:
        settings = load()
    except SettingsError as err:
        emit(
            Check(
                Level.fail,
                "settings",
                str(err).removeprefix("configuration error: "),
                "run `agentlab init`, or fill in .env (every key is explained in .env.example)",
            )
        )
        return 1
    emit(Check(Level.ok, "settings", f"valid, {_settings_source()}"))
    # Every finding is a line of this report: a library's warning, printed by logging's last-resort handler where
    # no handler is configured (the command line), would break its format.
    root = logging.getLogger()
    quiet = logging.NullHandler() if not root.handlers else None
    if quiet is not None:
        root.addHandler(quiet)
    try:
        checks = await run_checks(settings)
    finally:
        if quiet is not None:
            root.removeHandler(quiet)
    for check in checks:
        emit(check)
    failed = [c for c in checks if c.level is Level.fail]
    warned = [c for c in checks if c.level is Level.warn]
    if failed:
        print(
            f"\n{len(failed)} required check{'s' if len(failed) > 1 else ''} failed: "
            f"{', '.join(dict.fromkeys(c.name for c in failed))}.",
            file=out,
        )
        return 1
    note = f" ({len(warned)} optional warning{'s' if len(warned) > 1 else ''})" if warned else ""
    print(f"\nReady: every required check passed{note}. Start the bot with `agentlab run`.", file=out)
    return 0
