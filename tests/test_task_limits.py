"""A hostile worker, played by the scripted model through the real bot, against a task's shared limits:
memory across all its processes (items 5), its disk (item 6) and what an allowed network reaches (item 10).

Every assertion is on what the model was sent back (the fake Anthropic server's requests) or on the host's files and
sockets. Each needs what the machine may not give (a memory cgroup, pasta) and skips with the reason where it is not.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.egress_rules import Egress
from agents.sandbox.user_net import direct
from tests.conftest import BotHarness, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.processes import Listener
from tests.support.sandbox import PROBE
from tests.support.tasks import ended, start_task, tool_results

# untested_calc: these tests look at neither the verdict nor the task's end, so calc has no tests (tests/conftest.py)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.untested_calc,
]


def memory_cgroup_reason() -> str | None:
    """None where the bot can make a per-task memory cgroup here, else why not."""
    try:
        from agents.sandbox.task_cgroup import support
    except ImportError:  # the code before task cgroups: try the v1 memory hierarchy by hand
        own = [
            line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines() if ":memory:" in line
        ]
        folder = Path("/sys/fs/cgroup/memory") / own[0].lstrip("/") if own else None
        return None if folder is not None and (folder / "memory.limit_in_bytes").exists() else "no memory cgroup"
    found = support()
    return None if found.available else found.description


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """This module's tests' folder (the workspaces, the bot's data, the tasks' worktrees) on a disk file system:
    `make test` puts the other tests' temporary files on a RAM one (scripts/ram-tmpdir.sh), where a file is memory
    and counts against the task's memory limit before its disk budget. TEST_DISK_TMPDIR is the system's temporary
    folder there; elsewhere it is unset and the folder is made where every other test's is."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_DISK_TMPDIR"), ignore_cleanup_errors=True) as folder:
        yield Path(folder)


@pytest.fixture
async def limited_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    """The bot with a 256 MB task memory, a 300 MB task disk budget and the network on (no question asked)."""
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        sandbox_max_memory_mb=256,
        sandbox_max_disk_mb=300,
        sandbox_network="on",
    ) as harness:
        yield harness


def run(command: str, network: bool = False) -> dict:
    return claude_says.tool_use("run_command", {"command": command, **({"network": True} if network else {})})


@pytest.mark.skipif(memory_cgroup_reason() is not None, reason=f"no per-task memory cgroup: {memory_cgroup_reason()}")
async def test_a_tasks_processes_together_stay_within_its_memory(limited_bot: BotHarness, model: RoleScript) -> None:
    """Five processes each touching 100 MB (each well under the 256 MB address-space limit) together need 500 MB:
    before task cgroups every one of them held its memory (one command held 803 MB); now the task's cgroup stops them."""
    hog = 'python -c \'import time; b = bytearray(100 << 20); time.sleep(3); print("HE" "LD")\''
    command = f"for i in 1 2 3 4 5; do {hog} & done; wait; echo all-ended"
    model.add("orchestrator", start_task("calc", "Use memory."), claude_says.text("Started."))
    model.add("code", run(command), run("echo after-the-hogs"), claude_says.text("Done."))
    from agents.sandbox.task_cgroup import support

    parent = support().memory_parent
    assert parent is not None
    mine = f"task-{os.getpid()}-1-*"  # this process's task 1: other test processes (pytest -n) have their own
    before = set(parent.glob(mine))  # what an earlier test of this process may have left
    limited_bot.say("use memory in calc")
    task = await ended(limited_bot, 1, timeout=120)
    assert task.status is not TaskStatus.FAILED, task.error
    results = tool_results(model)
    hogs = next(r for r in results if "all-ended" in r)
    assert hogs.count("HELD") <= 2, hogs  # 2 × 100 MB fit in 256 MB; 5 never do
    assert "memory limit of 256 MB" in hogs
    assert any("after-the-hogs" in r for r in results), "the task could not go on after the limit was hit"
    await limited_bot.tg.await_for(lambda: set(parent.glob(mine)) <= before, timeout=5)  # removed at the task's end


