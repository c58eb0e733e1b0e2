"""A hostile worker races the bot's file tools: a folder of its worktree swapped for a symlink out of it between the
bot's check of a path and its use must never let the bot read, search or write outside the worktree.

The file tools run in the bot's own process, outside the sandbox; they check a path by resolving it, then open it.
The worker (the scripted model through the real bot and real bwrap) starts a background service in its sandbox that
swaps `real/`, a real folder, with `link`, a symlink to the folder of the workspaces, again and again (one atomic
`renameat2(RENAME_EXCHANGE)` each time), then calls read_file (of a file there, and of a missing one, whose error
names what the folder holds), grep, write_file, edit_file and glob on paths under `real/` many times. Each call whose
check saw the folder and whose use saw the link would read the neighbour's secret, list its names or write next to
it. A race: on a defenceless bot some of the calls win it; the defended bot refuses every call that sees the link.
"""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest

from agents.core.models import Caller
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.processes import host_pids, own_sleep
from tests.support.sandbox import needs_bwrap, planted  # noqa: F401  (fixtures)
from tests.support.tasks import ended, everything_said, start_task, tool_results

pytestmark = needs_bwrap

TRIES = 30  # calls of each tool (the defenceless bot lost the race in every run, reads every time)

SWAPPER = """\
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
print("swapping", flush=True)
end = time.monotonic() + 120
while time.monotonic() < end:
    libc.renameat2(-100, b"real", -100, b"link", 2)  # AT_FDCWD, RENAME_EXCHANGE
"""


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.settings(worker_max_steps=TRIES * 6 + 20)
async def test_a_folder_swapped_for_a_link_never_leads_the_file_tools_out(
    bot: BotHarness, model: RoleScript, planted: Path, workspace_root: Path
) -> None:
    setup = f"mkdir -p real && echo decoy > real/secret-next-door.txt && ln -s {workspace_root} link && echo ready"
    calls = [
        claude_says.tool_use("write_file", {"path": "swap.py", "content": SWAPPER}),
        claude_says.tool_use("run_command", {"command": setup}),
        claude_says.tool_use("run_command", {"command": "python -u swap.py", "background": True}),
    ]
    for i in range(TRIES):
        calls.append(claude_says.tool_use("read_file", {"path": "real/secret-next-door.txt"}))
        calls.append(claude_says.tool_use("grep", {"pattern": "SECRET|decoy", "path": "real"}))
        calls.append(claude_says.tool_use("write_file", {"path": f"real/pwned-{i}.txt", "content": "pwned\n"}))
        edit = {"path": "real/secret-next-door.txt", "old": "-SECRET-", "new": "-EDITED-"}
        calls.append(claude_says.tool_use("edit_file", edit))
        calls.append(claude_says.tool_use("glob", {"pattern": "real/**"}))
        calls.append(claude_says.tool_use("read_file", {"path": "real/missing.txt"}))  # the hint names what is there
    model.add("orchestrator", start_task("calc", "Look around."), claude_says.text("Started."))
    model.add("code", *calls, claude_says.text("Done looking around."))
    bot.say("look around calc")
    await ended(bot, 1, timeout=180)
    results = tool_results(model)
    assert any("swapping" in r for r in results), results[:3]
    assert sum("decoy" in r for r in results) > 0, "no call saw the folder: the race was never run"
    said = everything_said(bot, model)
    leaked = [r for r in results if "NEIGHBOUR-SECRET" in r]  # each distinct result once: a tool that leaked
    leaked += [r for r in results if "group-therapy" in r]  # a neighbour's name, listed by glob or a hint
    written = sorted(p.name for p in workspace_root.glob("pwned-*"))
    assert (leaked, written) == ([], []), f"read out of the worktree by {leaked}; written out of it: {written}"
    assert "NEIGHBOUR-SECRET-5e1" not in said
    assert (workspace_root / "secret-next-door.txt").read_text() == "NEIGHBOUR-SECRET-5e1\n", (
        "edited out of the worktree"
    )


