"""The task's network namespace: made by a short-lived bwrap whose namespaces the bot keeps open; a failure while it is
made ends that bwrap and its sandbox at once and says why; a bot without CAP_SYS_ADMIN joins it too."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agents.sandbox import task_net
from agents.sandbox.task_net import TaskNet
from tests.support.sandbox import needs_bwrap

pytestmark = needs_bwrap


async def test_the_namespace_is_made_and_held_by_descriptors() -> None:
    net = TaskNet()
    try:
        await net.ensure()
        assert net.net_fd is not None and net.user_fd is not None
        assert os.readlink(f"/proc/self/fd/{net.net_fd}").startswith("net:[")
        assert os.readlink(f"/proc/self/fd/{net.net_fd}") != os.readlink("/proc/self/ns/net")
        assert os.readlink(f"/proc/self/fd/{net.user_fd}").startswith("user:[")
    finally:
        net.close()


async def test_a_failure_once_bwrap_holds_its_sandbox_ends_both_at_once_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The namespaces cannot be opened (here: the user namespace's) while bwrap holds its sandbox before `true`. bwrap
    # killed alone left the sandbox waiting for the block pipe, holding bwrap's stderr: reading it hung until the
    # caller's timeout, and the error said nothing of the cause.
    real_open = os.open
    sandboxes: list[int] = []

    def open_failing_for_the_user_namespace(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith("/ns/user"):
            sandboxes.append(int(Path(path).parts[2]))
            raise PermissionError(13, "Permission denied (the test's)", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(task_net.os, "open", open_failing_for_the_user_namespace)
    net = TaskNet()
    with pytest.raises(OSError, match="cannot make the task's network namespace") as raised:
        async with asyncio.timeout(task_net.MAKE_TIMEOUT_SECONDS / 2):
            await net.ensure()
    assert isinstance(raised.value.__cause__, PermissionError)
    assert not net.ready
    [sandbox] = sandboxes
    deadline = time.monotonic() + 5  # SIGKILLed with bwrap, it takes a moment to go (it is not the bot's child)
    while _running(sandbox) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not _running(sandbox), f"the sandbox bwrap held is still there: {sandbox}"


def _running(pid: int) -> bool:
    """`pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


JOIN_SCRIPT = """
import asyncio, os, subprocess
from agents.sandbox.privilege import holds_sys_admin
from agents.sandbox.task_net import TaskNet

async def main():
    net = TaskNet()
    await net.ensure()
    try:
        seen = subprocess.run(
            net.join(["readlink", "/proc/self/ns/net"]), pass_fds=net.pass_fds, capture_output=True, text=True
        )
        made = os.readlink(f"/proc/self/fd/{net.net_fd}")
        print(holds_sys_admin(), seen.returncode, seen.stdout.strip() == made, seen.stderr.strip())
    finally:
        net.close()

asyncio.run(main())
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv (util-linux) to drop CAP_SYS_ADMIN",
)
def test_root_without_cap_sys_admin_joins_the_tasks_namespace() -> None:
    # Root in most containers lacks CAP_SYS_ADMIN. Joining by `--net` alone was refused there ("reassociate to
    # namespace 'ns/net' failed: Operation not permitted"): every command of every task failed.
    done = subprocess.run(
        ["setpriv", "--bounding-set=-sys_admin", "--", sys.executable, "-c", JOIN_SCRIPT],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    held, code, same, *said = done.stdout.split(" ", 3)
    assert held == "False", "setpriv left CAP_SYS_ADMIN: nothing was tested"
    assert (code, same) == ("0", "True"), f"the command did not run in the task's namespace: {said}"