async def test_a_task_past_its_disk_budget_is_stopped_told_and_can_go_on(
    limited_bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """Files each under the per-file limit (1 GB), together 1 GB of reserved blocks against a 300 MB budget. The
    clean-up waits until the stopped command's processes are gone (one still writing would grow a file after it, and
    the next command would be the one told it was stopped) and leaves the task's service running."""
    fill = "for i in 1 2 3 4 5; do fallocate -l 200M reserved-$i.bin || exit 1; done; sleep 5; echo FILLED''-UP"
    beating = "while :; do date +%s%N > beat.new; mv beat.new beat; sleep 0.1; done"  # never read half-written
    alive = 'a=$(cat beat); sleep 1; b=$(cat beat); test "$a" != "$b" && echo service\'\'-alive'
    model.add("orchestrator", start_task("calc", "Fill the disk."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": beating, "background": True}),
        run(fill),
        run("du -sm . | cut -f1; echo still-working"),
        run(alive),
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Done."),
    )
    limited_bot.say("fill the disk in calc")
    task = await ended(limited_bot, 1, timeout=120)
    assert task.status is not TaskStatus.FAILED, task.error
    results = tool_results(model)
    assert "FILLED-UP" not in json.dumps(results), "the command ran to its end past the budget"
    stopped = next(r for r in results if "fallocate" in r)
    assert "disk budget of 300 MB" in stopped, stopped
    after = json.loads(next(r for r in results if "still-working" in r))
    assert "disk budget" not in after, after  # the stopped command's clean-up got the task back within its budget
    lines = after.splitlines()
    used_mb = int(lines[lines.index("still-working") - 1])
    assert used_mb <= 300, after  # the leftovers were deleted: the task is back within its budget
    assert any("service-alive" in r for r in results), json.dumps(results, indent=1)
    assert task.status is not TaskStatus.FAILED


def host_addresses() -> list[str]:
    """The host's own non-loopback addresses (from `ip -j addr`), IPv4 and global IPv6."""
    try:
        listed = json.loads(subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, check=True).stdout)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return []
    found = []
    for link in listed:
        for info in link.get("addr_info", []):
            address = ipaddress.ip_address(info["local"])
            if not address.is_loopback and not address.is_link_local:
                found.append(str(address))
    return found


def pasta_reason() -> str | None:
    return None if shutil.which("pasta") else "pasta (Debian package passt) is not installed"


@pytest.mark.skipif(pasta_reason() is not None, reason=str(pasta_reason()))
async def test_an_allowed_network_does_not_reach_the_hosts_own_ports(
    limited_bot: BotHarness, model: RoleScript
) -> None:
    """With the network allowed, a worker once reached the bot's own endpoints on 127.0.0.1; now its namespace has
    its own loopback, the host's addresses stay inside it, and pasta gives it an interface and a default route (where
    the proxy is the only way out, there is no route at all)."""
    listeners = [Listener("127.0.0.1"), *(Listener(a) for a in host_addresses())]
    try:
        probe = "; ".join(
            f"python -c \"import socket; socket.create_connection(('{x.host}', {x.port}), timeout=3); "
            f"print('CONN' 'ECTED {x.host}')\"" + " || echo refused"
            for x in listeners
        )
        model.add("orchestrator", start_task("calc", "Call home."), claude_says.text("Started."))
        model.add(
            "code",
            run(probe, network=True),
            run("cat /proc/net/route; ls /sys/class/net; echo ROUTES-SHOWN", network=True),
            claude_says.text("Done."),
        )
        limited_bot.say("call home from calc")
        task = await ended(limited_bot, 1, timeout=120)
        assert task.status is not TaskStatus.FAILED, task.error
        results = tool_results(model)
        said = json.dumps(results)
        assert "CONNECTED" not in said and all(x.connections == 0 for x in listeners), said
        assert said.count("refused") >= len(listeners)  # each probe ran (the network was allowed) and failed
        routes = json.loads(next(r for r in results if "ROUTES-SHOWN" in r))
        table = [line.split() for line in routes.splitlines() if line.count("\t") >= 7]
        if direct(Egress()):
            assert any(row[0] not in ("Iface", "lo") for row in table), routes  # an interface besides loopback
            assert any(row[1] == "00000000" for row in table), routes  # and a default route, set up by pasta
        else:  # the proxy is the only way out (no pasta, or no tun device the bot may open): no route at all
            assert not [row for row in table if row[0] not in ("Iface", "lo")], routes
    finally:
        for x in listeners:
            x.close()


@pytest.mark.parametrize(("first_mb", "second_mb"), [(200, 200), (250, 100)])
async def test_growth_spread_over_several_commands_counts(tmp_path: Path, first_mb: int, second_mb: int) -> None:
    """Two commands each under the budget, together over it: the second is stopped (the count is the task's), and
    its file is deleted, not the earlier command's, even when the earlier file is the larger."""
    import dataclasses

    from agents.sandbox.bwrap import spec_for
    from agents.sandbox.shell import run_command
    from agents.sandbox.task_limits import DiskBudget, TaskBounds

    root = tmp_path.resolve()
    bounds = TaskBounds("spread", 1 << 30, 512, DiskBudget(root, 300 << 20))
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, root), task=bounds)
    try:
        first = await run_command(f"fallocate -l {first_mb}M one.bin && echo first-done", root, 60, sandbox=spec)
        second = await run_command(
            f"fallocate -l {second_mb}M two.bin && sleep 3 && echo second''-done", root, 60, sandbox=spec
        )
    finally:
        await bounds.close()
    assert first.ok and first.stopped is None, first.output
    assert not second.ok and "disk budget of 300 MB" in (second.stopped or ""), second.format_for_model()
    assert "second-done" not in second.output
    # the stopped command's file went first, even if it was killed mid-allocation and is smaller than one.bin
    assert (root / "one.bin").exists() and not (root / "two.bin").exists()


@pytest.mark.skipif(memory_cgroup_reason() is not None, reason=f"no per-task memory cgroup: {memory_cgroup_reason()}")
def test_task_cgroups_a_dead_bot_left_behind_are_removed_at_start_up() -> None:
    from agents.sandbox import task_cgroup

    gone = subprocess.Popen(["true"])
    gone.wait()
    found = task_cgroup.support()
    parents = [p for p in (found.memory_parent, found.pids_parent) if p is not None]
    stale = [parent / f"task-{gone.pid}-9" for parent in parents]
    for folder in stale:
        folder.mkdir()
    task_cgroup.support.cache_clear()
    try:
        assert task_cgroup.support().available
    finally:
        task_cgroup.support.cache_clear()
        leftovers = [folder for folder in stale if folder.exists()]
        for folder in leftovers:
            folder.rmdir()
    assert not leftovers
