"""The sandbox a task's processes run in: bubblewrap, what bounds them (cgroups, processes, network), what an
allowed network reaches, the disk budget and its bound, and task disks that no task owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from pathlib import Path

from agents.core.models import TaskStatus
from agents.core.settings import Settings
from agents.doctor.checks import Check, Level
from agents.sandbox import bwrap, task_disk
from agents.sandbox.bwrap import keep_size_filter_program
from agents.sandbox.egress_rules import egress_for
from agents.sandbox.process_cap import pids_parent
from agents.sandbox.task_cgroup import support as task_cgroup_support
from agents.sandbox.task_limits import disk_budget, sandbox_limit_warnings
from agents.sandbox.user_net import TUN_FIX, missing_tools, tun_available
from agents.sandbox.user_net import direct as direct_network

BWRAP_INSTALL_FIX = (
    "install it: `sudo apt-get install bubblewrap` (or `sudo scripts/install-system-deps.sh`); or set SANDBOX=off "
    "to run commands unconfined"
)


USERNS_FIX = (
    "allow unprivileged user namespaces (`sudo sysctl -w kernel.unprivileged_userns_clone=1`, or "
    "`kernel.apparmor_restrict_unprivileged_userns=0`; in Docker: --security-opt seccomp=unconfined --security-opt "
    "apparmor=unconfined); or set SANDBOX=off to run commands unconfined"
)


CGROUP_FIX = "run the bot where it may make cgroups (as root, or in a delegated cgroup: systemd's Delegate=yes)"


def network_tools_fix() -> str | None:
    """The fix when an allowed network cannot go direct: install what is missing of passt (pasta) and nftables, else
    give the bot a tun device it may open."""
    missing = missing_tools()
    if not missing:
        return None if tun_available() else TUN_FIX
    return f"install {' and '.join(missing)}: `sudo apt-get install {' '.join(missing)}`"


async def check_sandbox(settings: Settings) -> Check:
    """bubblewrap confines every process of a task; without it commands are refused unless SANDBOX=off."""
    if bwrap.SandboxMode(settings.sandboxing.sandbox) is bwrap.SandboxMode.OFF:
        return Check(
            Level.warn,
            "sandbox",
            "SANDBOX=off: workers' commands and test runs are NOT confined; a hostile "
            "worker can read the bot's keys and your files and use the network",
            "set SANDBOX=bwrap (the default) once bubblewrap works here",
        )
    reason = await bwrap.SandboxProbe().unavailable_reason()  # probed now, whatever an earlier check found
    if reason:  # the reason ends with the general fix; the line's own fix is the one for this failure
        detail = reason.removesuffix(".").removesuffix(f": {bwrap.UNAVAILABLE_FIX}")
        return Check(Level.fail, "sandbox", detail, BWRAP_INSTALL_FIX if bwrap.bwrap_path() is None else USERNS_FIX)
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    limits = sandbox_limit_warnings(settings.network.sandbox_network != "off")
    cgroup = task_cgroup_support()
    if limits:  # what this machine cannot bound, each with its own fix
        fixes = [] if cgroup.available else [CGROUP_FIX]
        if settings.network.sandbox_network != "off" and (network_fix := network_tools_fix()):
            fixes.append(network_fix)
        return Check(Level.warn, "sandbox", "bubblewrap confines commands, but " + "; ".join(limits), "; ".join(fixes))
    egress = egress_for(settings.network.sandbox_network_domains, settings.network.sandbox_network_private)
    net = "the public Internet only, via pasta" if direct_network(egress) else "the bot's HTTP proxy only"
    if cgroup.available:
        root_note = f" ({cgroup.description}; an allowed network is {net})"
    elif pids_parent() is not None:
        root_note = " (processes bounded by a pids cgroup per command)"
    elif as_root:
        root_note = (
            " (the bot runs as root and no pids cgroup is writable: the kernel does not apply the process "
            "limit to root; run it as a normal user so a fork bomb is bounded)"
        )
    else:
        root_note = ""
    return Check(
        Level.ok, "sandbox", f"bubblewrap confines commands (network: {settings.network.sandbox_network}){root_note}"
    )


def check_network_reach(settings: Settings) -> Check | None:
    """What a command allowed the network reaches (SANDBOX_NETWORK_DOMAINS, SANDBOX_NETWORK_PRIVATE); a warning when
    private addresses are opened to it. None with SANDBOX_NETWORK=off."""
    if settings.network.sandbox_network == "off":
        return None
    egress = egress_for(settings.network.sandbox_network_domains, settings.network.sandbox_network_private)
    if egress.private:
        return Check(
            Level.warn,
            "network reach",
            "SANDBOX_NETWORK_PRIVATE opens private addresses to every command allowed the network: "
            + ", ".join(str(n) for n in egress.private)
            + " (what listens there, a database or an admin page, is reachable too)",
            "keep it to the one mirror or registry that needs it (a single address, not a range), or leave it empty",
        )
    return Check(Level.ok, "network reach", f"a command allowed the network reaches {egress.describe()}")


async def check_disk_bound(settings: Settings) -> Check:
    """`check_disk_budget` after a real try at a worktree's own file system (where SANDBOX_DISK_FS=auto)."""
    found = await task_disk.probe() if settings.sandboxing.sandbox_disk_fs == "auto" else task_disk.support()
    return check_disk_budget(settings, found)


