"""run_command: capture, exit codes, timeouts and cancellation that kill the whole process group, output caps, env;
and every other process the bot starts is given an environment of its own (none of the bot's secrets)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import re
import signal
import time
from pathlib import Path

import pytest

from agents.sandbox.reaping import reap
from agents.sandbox.shell import DEFAULT_SECRETS, CommandResult, child_env, run_command
from agents.tools.file_tools import ToolError
from tests.support.processes import host_pids, own_sleep

pytestmark = pytest.mark.slow  # spawns processes (still only a few seconds)


def alive(pid: int, started: int | None = None) -> bool:
    """True while `pid` exists and is not a zombie waiting to be reaped (and, given `started`, is still the process
    that started then: a PID freed and taken by another test's process is not the one we killed)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] != "Z" and (started is None or int(fields[19]) == started)


def start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (FileNotFoundError, ProcessLookupError):
        return None


def described(pids: list[int]) -> str:
    """What each still-running pid is, for a failure message."""
    said = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            said.append(f"{pid}: {Path(f'/proc/{pid}/stat').read_text()[:80]!r} {cmdline[:80]!r}")
        except OSError as err:
            said.append(f"{pid}: {err}")
    return "; ".join(said)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group `pgid`, found by scanning /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


async def group_empty(pgid: int, within: float = 10.0) -> bool:
    """The group has no live member left (a SIGKILLed process takes a moment to finish exiting)."""
    deadline = time.monotonic() + within
    while group_members(pgid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def wait_gone(pids: list[int], within: float = 10.0, started: dict[int, int | None] | None = None) -> bool:
    """Every pid gone within `within` (generous: a loaded machine is slow to reap)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(alive(pid, (started or {}).get(pid)) for pid in pids):
            return True
        await asyncio.sleep(0.02)
    return False


def pids_in(output: str, label: str) -> int:
    match = re.search(rf"{label}=(\d+)", output)
    assert match, output
    return int(match.group(1))


async def test_captures_stdout_and_stderr_merged_with_exit_code(tmp_path: Path) -> None:
    result = await run_command("echo out; echo err >&2; printf 'no newline'; exit 3", tmp_path, timeout=10)
    assert result.exit_code == 3
    assert not result.ok and not result.timed_out and not result.cancelled
    assert result.output == "out\nerr\nno newline"
    assert 0 <= result.duration < 5
    text = result.format_for_model()
    assert text.startswith("$ echo out;") and "exit code 3" in text and "no newline" in text


async def test_success_runs_in_cwd_with_bash_and_no_stdin(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("here")
    result = await run_command("cat marker.txt; echo; [[ -n $BASH_VERSION ]] && echo bash; cat; echo end", tmp_path, 10)
    assert result.ok and result.exit_code == 0
    assert result.output == "here\nbash\nend\n"


async def test_signal_death_is_reported(tmp_path: Path) -> None:
    result = await run_command("kill -TERM $$", tmp_path, 10)
    assert result.exit_code == -15 and not result.ok
    assert "killed by SIGTERM" in result.format_for_model()


async def test_missing_cwd_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        await run_command("true", tmp_path / "nope", 10)


async def test_timeout_kills_sleep(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await run_command("echo pgid=$$; sleep 1000", tmp_path, timeout=0.5)
    assert time.monotonic() - started < 3
    assert result.timed_out and result.exit_code is None and not result.ok
    assert "pgid=" in result.output
    assert "timed out after" in result.format_for_model() and "process group killed" in result.format_for_model()
    pgid = pids_in(result.output, "pgid")
    assert await wait_gone([pgid])
    assert await group_empty(pgid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


async def test_timeout_kills_children_of_nested_shell(tmp_path: Path) -> None:
    result = await run_command("echo pgid=$$; sh -c 'sleep 1000 & echo child=$!; sleep 1000'", tmp_path, timeout=0.7)
    assert result.timed_out
    pgid, child = pids_in(result.output, "pgid"), pids_in(result.output, "child")
    assert await wait_gone([pgid, child])
    assert await group_empty(pgid)


async def test_timeout_escalates_to_sigkill_when_term_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.sandbox import shell

    monkeypatch.setattr(shell, "TERM_GRACE_SECONDS", 0.3)
    result = await run_command("trap '' TERM; echo pgid=$$; sleep 1000 & wait", tmp_path, timeout=0.5)
    assert result.timed_out
    pgid = pids_in(result.output, "pgid")
    assert await wait_gone([pgid])
    assert await group_empty(pgid)


async def test_background_leftovers_are_killed_after_the_command_finishes(tmp_path: Path) -> None:
    result = await run_command("sleep 1000 & echo child=$!", tmp_path, timeout=30)
    assert result.exit_code == 0 and not result.timed_out
    assert "background processes" in result.output
    assert await wait_gone([pids_in(result.output, "child")])


async def test_cancellation_kills_the_group_and_reraises(tmp_path: Path) -> None:
    marker = tmp_path / "pids"
    task = asyncio.create_task(
        run_command(f"echo $$ > {marker}; sh -c 'echo $$ >> {marker}; sleep 1000' & sleep 1000", tmp_path, 60)
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (not marker.exists() or len(marker.read_text().split()) < 2):
        await asyncio.sleep(0.02)
    pgid, child = (int(p) for p in marker.read_text().split())
    assert alive(pgid) and alive(child)
    started = {pid: start_time(pid) for pid in (pgid, child)}
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone([pgid, child], started=started), described([pgid, child])
    assert await group_empty(pgid)


def _children_running(word: str) -> set[int]:
    """The child processes of this one whose command line holds `word`."""
    found = set()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                if word.encode() in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


async def test_a_command_cancelled_while_it_starts_has_its_whole_group_ended(tmp_path: Path) -> None:
    # The cancel comes after the fork but before asyncio has connected the process's pipes (the event loop is held
    # meanwhile). asyncio then killed the shell alone and waited for its pipes, which the shell's child held: the
    # cancel hung as long as that child lived, and it lived on.
    marker = tmp_path / "pids"
    sleep = "sleep 1000.4417"  # the shell's own, and its child's: found by it (the shell may exec it at once)
    task = asyncio.create_task(
        run_command(f"sh -c 'echo $$ >> {marker}; {sleep}' & echo $$ >> {marker}; {sleep}", tmp_path, 60)
    )
    deadline = time.monotonic() + 10
    while not _children_running("1000.4417") and time.monotonic() < deadline:
        await asyncio.sleep(0)  # one turn of the event loop at a time, up to the one that forks the shell
    while time.monotonic() < deadline and (not marker.exists() or len(marker.read_text().split()) < 2):
        time.sleep(0.01)  # noqa: ASYNC251 -- on purpose: the event loop must not connect the pipes meanwhile
    pids = [int(p) for p in marker.read_text().split()]
    started = {pid: start_time(pid) for pid in pids}
    task.cancel()
    try:
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(15):
                await asyncio.shield(task)
                await task
    except TimeoutError:
        pytest.fail(f"the cancel hung: {described(pids)}")
    finally:
        for pid in pids:  # never left behind by a failure
            if alive(pid, started[pid]):
                os.kill(pid, signal.SIGKILL)
    assert await wait_gone(pids, started=started), described(pids)


async def test_huge_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    command = "echo FIRST-LINE; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo LAST-LINE"
    result = await run_command(command, tmp_path, timeout=30, max_output=2_000)
    assert result.ok
    assert result.output.startswith("FIRST-LINE\nxxx")
    assert result.output.endswith("xxx\nLAST-LINE\n")
    match = re.search(r"\[\.\.\. (\d+) bytes omitted \.\.\.\]", result.output)
    assert match
    assert int(match.group(1)) == len("FIRST-LINE\n") + 5_000_000 + len("\nLAST-LINE\n") - 2_000
    assert len(result.output) < 2_100


async def test_small_output_is_not_marked(tmp_path: Path) -> None:
    result = await run_command("seq 1 100", tmp_path, timeout=10, max_output=10_000)
    assert result.output == "".join(f"{n}\n" for n in range(1, 101))
    assert "omitted" not in result.output


async def test_secrets_are_absent_from_child_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in (
        "TELEGRAM_BOT_TOKEN",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "MY_SECRET",
        "OPENAI_API_KEY",
    ):
        monkeypatch.setenv(key, "leaked-" + key)
    monkeypatch.setenv("HARMLESS_SETTING", "kept")
    result = await run_command("env", tmp_path, timeout=10)  # env=None means child_env()
    assert "leaked-" not in result.output
    assert "HARMLESS_SETTING=kept" in result.output
    for hint in ("GIT_TERMINAL_PROMPT=0", "PAGER=cat", "CI=1"):
        assert hint in result.output.split("\n")


def test_child_env_filters_a_given_base() -> None:
    base = {"PATH": "/bin", "X_TOKEN_Y": "s", "my_api_key": "s", "CUSTOM": "s", "HOME": "/root", "PASSWORD_FILE": "s"}
    env = child_env(base, secret_keys={"CUSTOM"})
    assert env["PATH"] == "/bin" and env["HOME"] == "/root"
    assert not {"X_TOKEN_Y", "my_api_key", "CUSTOM", "PASSWORD_FILE"} & env.keys()
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["PAGER"] == "cat" and env["CI"] == "1"
    assert base["CUSTOM"] == "s"  # the input is not modified
    assert {"TELEGRAM_BOT_TOKEN", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"} <= DEFAULT_SECRETS


ROOT = Path(__file__).resolve().parents[1]
# process starts whose environment is not the bot's: a script run inside the sandbox, and `agentlab eval`'s own
# fixture repositories (a developer's command, not the bot)
STARTS_NOT_FROM_THE_BOT = {"agents/tools/shoot_pages.py", "agents/evals/tasks.py"}


def process_starts_without_env(source: str) -> list[int]:
    """The lines of `source` that start a process (asyncio's create_subprocess_*, subprocess's, start_group) without
    `env=` (or a `**options` that may hold it): such a child inherits the bot's environment, secrets included."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        of_subprocess = (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "subprocess"
        )
        starts = name in ("create_subprocess_exec", "create_subprocess_shell", "start_group") or (
            of_subprocess and name in ("run", "Popen", "call", "check_call", "check_output")
        )
        if starts and not any(k.arg in ("env", None) for k in node.keywords):
            lines.append(node.lineno)
    return lines


def test_every_process_the_bot_starts_is_given_its_environment() -> None:
    """The bot's secrets may be in its own environment (docker --env-file, systemd's Environment=): a helper started
    outside the sandbox (speech, ripgrep, pasta, git, the parse processes) gets `child_env()` or `git_env()`."""
    found = {}
    for path in sorted([*ROOT.joinpath("agents").rglob("*.py"), *ROOT.joinpath("telegram_bot").rglob("*.py")]):
        name = path.relative_to(ROOT).as_posix()
        if name not in STARTS_NOT_FROM_THE_BOT and (lines := process_starts_without_env(path.read_text())):
            found[name] = lines
    assert not found, found


def test_the_check_sees_a_process_started_without_env() -> None:
    source = (
        "import asyncio, subprocess\n"
        "asyncio.create_subprocess_exec('rg')\n"
        "subprocess.run(['rm'], env={})\n"
        "start_group(argv, **options)\n"
        "subprocess.Popen(['x'])\n"
    )
    assert process_starts_without_env(source) == [2, 5]


async def test_explicit_env_is_used_as_given(tmp_path: Path) -> None:
    result = await run_command("echo $ONLY_THIS", tmp_path, 10, env={"ONLY_THIS": "yes", "PATH": os.environ["PATH"]})
    assert result.output == "yes\n"


def test_command_result_ok_and_formatting() -> None:
    assert CommandResult("true", 0, "", False, False, 0.1).ok
    assert not CommandResult("x", None, "", True, False, 5).ok
    assert not CommandResult("x", 0, "", False, True, 5).ok
    assert "(no output)" in CommandResult("true", 0, "", False, False, 0.1).format_for_model()
    assert "cancelled" in CommandResult("x", None, "", False, True, 1).format_for_model()


def test_orphans_are_found_by_their_tag_only(tmp_path) -> None:
    import subprocess
    import time

    from agents.work.orphans import instance_token, kill_orphans, task_tag

    token = instance_token(tmp_path / "bot.db")
    mine = subprocess.Popen(["sleep", "60"], env={**os.environ, **task_tag(token, 7)}, start_new_session=True)
    other_task = subprocess.Popen(["sleep", "60"], env={**os.environ, **task_tag(token, 8)}, start_new_session=True)
    other_bot = subprocess.Popen(
        ["sleep", "60"], env={**os.environ, **task_tag("somebodyelse", 7)}, start_new_session=True
    )
    try:
        time.sleep(0.1)
        assert kill_orphans(token, {7}) == [mine.pid]
        assert mine.wait(5) == -9
        assert other_task.poll() is None and other_bot.poll() is None
    finally:
        for proc in (mine, other_task, other_bot):
            proc.kill()
            proc.wait()


async def test_reap_of_a_group_ends_the_process_and_what_it_started() -> None:
    """`reap(group=True)`: a process in a session of its own (a repo-map parse process) is killed with everything it
    started, its stdin pipe left open by the caller is closed, and the wait ends at once, not after the bound."""
    proc = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        "sleep 300 & echo $!; wait",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    child = int(await proc.stdout.readline())
    async with asyncio.timeout(20):  # a hang guard far below the bound: not a speed figure
        await reap(proc, group=True, bound=600)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdin is not None and proc.stdin.is_closing()
    assert await wait_gone([child]), "the process it started outlived it"


ESCAPED = own_sleep("4141")


def _pipes() -> int:
    """How many pipes this process holds open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    return count


async def test_a_command_cancelled_twice_is_still_reaped_before_its_caller_ends(tmp_path: Path) -> None:
    """A second cancellation while a cancelled command is being killed (a shutdown cancels what its task cancelled a
    moment ago) must not break off the clean-up: the caller ends only once the process is waited for and its pipe
    closed. (Broken off, the pipe stayed open, held by a child out of the group's reach, and the subprocess transport
    was collected after the event loop had closed, which reported an exception.)"""
    before = _pipes()
    # the shell ignores SIGTERM: the kill waits out its grace, when the second cancellation comes; a child in a
    # session of its own, out of the group's reach, holds the output pipe open after the group is killed
    line = f"setsid sleep {ESCAPED} & trap '' TERM; echo started; sleep 30"
    command = asyncio.create_task(run_command(line, tmp_path, timeout=60))
    try:
        await asyncio.sleep(0.5)
        command.cancel()
        await asyncio.sleep(0.2)
        command.cancel()
        with pytest.raises(asyncio.CancelledError):
            await command
        assert _pipes() == before, "the command's output pipe is still open after its caller ended"
    finally:
        for pid in host_pids(ESCAPED):
            os.kill(pid, signal.SIGKILL)
