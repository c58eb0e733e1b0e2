"""What the bot runs on: its database (opened, migrated), how Telegram's updates arrive (polling or webhook), and
the task engine (local, or a Temporal cluster with its runners).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

from agents.core.settings import Settings
from agents.doctor.checks import Check, Level
from agents.store.database import Store
from agents.store.migrations import LATEST_VERSION


def _stored_version(path: Path) -> int | None:
    """PRAGMA user_version of an existing database file, read-only; None if there is no file."""
    if not path.is_file():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


async def check_database(settings: Settings) -> Check:
    """DATABASE_PATH can be opened for writing and is at the latest migration (doctor applies pending ones)."""
    path = Path(settings.paths.database_path).expanduser()
    fix = f"make {path.parent} writable for this user, or set DATABASE_PATH to a writable place"
    try:
        before = await asyncio.to_thread(_stored_version, path)
    except sqlite3.Error as err:
        return Check(
            Level.fail,
            "database",
            f"{path} is not a readable SQLite database: {err}",
            "move the file away (the bot creates a fresh one) or fix DATABASE_PATH",
        )
    if before is not None and before > LATEST_VERSION:
        return Check(
            Level.fail,
            "database",
            f"{path} is at schema v{before}, newer than this agentlab (v{LATEST_VERSION})",
            "update agentlab (git pull) or point DATABASE_PATH at another file",
        )
    try:
        store = await Store.open(path)
    except (OSError, sqlite3.Error) as err:
        return Check(Level.fail, "database", f"cannot open {path}: {err}", fix)
    try:
        version = await store.schema_version()
    finally:
        await store.close()
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        return Check(Level.fail, "database", f"{path} (or its folder) is not writable", fix)
    if version != LATEST_VERSION:
        return Check(
            Level.fail,
            "database",
            f"{path} is at schema v{version}, expected v{LATEST_VERSION}",
            "move the file away (the bot creates a fresh one)",
        )
    if before is None:
        state = "created"
    elif before < version:
        state = f"migrated v{before} → v{version}"
    else:
        state = f"schema v{version}, the latest"
    return Check(Level.ok, "database", f"{path} writable, {state}")


def check_updates_mode(settings: Settings) -> Check:
    """Long polling or webhook (settings already validated the webhook keys)."""
    if not settings.telegram.webhook_url:
        return Check(Level.ok, "updates", "long polling (WEBHOOK_URL is empty; no inbound port needed)")
    public = f"{settings.telegram.webhook_url}/{settings.telegram.webhook_path}"
    return Check(
        Level.ok,
        "updates",
        f"webhook {public} → listening on {settings.telegram.webhook_listen}:{settings.telegram.webhook_port} "
        "(the reverse proxy must forward HTTPS to it)",
    )


async def check_task_engine(settings: Settings) -> Check:
    """TASK_ENGINE=temporal: the cluster answers, and which runners are polling for tasks."""
    if settings.engine.task_engine != "temporal":
        return Check(Level.ok, "task engine", "local: tasks run in the bot's process")
    try:
        from agents.engine import cluster
    except ImportError as err:
        return Check(
            Level.fail,
            "task engine",
            f"TASK_ENGINE=temporal but the Temporal SDK is missing ({err})",
            "pip install -e '.[temporal]'",
        )
    try:
        client = await cluster.connect(settings, identity="agentlab-doctor")
        runners = await cluster.live_runners(client, settings)
    except ConnectionError as err:
        return Check(Level.fail, "task engine", str(err), "start the Temporal server, or fix TEMPORAL_ADDRESS")
    s = settings
    engine = s.engine
    where = (
        f"Temporal at {engine.temporal_address}"
        f" (namespace {engine.temporal_namespace}, queue {engine.temporal_task_queue})"
    )
    if not runners:
        return Check(
            Level.warn,
            "task engine",
            f"{where}: no runner is polling; tasks wait for one",
            "start `agentlab runner` on a machine with the workspaces (see `agentlab runner --help`)",
        )
    return Check(Level.ok, "task engine", f"{where}; live runners: {', '.join(runners)}")