FILES = 200  # decoys of the worker, each the size of the host file of the same name (git reads as many bytes as it saw)
NEIGHBOUR_LINE = "NEIGHBOUR-SECRET-{:04d}\n"


ROUNDS = 3  # tasks, each committed once: a defenceless bot leaked in about half of its commits (40-60%)


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_a_folder_swapped_for_a_link_during_the_bots_commit_never_puts_outside_files_in_it(
    bot: BotHarness, model: RoleScript, tmp_path: Path, workspace_root: Path
) -> None:
    """The bot commits the worker's turn with git, outside the sandbox, while the worker's service swaps `real/` for
    a link to a folder of the host again and again: git looks at a folder once, then opens the files below it by
    name, so files read through the link would go into the task's commit, where the worker reads them back (`git
    show`: the repository's objects are readable in its sandbox). The task's processes are paused while the bot
    commits."""
    outside = tmp_path / "host-folder"
    outside.mkdir()
    for i in range(FILES):
        (outside / f"f-{i}.txt").write_text(NEIGHBOUR_LINE.format(i))
    decoys = "".join(f"printf 'worker-decoy-lin-{i:04d}\\n' > real/f-{i}.txt; " for i in range(FILES))
    setup = f"mkdir -p real && {decoys}ln -s {outside} link && echo ready"
    for task_id in range(1, ROUNDS + 1):
        calls = [
            claude_says.tool_use("write_file", {"path": "swap.py", "content": SWAPPER}),
            claude_says.tool_use("run_command", {"command": setup}),
            claude_says.tool_use("run_command", {"command": "python -u swap.py", "background": True}),
            claude_says.text("Done."),
        ]
        model.add("orchestrator", start_task("calc", "Make files."), claude_says.text("Started."))
        model.add("code", *calls)
        bot.say("make files in calc")
        task = await ended(bot, task_id, timeout=120)
        assert task.branch, task
        log = subprocess.run(
            ["git", "log", "-p", "--no-color", f"{task.base_commit}..{task.branch}"],
            cwd=workspace_root / "calc",
            capture_output=True,
            text=True,
        ).stdout
        assert "worker-decoy-lin-" in log, f"task {task_id}: the worker's files were never committed"
        leaked = sorted(set(re.findall(r"NEIGHBOUR-SECRET-\d+", log)))
        assert leaked == [], (
            f"task {task_id}'s commits hold {len(leaked)} files from outside its worktree: {leaked[:5]}"
        )
    assert any("swapping" in r for r in tool_results(model))


WORKING = own_sleep("5151")  # the worker's command still running: its task is in progress


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_the_diff_of_a_running_task_is_its_commits_never_its_worktrees_files(
    bot: BotHarness, model: RoleScript
) -> None:
    """Diff of a task still running shows what it committed: its worktree's files are read by git by path, outside
    the sandbox, while a service of the task may swap a folder for a link out of the worktree (the commit test above),
    so uncommitted files are never read for it. Each turn of the worker is committed; the summary's Diff, once the
    task has ended, shows everything."""
    model.add("orchestrator", start_task("calc", "Work."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "wip.txt", "content": "WORK-IN-PROGRESS\n"}),
        claude_says.tool_use("run_command", {"command": f"sleep {WORKING}"}),
    )
    bot.say("work on calc")
    await bot.tg.await_for(lambda: host_pids(WORKING), timeout=60)
    out = io.BytesIO()
    await bot.runtime.crew.branches.write_diff(Caller(chat_id=USER_ID, user_id=USER_ID), 1, out)
    bot.tg.send_command(USER_ID, "/cancel")
    await ended(bot, 1, timeout=60)
    assert "WORK-IN-PROGRESS" not in out.getvalue().decode(), "the diff read the running task's worktree"
