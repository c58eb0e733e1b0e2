"""Whether this process holds CAP_SYS_ADMIN. Root in most containers does not (Docker's default set leaves it out),
and what needs it must know: mounting a task's file system, and entering a namespace the bot made without entering
the user namespace that owns it."""

from __future__ import annotations

import functools
import os
from pathlib import Path

CAP_SYS_ADMIN = 21


@functools.cache
def holds_sys_admin() -> bool:
    """From the effective set in /proc/self/status; where that cannot be read, whether the process is root. Cached: a
    process's capabilities do not grow while it runs."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0
