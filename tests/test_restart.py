"""`python -m telegram_bot` as a real process: SIGTERM exits cleanly, SIGKILL mid-task loses nothing and resumes (a
worktree's own file system, where the machine allows one, survives the bot and a machine restart)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from agents.sandbox import task_disk
from agents.store.database import Store
from tests.conftest import USER_ID
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text, spare
from tests.support.processes import bot_env, host_pids, launch, own_sleep
from tests.support.sandbox import FAKE_KEY
from tests.support.tasks import start_task, tool_results

pytestmark = pytest.mark.slow
# sleep arguments found again in /proc: unique to this process, so parallel test processes never see each other's
ORPHAN, FOREGROUND, SERVICE = own_sleep("1"), own_sleep("2"), own_sleep("3")
DRAFTING = own_sleep("4")


async def stops_cleanly_on_sigterm(proc: subprocess.Popen[bytes], log: Path) -> None:
    """SIGTERM to an idle bot: it exits with status 0 within ten seconds."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(proc.wait, 15)
    assert time.monotonic() - started < 10
    assert code == 0, log.read_text()[-2000:]


# Where bubblewrap runs, the restart test below stops its second bot with SIGTERM and makes the same checks while a
# foreground task runs (a harder case than an idle bot: the same signal handler, with a worker to interrupt as well):
# one bot process (~2.5 s of CPU) less. This test makes them where that one cannot run.
@pytest.mark.skipif(shutil.which("bwrap") is not None, reason="checked by the SIGKILL restart test's second bot")
async def test_sigterm_stops_cleanly_within_ten_seconds(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    proc = launch(bot_env(fake_telegram, fake_anthropic, tmp_path, workspace_root), tmp_path, "term")
    try:
        await fake_telegram.wait_for_request("getUpdates", timeout=60)
        await stops_cleanly_on_sigterm(proc, tmp_path / "term.log")
    finally:
        if proc.poll() is None:
            proc.kill()


def worktree_of_task(worktrees: Path, task_id: int) -> Path:
    found = [p for p in worktrees.glob(f"*-task-{task_id}-*") if p.is_dir()]
    assert len(found) == 1, f"expected one worktree of task #{task_id} in {worktrees}: {found}"
    return found[0]


def open_turns(tmp_path: Path) -> int:
    """How many messages the running bot holds on record (its database, read beside it: WAL lets a reader in)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "bot.db", timeout=5)) as db:
        try:
            return int(db.execute("SELECT count(*) FROM open_turns").fetchone()[0])
        except sqlite3.OperationalError:  # not made yet
            return 0


def message_with(tg, text: str):  # noqa: ANN001, ANN201 - the fake Telegram and one of its messages
    return next((m for m in tg.messages(USER_ID) if text in (m.text or "")), None)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed: commands are refused")
@pytest.mark.untested_calc  # task #2 in calc is discarded: neither its verdict nor its end is looked at
async def test_sigkill_mid_task_then_restart_resumes_and_discards_then_sigterm_mid_task_stops_cleanly(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    """Two bot processes for what five would check one by one (each start costs ~2.5 s of CPU).

    The first is SIGKILLed with two tasks mid-way: history survives and no process of either task is left. Where the
    machine gives each worktree a file system of its own (SANDBOX_DISK_FS=auto), the mounts survive the bot; then the
    machine restarts for the second task (its mount is gone, its image stays), and an image is left with no worktree.
    The second bot mounts that image again (the uncommitted draft is still there), deletes the image with no worktree,
    reports both tasks, resumes the first and discards the second, whose image goes with its worktree. Then a
    foreground task: its first command looks for the bot's keys (in the bot's real environment and in its `.env`, as a
    real bot keeps them) through /proc and finds neither; its second runs until SIGTERM, which stops the bot within
    ten seconds and leaves that task resumable."""
    own_fs = task_disk.support().available
    model = RoleScript()
    fake_anthropic.handler = model
    model.add(
        "orchestrator",
        start_task("group-therapy", "Write notes.md, slowly."),
        claude_says.text("Started task #1."),
    )
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "notes.md", "content": "step one\n"}),
        claude_says.tool_use(  # it prints a line: its start is not waited out (services.START_WAIT_SECONDS)
            "run_command", {"command": f"setsid sleep {SERVICE} & echo up; exec sleep {SERVICE}", "background": True}
        ),
        claude_says.tool_use("run_command", {"command": f"sleep {ORPHAN} & exec sleep {ORPHAN}"}),
    )
    env = bot_env(fake_telegram, fake_anthropic, tmp_path, workspace_root) | {
        "ANTHROPIC_API_KEY": FAKE_KEY,
        "SANDBOX_DISK_FS": "auto" if own_fs else "off",
        "SANDBOX_MAX_DISK_MB": "64",
    }
    (tmp_path / ".env").write_text(f"ANTHROPIC_API_KEY={FAKE_KEY}\n")  # the bots' cwd is tmp_path
    worktrees = tmp_path / "data-worktrees"
    first = launch(env, tmp_path, "first")
    try:
        fake_telegram.send_text(USER_ID, "write the notes in group therapy")
        await fake_telegram.await_for(lambda: len(host_pids(ORPHAN)) == 2 and len(host_pids(SERVICE)) == 2, timeout=60)
        # task #1 waits on its command: what the code worker is told next is task #2's
        model.add("orchestrator", start_task("calc", "Write a draft."), claude_says.text("Started task #2."))
        model.add(
            "code", claude_says.tool_use("run_command", {"command": f"echo draft > draft.txt; exec sleep {DRAFTING}"})
        )
        fake_telegram.send_text(USER_ID, "write a draft in calc")
        await fake_telegram.await_for(lambda: host_pids(DRAFTING), timeout=60)
        # a question the orchestrator is still answering when the bot dies, and one waiting behind it for the chat's
        # turn: their answers are lost, and the next start says so (their updates may be confirmed already, and are
        # never answered twice)
        model.add("orchestrator", claude_says.text("Too late to be seen.", delay=30))
        fake_telegram.send_text(USER_ID, "what is in calc?")
        await fake_telegram.await_for(
            lambda: any("what is in calc?" in last_user_text(r) for r in model.requests["orchestrator"]), timeout=30
        )
        fake_telegram.send_text(USER_ID, "and in group therapy?")
        await fake_telegram.await_for(lambda: open_turns(tmp_path) == 2, timeout=30)
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 10)
    finally:
        if first.poll() is None:
            first.kill()
    # the sandbox dies with its parent (--die-with-parent), and its PID namespace with it: no orphan is left,
    # a task service's included
    await fake_telegram.await_for(
        lambda: not host_pids(ORPHAN) and not host_pids(SERVICE) and not host_pids(DRAFTING), timeout=10
    )
    draft = worktree_of_task(worktrees, 2)
    ghost = worktrees / task_disk.IMAGES_FOLDER / "calc-task-99-gone.img"
    if own_fs:
        assert os.path.ismount(draft), "the worktree's mount did not survive the bot"
        assert (draft / "draft.txt").read_text() == "draft\n"
        # the machine restarts: the mount is gone, the image stays; and an image whose worktree is gone
        await fake_telegram.await_for(  # the killed sandbox's last holds on it may take a moment to go
            lambda: subprocess.run(["umount", str(draft)], capture_output=True).returncode == 0, timeout=10
        )
        assert not any(draft.iterdir())
        ghost.write_bytes(b"")

    model.add("code", claude_says.text("Resumed: notes.md is complete."))
    second = launch(env, tmp_path, "second")
    try:
        notice = await fake_telegram.await_for(lambda: message_with(fake_telegram, "stopped while task #1"), timeout=60)
        assert notice.callback_data == ["task:resume:1", "task:discard:1"]
        drafted = await fake_telegram.await_for(lambda: message_with(fake_telegram, "stopped while task #2"))
        assert drafted.callback_data == ["task:resume:2", "task:discard:2"]
        lost = message_with(fake_telegram, "your message “what is in calc?”")
        assert lost is not None and "stopped before it had answered" in lost.text and "send it again" in lost.text
        assert message_with(fake_telegram, "your message “and in group therapy?”"), "a message waiting is told too"
        assert message_with(fake_telegram, "write a draft in calc") is None, "only the messages cut short are told"
        assert (draft / "draft.txt").read_text() == "draft\n", "the uncommitted draft was lost"
        if own_fs:
            assert os.path.ismount(draft), (tmp_path / "second.log").read_text()[-3000:]
            assert not ghost.exists(), "an image with no worktree was not deleted"
        fake_telegram.press_button(USER_ID, notice.message_id, "task:resume:1")
        summary = await fake_telegram.await_for(
            lambda: next(
                (
                    m
                    for m in fake_telegram.messages(USER_ID)
                    if "Task #1 needs a look" in (m.text or "") and "Files:" in m.text
                ),
                None,
            ),
            timeout=60,
        )
        assert "Resumed: notes.md is complete." in summary.text and "notes.md" in summary.text
        resumed_turn = model.requests["code"][-1]["messages"][0]["content"][0]["text"]
        assert "interrupted and is being resumed" in resumed_turn and "writing notes.md" in resumed_turn
        fake_telegram.press_button(USER_ID, drafted.message_id, "task:discard:2")
        await fake_telegram.await_for(lambda: message_with(fake_telegram, "discarded"), timeout=60)
        assert not os.path.ismount(draft) and not draft.exists()
        assert not task_disk.image_for(draft).exists(), "Discard left the task's image behind"

        # no task runs now: a foreground task, whose first command probes for the keys, the second runs on
        orchestrator_before, earlier_results = len(model.requests["orchestrator"]), set(tool_results(model))
        model.add(
            "orchestrator",
            start_task("group-therapy", "Run the long job.", background=False),
            # SIGTERM ends the foreground wait and the orchestrator's turn goes on with the tool's answer (the task
            # has not ended): one more call while the bot stops, if the process gets that far
            spare(claude_says.text("Stopping."), why="served only if the stopping process gets that far"),
        )
        model.add(
            "code",
            claude_says.tool_use(
                "run_command",
                {
                    "command": (
                        "cat /proc/*/environ /proc/$PPID/environ /proc/1/environ | tr '\\0' '\\n'; "
                        "cat /proc/$PPID/cwd/.env /proc/1/cwd/.env; ls /proc | grep -c '^[0-9]'"
                    )
                },
            ),
            claude_says.tool_use("run_command", {"command": f"exec sleep {FOREGROUND}"}),
        )
        fake_telegram.send_text(USER_ID, "run the long job, I'll wait")
        await fake_telegram.await_for(lambda: host_pids(FOREGROUND), timeout=60)
        environ = Path(f"/proc/{second.pid}/environ").read_bytes()
        assert environ.count(FAKE_KEY.encode()) == 1, "the key is really there"
        await stops_cleanly_on_sigterm(second, tmp_path / "second.log")
        await fake_telegram.await_for(lambda: not host_pids(FOREGROUND), timeout=5)
        if own_fs:  # the stopped task's worktree is kept for its resume, its file system unmounted with the bot
            stopped_tree = worktree_of_task(worktrees, 3)
            assert not os.path.ismount(stopped_tree) and task_disk.image_for(stopped_tree).is_file()
    finally:
        for orphan in host_pids(ORPHAN) + host_pids(SERVICE) + host_pids(DRAFTING) + host_pids(FOREGROUND):
            with contextlib.suppress(ProcessLookupError):  # in case an assertion above failed
                os.kill(orphan, signal.SIGKILL)
        if second.poll() is None:
            second.kill()
    store = await Store.open(tmp_path / "data" / "bot.db")
    resumed, stopped = await store.get_task(1), await store.get_task(3)
    messages = await store.all_messages(USER_ID)
    await store.close()
    assert resumed.status is TaskStatus.UNVERIFIED  # ended; no tests in group-therapy
    assert messages[0].content == "write the notes in group therapy", "history survived SIGKILL"
    assert stopped.status is TaskStatus.INTERRUPTED, "a task stopped by SIGTERM is resumable, not cancelled"
    for after_the_wait in model.requests["orchestrator"][orchestrator_before + 1 :]:  # what the tool told the model
        told = last_user_text(after_the_wait)
        assert "has not ended" in told and "already sent" not in told, told
    results = [result for result in tool_results(model) if result not in earlier_results]
    assert results and "AGENTLAB_TASK" in results[0], results  # the probe ran and printed its own environment
    said = json.dumps(model.requests["code"]) + "".join(m.text or "" for m in fake_telegram.messages(USER_ID))
    assert FAKE_KEY not in said and fake_telegram.token not in said
