"""The sandbox's argv builder, environment and probe, and commands run through it (bubblewrap really running)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents import doctor as dr
from agents.core.errors import ToolError
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings, SettingsError, load_settings
from agents.doctor import Level
from agents.sandbox import bwrap, user_net
from agents.sandbox.bwrap import (
    ResourceLimits,
    SandboxSpec,
    bwrap_argv,
    sandbox_env,
    spec_for,
)
from agents.sandbox.egress_rules import Egress
from agents.sandbox.process_cap import pids_parent
from agents.sandbox.shell import run_command
from agents.sandbox.task_limits import TaskBounds, sandbox_limit_warnings
from agents.tools.mcp_tasks import research_sandbox
from agents.work.task_sandbox import TaskSandboxes
from tests.support.processes import host_pids, own_sleep
from tests.support.sandbox import PROBE
from tests.support.settings import offline_settings

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
    reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
)


def pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_argv_confines_by_default(tmp_path: Path) -> None:
    argv = bwrap_argv(spec_for(SecretsFilter(), PROBE, tmp_path), "echo hi")
    assert argv[:2] == ["bwrap", "--unshare-all"] and "--share-net" not in argv
    for flag in ("--die-with-parent", "--new-session"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert ["--proc", "/proc"] == argv[argv.index("--proc") : argv.index("--proc") + 2]
    assert (str(tmp_path.resolve()), str(tmp_path.resolve())) in pairs(argv, "--bind")
    assert pairs(argv, "--bind") == [(str(tmp_path.resolve()), str(tmp_path.resolve()))], (
        "only the worktree is writable"
    )
    ro = [src for src, _ in pairs(argv, "--ro-bind")]
    assert "/usr" in ro and not any(
        p in ro
        for p in ("/etc", "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/root", "/home", "/proc", "/run", "/var")
    )
    assert not any(p.startswith("/etc/ssh") for p in ro)
    assert sys.prefix in ro and sys.base_prefix in ro, "the interpreter and its packages are readable"
    assert [argv[i + 1] for i, arg in enumerate(argv) if arg == "--remount-ro"] == ["/dev", "/"]
    assert argv[-1] == "echo hi" and argv[argv.index("--chdir") + 1] == str(tmp_path.resolve())


def test_argv_network_and_limits(tmp_path: Path) -> None:
    limits = ResourceLimits(max_processes=64, max_file_bytes=10 << 20, max_memory_bytes=1 << 30, tmp_bytes=5 << 20)
    argv = bwrap_argv(spec_for(SecretsFilter(), PROBE, tmp_path, network=True, limits=limits), "true")
    assert "--share-net" in argv
    script = argv[-3]
    assert "ulimit -u 64 -f 10240 -v 1048576 -n 2048 -c 0" in script
    assert ["--size", str(5 << 20), "--tmpfs", "/tmp"] == argv[argv.index("/tmp") - 3 : argv.index("/tmp") + 1]


def commit_and_add_worktree(repo: Path, tree: Path) -> Path:
    """One empty commit in `repo`, and a task worktree of it at `tree`."""
    identity = ["-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(["git", "-C", str(repo), *identity, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", "t1", str(tree)], check=True)
    return tree


def test_spec_binds_git_metadata_and_the_checkouts_venv_with_a_host_python(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    tree = commit_and_add_worktree(repo, tmp_path / "trees" / "task-1")
    venv = repo / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {tmp_path / 'python' / 'bin'}\n")  # the text is never believed
    (tree / ".venv").symlink_to(venv)
    spec = spec_for(SecretsFilter(), PROBE, tree, repository=repo)
    assert (repo / ".git").resolve() in spec.read_only
    assert venv.resolve() in spec.read_only and (tmp_path / "python").resolve() not in spec.read_only
    assert Path(sys.base_prefix).resolve() in spec.read_only
    assert spec.path_prefix[0] == str(tree.resolve() / ".venv" / "bin")
    assert repo.resolve() not in spec.read_only, "the repository's own files (untracked .env, ...) stay hidden"


@pytest.mark.parametrize("planted", ["home", "symlink", "no-host-python"])
def test_a_venv_the_repository_planted_binds_nothing(tmp_path: Path, planted: str) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    tree = commit_and_add_worktree(repo, tmp_path / "trees" / "task-1")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "bin").mkdir(parents=True)
    (elsewhere / "bin" / "python").symlink_to(sys.executable)
    version = "3.1" if planted == "no-host-python" else f"{sys.version_info.major}.{sys.version_info.minor}"
    (elsewhere / "lib" / f"python{version}").mkdir(parents=True)
    (elsewhere / "pyvenv.cfg").write_text("home = /\n")
    if planted == "symlink":
        (repo / ".venv").symlink_to(elsewhere, target_is_directory=True)
    else:
        shutil.copytree(elsewhere, repo / ".venv", symlinks=True)
    spec = spec_for(SecretsFilter(), PROBE, tree, repository=repo)
    assert Path("/") not in spec.read_only and elsewhere.resolve() not in spec.read_only
    link = tree.resolve() / ".git"  # the worktree's own `.git` file, bound read-only over itself
    assert set(spec.read_only) <= {repo.resolve() / ".git", repo.resolve() / ".venv", link, *bwrap.python_prefixes()}
    if planted != "home":  # a real folder made from a host Python is used, with that Python; `home` is ignored
        assert repo.resolve() / ".venv" not in spec.read_only
        assert str(tree.resolve() / ".venv" / "bin") not in spec.path_prefix


def test_environment_is_explicit_and_secret_free(tmp_path: Path) -> None:
    env = sandbox_env(
        {
            "ANTHROPIC_API_KEY": "k",
            "HOME": "/root",
            "AWS_SECRET": "s",
            "LANG": "C.UTF-8",
            "AGENTLAB_TASK": "t:1",
            "SSH_AUTH_SOCK": "/run/agent",
            "VIRTUAL_ENV": "/x",
        },
        spec_for(SecretsFilter(), PROBE, tmp_path),
    )
    assert env["HOME"] == bwrap.HOME and env["LANG"] == "C.UTF-8" and env["AGENTLAB_TASK"] == "t:1"
    assert not {"ANTHROPIC_API_KEY", "AWS_SECRET", "SSH_AUTH_SOCK", "VIRTUAL_ENV"} & env.keys()


async def test_missing_bwrap_refuses_commands_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: None)
    try:  # a fresh probe, which finds bwrap missing (the doctor makes its own)
        fresh = bwrap.SandboxProbe()
        with pytest.raises(ToolError, match="bubblewrap .* not installed.*apt-get install bubblewrap"):
            await run_command("echo hi", cwd=tmp_path, timeout=10, sandbox=spec_for(SecretsFilter(), fresh, tmp_path))
        settings = offline_settings(tmp_path)
        check = await dr.check_sandbox(settings)
        assert check.level is Level.fail and "apt-get install bubblewrap" in check.fix
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("ended_by", ["its time limit", "a cancel"])
async def test_a_probe_that_hangs_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ended_by: str
) -> None:
    # The probe's bwrap stands in for one that hangs, with a child of its own (as bwrap has its sandbox, which waits
    # in bwrap's group until bwrap lets it go). Timed out, it was left running; cancelled (the bot stopping while it
    # probes), too; killed alone while it starts, its sandbox waited for good.
    pids = tmp_path / "pids"
    fake = tmp_path / "bwrap"
    fake.write_text(f"#!/bin/sh\nsleep {own_sleep('61')} &\necho $$ $! > {pids}\nexec sleep {own_sleep('62')}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: str(fake))
    monkeypatch.setattr(bwrap, "PROBE_SECONDS", 1.0 if ended_by == "its time limit" else 60.0)
    checking = asyncio.create_task(bwrap.SandboxProbe().unavailable_reason())
    async with asyncio.timeout(10):
        while len(pids.read_text().split() if pids.exists() else ()) < 2 and not checking.done():
            await asyncio.sleep(0.02)
    started = [int(pid) for pid in pids.read_text().split()]
    assert len(started) == 2, f"the stand-in never started its child: {pids.read_text()!r}"
    try:
        if ended_by == "a cancel":
            checking.cancel()
            with pytest.raises(asyncio.CancelledError):
                await checking
        else:
            assert "did not finish a test sandbox within 1 s" in str(await checking)
        deadline = time.monotonic() + 5  # a SIGKILLed process takes a moment to go
        while any(_running(pid) for pid in started) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        left = [pid for pid in started if _running(pid)]
        assert not left, f"the probe ended by {ended_by} left its processes running: {left}"
    finally:
        for pid in started:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """`pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@needs_bwrap
async def test_without_a_tun_device_an_allowed_command_gets_out_through_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pasta opens the tun device inside the command's namespace. Where this process may not open it (a container
    # given none; a bot that is not root where /dev/net/tun is root's alone, as on this project's machines) every
    # allowed command failed: "pasta failed: Failed to open tun socket in namespace". The proxy carries it instead.
    monkeypatch.setattr(user_net, "TUN_DEVICE", tmp_path / "no-tun-here")
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, tmp_path, network=True), egress=Egress())
    result = await run_command('echo "proxy=$HTTPS_PROXY"', tmp_path, 60, sandbox=spec)
    assert result.exit_code == 0 and f"proxy={user_net.PROXY_URL}" in result.output, result.output
    settings = offline_settings(tmp_path)
    check = await dr.check_sandbox(settings)  # and the owner is told, with the fix
    assert check.level is Level.warn and "no tun device the bot may open" in check.detail, check
    assert user_net.TUN_FIX in check.fix


async def test_doctor_warns_when_the_sandbox_is_off(tmp_path: Path) -> None:
    settings = offline_settings(tmp_path, sandbox="OFF")
    check = await dr.check_sandbox(settings)
    assert check.level is Level.warn and "NOT confined" in check.detail


@needs_bwrap
async def test_doctor_sees_bwrap_working(tmp_path: Path) -> None:
    settings = offline_settings(tmp_path)
    check = await dr.check_sandbox(settings)
    # a warning only for what this machine cannot bound (no cgroup or tun device the bot may use, as a normal user)
    limits = sandbox_limit_warnings(network_possible=True)
    assert check.level is (Level.warn if limits else Level.ok) and "bubblewrap confines commands" in check.detail, check
    assert all(limit in check.detail for limit in limits), check


@needs_bwrap
async def test_sandboxed_command_sees_only_its_worktree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "neighbour.txt").write_text("NEIGHBOUR-SECRET")
    result = await run_command(
        f"echo ok > made.txt; cat {tmp_path}/neighbour.txt; touch {tmp_path}/out.txt; "
        "ls /proc | grep -c '^[0-9]'; python -c 'print(6*7)'",
        cwd=tree,
        timeout=30,
        sandbox=spec_for(SecretsFilter(), PROBE, tree),
    )
    assert (tree / "made.txt").read_text() == "ok\n"
    assert "NEIGHBOUR-SECRET" not in result.output and not (tmp_path / "out.txt").exists()
    assert "42" in result.output, result.output


@needs_bwrap
async def test_background_processes_die_with_the_command(tmp_path: Path) -> None:
    marker = own_sleep("1")  # unique to this process: found in /proc by host_pids
    result = await run_command(
        f"setsid nohup sleep {marker} >/dev/null 2>&1 & env -u AGENTLAB_TASK sleep {marker} & echo started",
        cwd=tmp_path,
        timeout=30,
        sandbox=spec_for(SecretsFilter(), PROBE, tmp_path),
    )
    assert "started" in result.output
    await asyncio.sleep(0.2)
    assert not host_pids(marker), "a detached process outlived its command"


@needs_bwrap
async def test_cancel_kills_every_process_of_the_command(tmp_path: Path) -> None:
    marker = own_sleep("2")  # unique to this process: found in /proc by host_pids
    job = asyncio.create_task(
        run_command(
            f"setsid nohup sleep {marker} & sleep {marker}",
            cwd=tmp_path,
            timeout=60,
            sandbox=spec_for(SecretsFilter(), PROBE, tmp_path),
        )
    )
    for _ in range(200):
        if len(host_pids(marker)) == 2:
            break
        await asyncio.sleep(0.02)
    assert len(host_pids(marker)) == 2
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    for _ in range(100):
        if not host_pids(marker):
            break
        await asyncio.sleep(0.02)
    assert not host_pids(marker)


@needs_bwrap
async def test_file_size_limit_ends_a_disk_filler(tmp_path: Path) -> None:
    spec = SandboxSpec(
        tmp_path.resolve(), tuple(bwrap.python_prefixes()), limits=ResourceLimits(max_file_bytes=1 << 20), probe=PROBE
    )
    result = await run_command(
        "head -c 5000000 /dev/zero > big.bin; echo exit=$?", cwd=tmp_path, timeout=30, sandbox=spec
    )
    assert (tmp_path / "big.bin").stat().st_size <= 1 << 20
    assert "exit=0" not in result.output


@needs_bwrap
async def test_dev_holds_no_files_and_its_shm_is_bounded_like_tmp(tmp_path: Path) -> None:
    """bwrap's /dev is a tmpfs no size bound reached: a command stored 16 MB there (and in /dev/shm) with
    SANDBOX_TMP_MB=4, memory held for as long as a service of the task lives. The device nodes still work."""
    spec = SandboxSpec(
        tmp_path.resolve(), tuple(bwrap.python_prefixes()), limits=ResourceLimits(tmp_bytes=4 << 20), probe=PROBE
    )
    result = await run_command(
        "for d in /dev /dev/shm; do head -c 16777216 /dev/zero > $d/fill 2>/dev/null; "
        'echo "$d $(stat -c %s $d/fill 2>/dev/null || echo none)"; rm -f $d/fill; done; echo written > /dev/null && '
        "echo null works",
        cwd=tmp_path,
        timeout=30,
        sandbox=spec,
    )
    assert "/dev none" in result.output, result.output
    stored = int(result.output.split("/dev/shm ", 1)[1].split()[0])
    assert 0 < stored <= 4 << 20 and "null works" in result.output, result.output


@needs_bwrap
async def test_a_process_opens_at_most_max_open_files(tmp_path: Path) -> None:
    """The sandbox had the bot's own open-file limit (tens of thousands here): the task's processes together could
    hold more than the machine's whole file table (fs.file-max), and the bot could then open no file."""
    spec = SandboxSpec(tmp_path.resolve(), tuple(bwrap.python_prefixes()), probe=PROBE)
    result = await run_command(
        "python3 -c \"import os\nn = 0\ntry:\n    while n < 6000: os.open('/dev/null', os.O_RDONLY); n += 1\n"
        "except OSError as e: print(e.errno)\nprint('opened', n)\"",
        cwd=tmp_path,
        timeout=30,
        sandbox=spec,
    )
    opened = int(result.output.split("opened ", 1)[1].split()[0])
    assert 2000 < opened < ResourceLimits().max_open_files == 2048, result.output


@needs_bwrap
@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0 and pids_parent() is None,
    reason="as root only a pids cgroup bounds processes (the kernel does not apply RLIMIT_NPROC to "
    "root), and no cgroup-v1 pids hierarchy is writable here",
)
async def test_process_limit_bounds_a_fork_loop(tmp_path: Path) -> None:
    spec = SandboxSpec(tmp_path.resolve(), limits=ResourceLimits(max_processes=20), probe=PROBE)
    # a fork loop whose children hold no pipe (bash's own loop would retry each refused fork with a back-off)
    fork_loop = (
        "for i in range(60):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.close(1); os.close(2); time.sleep(5); os._exit(0)\n"
        "    except OSError as error:\n"
        "        print('refused at', i, error); break\n"
    )
    result = await run_command(f'python3 -c "import os, time\n{fork_loop}"', cwd=tmp_path, timeout=30, sandbox=spec)
    assert "Resource temporarily unavailable" in result.output and "refused at" in result.output, result.output


def repository_with_token(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "https://x-access-token:ghp_SECRET123@github.com/o/r.git"],
        check=True,
    )
    tree = commit_and_add_worktree(repo, tmp_path / "trees" / "task-1")
    return repo, tree


@needs_bwrap
async def test_a_token_in_a_remote_url_is_masked_inside(tmp_path: Path) -> None:
    repo, tree = repository_with_token(tmp_path)
    result = await run_command(
        "git remote -v; cat $(git rev-parse --git-common-dir)/config; git status --short; git log --oneline | wc -l",
        cwd=tree,
        timeout=30,
        sandbox=spec_for(SecretsFilter(), PROBE, tree),
    )
    assert "ghp_SECRET123" not in result.output and "https://github.com/o/r.git" in result.output, result.output
    assert "ghp_SECRET123" in (repo / ".git" / "config").read_text(), "the owner's config is untouched"


@needs_bwrap
async def test_the_shared_git_metadata_is_read_only_inside(tmp_path: Path) -> None:
    """Refs, hooks and config of the owner's repository cannot be changed from a task's sandbox."""
    repo, tree = repository_with_token(tmp_path)
    main_before = (repo / ".git" / "refs" / "heads" / "main").read_text()
    attack = (
        "common=$(git rev-parse --git-common-dir); "
        "git update-ref refs/heads/main refs/heads/t1~0 2>&1; git branch -D main 2>&1; "
        "printf '#!/bin/sh\\ntouch /tmp/x\\n' > $common/hooks/post-commit; "
        "git config core.fsmonitor 'touch /tmp/y' 2>&1; echo done"
    )
    result = await run_command(
        attack, cwd=tree, timeout=30, sandbox=spec_for(SecretsFilter(), PROBE, tree, repository=repo)
    )
    assert "done" in result.output
    assert (repo / ".git" / "refs" / "heads" / "main").read_text() == main_before
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()


def live_checkout(tmp_path: Path) -> Path:
    """The bot's own checkout as `agentlab run` leaves it: its `.env`, its database in `data/`, a credential file
    further down, and a link to a file outside it."""
    checkout = tmp_path / "agentlab"
    (checkout / "data").mkdir(parents=True)
    (checkout / "deploy").mkdir()
    (checkout / "README.md").write_text("readable\n")
    (checkout / ".env").write_text("TELEGRAM_BOT_TOKEN=123456:env-secret-AAAA\n")
    (checkout / "data" / "agentlab.db").write_bytes(b"SQLite format 3\0db-secret")
    (checkout / "deploy" / ".env.production").write_text("KEY=deploy-secret\n")
    (tmp_path / "elsewhere.txt").write_text("outside\n")
    (checkout / "credentials.json").symlink_to(tmp_path / "elsewhere.txt")
    return checkout


async def research_servers_sandbox(checkout: Path, bounds: TaskBounds) -> SandboxSpec:
    """The sandbox of a research task's MCP servers over `checkout` as a workspace, the database in its `data/`."""
    settings = offline_settings(checkout.parent, database_path=checkout / "data" / "agentlab.db", sandbox="bwrap")
    spec = TaskSandboxes(settings, SecretsFilter(), PROBE).spec(checkout, checkout)
    assert spec is not None
    return await research_sandbox(spec, bounds)


async def test_a_research_servers_sandbox_covers_the_checkouts_credentials_and_the_bots_data(tmp_path: Path) -> None:
    """A research task's MCP servers see the live checkout read-only: where it is the bot's own, they would read the
    bot's `.env` and database. Each credential file is bound over with /dev/null and the data folder with an empty
    tmpfs, after the checkout's own bind; a link is covered where it leads, and what is outside is left alone."""
    checkout = live_checkout(tmp_path)
    bounds = TaskBounds("research", 1 << 30, 64)
    try:
        argv = bwrap_argv(await research_servers_sandbox(checkout, bounds), "true")
    finally:
        await bounds.close()
    shown = argv.index(str(checkout), argv.index("--ro-bind"))
    covered = pairs(argv, "--ro-bind")
    for secret in (checkout / ".env", checkout / "deploy" / ".env.production"):
        assert argv.index(str(secret)) > shown and ("/dev/null", str(secret)) in covered
    assert argv[argv.index(str(checkout / "data")) - 1] == "--tmpfs"
    assert str(tmp_path / "elsewhere.txt") not in argv and str(checkout / "README.md") not in argv


async def test_a_code_tasks_sandbox_covers_nothing(tmp_path: Path) -> None:
    """Its worktree lies outside the checkout: nothing of the bot's is in what it binds, so nothing is covered."""
    checkout = live_checkout(tmp_path)
    worktree = tmp_path / "agentlab-worktrees" / "task-1"
    worktree.mkdir(parents=True)
    settings = offline_settings(
        tmp_path,
        database_path=checkout / "data" / "agentlab.db",
        worktrees_path=worktree.parent,
        sandbox="bwrap",
    )
    spec = TaskSandboxes(settings, SecretsFilter(), PROBE).spec(worktree, checkout)
    assert spec is not None and spec.hidden == (checkout / "data",)
    assert "/dev/null" not in bwrap_argv(spec, "true") and str(checkout / "data") not in bwrap_argv(spec, "true")


async def test_a_code_tasks_worktree_in_the_checkouts_worktrees_folder_is_not_covered(tmp_path: Path) -> None:
    """By default the task worktrees lie in the checkout's `data-worktrees/`: a task's own is never hidden from it."""
    checkout = live_checkout(tmp_path)
    worktree = checkout / "data-worktrees" / "task-1"
    worktree.mkdir(parents=True)
    settings = offline_settings(tmp_path, database_path=checkout / "data" / "agentlab.db", sandbox="bwrap")
    spec = TaskSandboxes(settings, SecretsFilter(), PROBE).spec(worktree, checkout)
    assert spec is not None and spec.hidden == (checkout / "data",)
    assert str(checkout / "data-worktrees") not in bwrap_argv(spec, "true")


@needs_bwrap
async def test_a_research_server_on_the_checkout_sees_no_task_worktree(tmp_path: Path) -> None:
    """The other tasks' worktrees in the checkout's `data-worktrees/` (every chat's unmerged work) are shown empty."""
    checkout = live_checkout(tmp_path)
    (checkout / "data-worktrees" / "task-7").mkdir(parents=True)
    (checkout / "data-worktrees" / "task-7" / "calc.py").write_text("# OTHER-CHATS-WORK\n")
    output = await in_research_sandbox(checkout, "cat README.md data-worktrees/task-7/calc.py; ls -A data-worktrees")
    assert "OTHER-CHATS-WORK" not in output and "task-7\n" not in output, output


async def in_research_sandbox(checkout: Path, command: str) -> str:
    """What `command` prints, run in the checkout by a research task's MCP servers' sandbox; it read README.md."""
    bounds = TaskBounds("research", 1 << 30, 64)
    try:
        spec = await research_servers_sandbox(checkout, bounds)
        result = await run_command(f"cd {checkout} && {command}; echo end", cwd=spec.worktree, timeout=30, sandbox=spec)
    finally:
        await bounds.close()
    assert "readable" in result.output and "end" in result.output, result.output
    return result.output


@needs_bwrap
async def test_a_research_server_reads_the_checkout_but_not_the_bots_env_or_database(tmp_path: Path) -> None:
    checkout = live_checkout(tmp_path)
    output = await in_research_sandbox(checkout, "cat README.md .env deploy/.env.production; ls -A data")
    assert "secret" not in output and "agentlab.db" not in output, output


def test_the_sandbox_etc_has_no_secret_files() -> None:
    etc = bwrap.etc_copy()
    names = {p.relative_to(etc).as_posix() for p in etc.rglob("*")}
    assert not {"shadow", "gshadow", "sudoers", "ssl/private", "pip.conf", "npmrc", "environment"} & names
    assert not any(n.startswith(("ssh/", "ssl/private/")) or n.endswith(".key") for n in names)
    assert "passwd" in names


# ---------------------------------------------------------------------------------------------------------------------
# SANDBOX_READ_PATHS: every task's sandbox shows them read-only, so the bot refuses at start a path that would show it
# the whole machine or the bot's own places, and binds each where it leads


def bots_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The bot's places, each in a folder of its own (a/ to e/), the bot started in its checkout in e/ (its `.env`
    there); a folder beside them that a read path may name (`opt/node`)."""
    places = {
        "data": tmp_path / "a" / "data",
        "worktrees": tmp_path / "b" / "worktrees",
        "ws": tmp_path / "c" / "ws",
        "repository": tmp_path / "d" / "agentlab-self",
        "bot": tmp_path / "e" / "agentlab",
        "node": tmp_path / "opt" / "node",
    }
    for folder in places.values():
        folder.mkdir(parents=True)
    (places["bot"] / ".env").write_text("TELEGRAM_BOT_TOKEN=123456:ENV-SECRET-AAAA\n")
    (places["data"] / "agentlab.db").write_bytes(b"SQLite format 3\0DB-SECRET-BBBB")
    (places["node"] / "tool.txt").write_text("NODE-TOOL\n")
    monkeypatch.chdir(places["bot"])
    return places


def with_read_paths(places: dict[str, Path], value: object, **values: object) -> Settings:
    """Settings as `agentlab run` loads them in the bot's checkout, SANDBOX_READ_PATHS `value`."""
    return load_settings(
        _env_file=None,
        telegram_bot_token="1:x",
        anthropic_api_key="k",
        allowed_user_ids="1",
        workspace_path=places["ws"],
        database_path=places["data"] / "agentlab.db",
        worktrees_path=places["worktrees"],
        bot_repository=places["repository"],
        sandbox_read_paths=value,
        **values,
    )


@pytest.mark.parametrize(
    ("folder", "named"),
    [
        ("a", "the bot's data folder"),
        ("b", "the task worktrees folder"),
        ("c", "WORKSPACE_PATH"),
        ("d", "BOT_REPOSITORY"),
        ("e", "the bot's .env"),  # SANDBOX_READ_PATHS=/home/owner (for ~/.nvm), the bot in /home/owner/agentlab
        ("e/agentlab", "the bot's .env"),
        ("e/agentlab/.env", "the bot's .env"),
        ("d/agentlab-self", "BOT_REPOSITORY"),
        ("a/data", "the bot's data folder"),
    ],
)
def test_a_read_path_holding_one_of_the_bots_places_is_refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str, named: str
) -> None:
    """A folder that is or holds the bot's `.env`, its checkout, its data, the task worktrees or the workspaces would
    show them to every task: the bot does not start, and says which entry and what it holds."""
    places = bots_places(tmp_path, monkeypatch)
    with pytest.raises(SettingsError) as refused:
        with_read_paths(places, f"{places['node']},{tmp_path / folder}")
    assert f"SANDBOX_READ_PATHS entry {tmp_path / folder} holds {named}" in str(refused.value), refused.value


@pytest.mark.parametrize(("folder", "named"), [("a/data/attachments", "data"), ("b/worktrees/task-1", "worktrees")])
def test_a_read_path_inside_the_bots_private_folders_is_refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str, named: str
) -> None:
    places = bots_places(tmp_path, monkeypatch)
    with pytest.raises(SettingsError) as refused:
        with_read_paths(places, str(tmp_path / folder))
    assert f"SANDBOX_READ_PATHS entry {tmp_path / folder} lies inside" in str(refused.value), refused.value
    assert str(places[named]) in str(refused.value)


def test_a_read_path_inside_the_workspaces_is_refused_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One workspace would be shown to every task of every other: another chat's repository and its secrets."""
    places = bots_places(tmp_path, monkeypatch)
    (places["ws"] / "other").mkdir()
    with pytest.raises(SettingsError, match=r"entry \S+/c/ws/other lies inside WORKSPACE_PATH"):
        with_read_paths(places, [places["ws"] / "other"])


@pytest.mark.parametrize("value", ["/", "/usr/..", "link"])
def test_a_read_path_of_root_is_refused_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """SANDBOX_READ_PATHS=/ (a typo for /opt, or "let it read the system"), however spelt: every file of the machine,
    the bot's `.env` and every workspace, would be readable in every task."""
    places = bots_places(tmp_path, monkeypatch)
    if value == "link":
        (tmp_path / "root").symlink_to("/")
        value = str(tmp_path / "root")
    with pytest.raises(SettingsError) as refused:
        with_read_paths(places, value)
    assert f"SANDBOX_READ_PATHS entry {value}" in str(refused.value), refused.value
    assert "is the whole machine" in str(refused.value)


@pytest.mark.parametrize("how", ["symlink", "dotdot"])
def test_a_read_path_reaching_the_bots_checkout_by_a_link_or_dotdot_is_refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A link to (or a `..` spelling of) the bot's checkout names it all the same: it is resolved before it is
    checked, and the message names both the entry as written and where it leads."""
    places = bots_places(tmp_path, monkeypatch)
    tools = tmp_path / "opt" / "tools"
    if how == "symlink":
        tools.symlink_to(places["bot"])
        value = str(tools)
    else:
        tools.mkdir()
        value = f"{tools}/../../e/agentlab"
    with pytest.raises(SettingsError) as refused:
        with_read_paths(places, value)
    said = str(refused.value)
    assert f"SANDBOX_READ_PATHS entry {value} (which is {places['bot']}) holds the bot's .env" in said, said


@pytest.mark.parametrize("value", ["tools", "./tools", "opt/../tools"])
def test_a_relative_read_path_is_refused_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """bwrap starts in the task's worktree: a relative path would be looked up there, so a `tools` link the worker
    left in its worktree would choose what the next command's sandbox shows."""
    places = bots_places(tmp_path, monkeypatch)
    (places["bot"] / "tools").mkdir()
    written = str(Path(value))  # `./tools` is `tools`
    with pytest.raises(SettingsError, match=rf"SANDBOX_READ_PATHS: '{re.escape(written)}' is not an absolute path"):
        with_read_paths(places, f"{places['node']}, {value}")


def test_an_accepted_read_path_is_kept_where_it_leads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A link, a `..` and a `~` are resolved once at start: the sandbox binds what was checked."""
    places = bots_places(tmp_path, monkeypatch)
    (tmp_path / "opt" / "node-current").symlink_to(places["node"])
    monkeypatch.setenv("HOME", str(tmp_path / "opt"))
    settings = with_read_paths(places, f"{tmp_path}/opt/node-current, {tmp_path}/a/../opt/node;~/node")
    assert settings.sandboxing.sandbox_read_paths == (places["node"],) * 3


@needs_bwrap
async def test_a_read_path_given_as_a_link_is_bound_where_it_leads_and_the_data_folder_stays_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the sandbox of a research task over the bot's live checkout (its database in `data/`): the accepted
    link is shown at its target only, and the data folder stays empty."""
    checkout = live_checkout(tmp_path)
    places = bots_places(tmp_path, monkeypatch)
    places["data"] = checkout / "data"
    (tmp_path / "opt" / "node-current").symlink_to(places["node"])
    monkeypatch.chdir(checkout)
    settings = with_read_paths(places, str(tmp_path / "opt" / "node-current"), sandbox="bwrap")
    spec = TaskSandboxes(settings, SecretsFilter(), PROBE).spec(checkout, checkout)
    assert spec is not None and places["node"] in spec.read_only
    assert tmp_path / "opt" / "node-current" not in spec.read_only
    command = f"cat {places['node']}/tool.txt {tmp_path}/opt/node-current/tool.txt data/agentlab.db; ls -A data | sed s/^/in-data:/"
    output = (await run_command(command, checkout, 30, sandbox=spec)).output
    assert output.count("NODE-TOOL") == 1 and "db-secret" not in output and "in-data:" not in output, output


@pytest.mark.parametrize("how", ["symlink", "dotdot"])
async def test_the_data_folder_is_covered_where_a_link_or_dotdot_binding_shows_it(tmp_path: Path, how: str) -> None:
    """A second line behind the check at start: a folder bound under a link's (or a `..`) spelling shows its target's
    files under that spelling, and the data folder it holds is covered there, not only where it really lies."""
    checkout = live_checkout(tmp_path)
    tools = tmp_path / "opt" / "tools"
    tools.parent.mkdir()
    if how == "symlink":
        tools.symlink_to(checkout)
        bound = tools
    else:
        tools.mkdir()
        bound = Path(f"{tools}/../../agentlab")
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    spec = spec_for(SecretsFilter(), PROBE, worktree, extra_read_only=[bound])
    spec = dataclasses.replace(spec, hidden=(checkout / "data",))
    if shutil.which("bwrap") is not None and sys.platform.startswith("linux"):
        command = f"cat {bound}/data/agentlab.db; ls -A {bound}/data | sed s/^/in-data:/"
        output = (await run_command(command, worktree, 30, sandbox=spec)).output
        assert "db-secret" not in output and "in-data:" not in output, output
    argv = bwrap_argv(spec, "true")
    assert argv[argv.index(str(bound / "data")) - 1] == "--tmpfs", argv


def test_the_sandbox_binds_no_relative_path(tmp_path: Path) -> None:
    """Whatever reaches the sandbox by another way than the settings: a relative path is refused, not looked up in
    the worktree bwrap runs in."""
    with pytest.raises(ValueError, match="only absolute paths"):
        spec_for(SecretsFilter(), PROBE, tmp_path, extra_read_only=[Path("tools")])
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, tmp_path), read_only=(Path("tools"),))
    with pytest.raises(ValueError, match="'tools' would be looked up in the worktree"):
        bwrap_argv(spec, "true")