async def check_task_disks(settings: Settings) -> Check | None:
    """Mounts and loop devices of the task disks that no task owns (a bot or runner killed mid-task, a cancel that
    raced a mount): named with the commands that free them; nothing to say when there are none."""
    owned = await asyncio.to_thread(_resumable_worktrees, settings.paths.database_path)
    found = task_disk.strays(settings.paths.worktrees_dir, owned)
    if not found:
        return None
    points = " ".join(s.name for s in found if s.kind == "mount")
    devices = " ".join(s.name for s in found if s.kind == "loop device")
    fix = "; ".join(
        part
        for part in (
            f"unmount them: umount -l {points}" if points else "",
            f"then detach the loop devices: losetup -d {devices}" if devices else "",
            "the next start of the bot deletes the images whose worktree is gone",
        )
        if part
    )
    named = "; ".join(f"{s.kind} {s.name} ({s.why})" for s in found)
    return Check(Level.warn, "task disks", f"{len(found)} left behind that no task owns: {named}", fix)


def _resumable_worktrees(database: Path) -> set[Path] | None:
    """The worktrees of the tasks still going or resumable, read from the bot's database; None when it cannot be read
    (then no mount is judged by it)."""
    if not database.is_file():
        return set()
    statuses = [s.value for s in TaskStatus.cancellable()]
    marks = ",".join("?" * len(statuses))
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=2)) as db:
            rows = db.execute(
                f"SELECT worktree FROM tasks WHERE worktree IS NOT NULL AND status IN ({marks})", statuses
            ).fetchall()
    except sqlite3.Error:
        return None
    return {Path(row[0]) for row in rows}


def check_disk_budget(settings: Settings, found: task_disk.Support | None = None) -> Check:
    """What bounds a task's disk use here, and how: the budget, the hard per-file bound, and for the task as a whole
    either a file system of its own per task (agents/sandbox/task_disk.py; `found`: what a real try found, else what
    the machine offers) or the poll alone."""
    budget = disk_budget(settings.sandboxing.sandbox_max_disk_mb, settings.paths.worktrees_dir) >> 20
    source = (
        "SANDBOX_MAX_DISK_MB" if settings.sandboxing.sandbox_max_disk_mb is not None else "a quarter of the free space"
    )
    per_file = min(settings.sandboxing.sandbox_max_file_mb, budget)
    keep_size = (
        "a reservation that keeps the file size (fallocate --keep-size) is refused (seccomp)"
        if keep_size_filter_program() is not None
        else "a reservation that keeps the file size (fallocate --keep-size) is not under it: no seccomp filter here"
    )
    said = (
        f"{budget:,} MB per task ({source}; the services' logs count in it). Bound in force: hard per file, "
        f"{per_file:,} MB (RLIMIT_FSIZE: the smaller of SANDBOX_MAX_FILE_MB and the budget, refused by the kernel "
        f"at once; {keep_size}); "
    )
    found = found or task_disk.support()
    if settings.sandboxing.sandbox_disk_fs == "auto" and found.available:
        return Check(
            Level.ok,
            "disk budget",
            said + f"for the task as a whole, a file system of its own per task, {budget:,} MB beyond its checkout "
            '(a sparse ext4 image mounted on its worktree: a burst of writes meets "No space left on device"), '
            "with polling every 0.2 s still stopping the command that goes past the budget and deleting its files",
        )
    why = "SANDBOX_DISK_FS=off" if settings.sandboxing.sandbox_disk_fs == "off" else found.reason
    return Check(
        Level.ok if settings.sandboxing.sandbox_disk_fs == "off" else Level.warn,
        "disk budget",
        said + f"for the task as a whole, polling every 0.2 s ({why}): a burst between two looks is not bounded "
        "(several files written at once and removed before the next look take the host's disk for that moment)",
        "run the bot as root with loop devices (/dev/loop-control) and mkfs.ext4 for a hard bound: each task's "
        "worktree a file system of its own (SANDBOX_DISK_FS=auto)",
    )
