"""A hostile worker through the real bot (scripted model, fake Telegram): what it does to the owner's repository is
undone and reported, what it leaves behind is bounded, what it reads is filtered, and the Diff button stays usable.

The attacks do not depend on the sandbox: the worker's commands run as they would with `SANDBOX=off`.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agents.core.models import TaskStatus
from agents.git.locks import bot_writes
from agents.git.repository import git_common_dir
from agents.git.worktrees import TaskWorktree, worktree_admin_dir
from tests.conftest import USER_ID, BotHarness, git, start_bot, text_now
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import branches, final_summary, start_task, stored_task, until

# quick_tests: what these tests check is not the verdict, so calc's tests are one quick check (tests/conftest.py)
pytestmark = pytest.mark.quick_tests


def tool_results(model: RoleScript, role: str) -> list[str]:
    """Every tool result the model of `role` was shown, in order."""
    seen = []
    for body in model.requests[role]:
        content = body["messages"][-1]["content"]
        if isinstance(content, list):
            seen += [str(block.get("content")) for block in content if block.get("type") == "tool_result"]
    return seen


def attack_then_fix(model: RoleScript, attack: str) -> None:
    """A code task on calc whose worker runs `attack`, then fixes add() and is done."""
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("started"))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": attack}),
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )


async def test_a_worker_moving_main_deleting_branches_and_planting_hooks_is_undone(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tmp_path: Path
) -> None:
    repo = workspace_root / "calc"
    git(repo, "branch", "feature")
    git(repo, "checkout", "-q", "feature")
    (repo / "feature.txt").write_text("feature\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "feature work")
    git(repo, "checkout", "-q", "main")
    main_before = git(repo, "rev-parse", "main").strip()
    marks = tmp_path / "marks"
    marks.mkdir()
    attack = (
        "common=$(git rev-parse --git-common-dir) && "
        "for h in pre-commit prepare-commit-msg post-commit pre-merge-commit post-merge post-checkout; do "
        f'printf "#!/bin/sh\\ntouch {marks}/$h\\n" > $common/hooks/$h && chmod +x $common/hooks/$h; done && '
        f'git config core.fsmonitor "touch {marks}/fsmonitor; false" && '
        "git update-ref refs/heads/main refs/heads/feature && git branch -D feature"
    )
    # With the sandbox on, the git metadata is read-only and the attack fails at once (tests/test_sandbox_attacks.py);
    # the guard is the defence in depth for SANDBOX=off, so it is tested unconfined here.
    bot.runtime.settings.sandboxing.sandbox = "off"
    attack_then_fix(model, attack)
    bot.say("fix calc")
    task, summary = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.COMPLETED
    assert "the bot undid it" in summary.text
    assert "refs/heads/main" in summary.text and "refs/heads/feature" in summary.text
    assert "hooks/post-commit" in summary.text and ".git/config" in summary.text
    assert git(repo, "rev-parse", "main").strip() == main_before
    assert "feature" in branches(repo)
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    events = [e for e in await bot.runtime.store.task_events(1) if e.kind == "guard"]
    assert any("refs/heads/main" in e.detail for e in events)

    bot.tg.press_button(USER_ID, summary.message_id, "task:merge:1")
    await bot.tg.await_for(lambda: "a + b" in text_now(repo / "calc.py"), timeout=30)
    assert list(marks.iterdir()) == [], "a planted hook or fsmonitor ran inside the bot's commit or merge"


async def test_main_moved_by_a_workers_command_while_the_bot_writes_is_still_undone(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tmp_path: Path
) -> None:
    """While the bot writes to a repository (another task's commit, worktree or merge) the guarded tasks' processes
    are stopped, or the write's new snapshot takes a ref a worker moved meanwhile for the bot's own change. A plain
    `run_command` (SANDBOX=off: no cgroup, no service) was not among the processes stopped: a move it made in that
    window stayed, unreported. Here the worker's command waits for its moment and the test holds a write open."""
    bot.runtime.settings.sandboxing.sandbox = "off"
    repo = workspace_root / "calc"
    main = git(repo, "rev-parse", "main").strip()
    planted = git(repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "planted").strip()
    waiting, go = tmp_path / "waiting", tmp_path / "go"
    attack = f"touch {waiting}; while [ ! -e {go} ]; do sleep 0.01; done; git update-ref refs/heads/main {planted}"
    attack_then_fix(model, attack)
    bot.say("fix calc")

    async def command_waits() -> bool:
        return waiting.exists()

    await until(command_waits, timeout=60)
    async with bot_writes(repo):  # a write of the bot's (here: nothing); the command is let go meanwhile
        go.touch()
        for _ in range(100):  # a second for the command to move main, were it running
            if git(repo, "rev-parse", "main").strip() != main:
                break
            await asyncio.sleep(0.01)
    task, summary = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.COMPLETED
    events = [e.detail for e in await bot.runtime.store.task_events(1) if e.kind == "guard"]
    assert any("refs/heads/main" in detail for detail in events), events
    assert git(repo, "rev-parse", "main").strip() == main, "the command's move was taken for the bot's write"
    assert "refs/heads/main" in summary.text


async def test_the_owners_own_commit_while_a_task_runs_stays_and_blames_nobody(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """The owner commits on `main` in their checkout while a task's worker thinks (the sandbox on, as by default: the
    task's processes cannot write the git metadata). The guard once put `main` back under them and told them the
    worker had moved it; the commit is the owner's and stays."""
    repo = workspace_root / "calc"
    asked, go = threading.Event(), threading.Event()

    def thinking(body: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        go.wait(60)
        return claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"})

    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("started"))
    model.add("code", thinking, claude_says.tool_use("run_command", {"command": "true"}), claude_says.text("Fixed."))
    bot.say("fix calc")

    async def worker_asked() -> bool:
        return asked.is_set()

    await until(worker_asked, timeout=60)
    (repo / "NOTES.md").write_text("the owner's notes\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-q", "-m", "the owner's own work")
    owners = git(repo, "rev-parse", "main").strip()
    go.set()
    task, summary = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.COMPLETED
    assert git(repo, "rev-parse", "main").strip() == owners
    assert [e for e in await bot.runtime.store.task_events(1) if e.kind == "guard"] == []
    assert "undid" not in summary.text, summary.text


async def test_a_100_mb_file_is_not_committed_and_is_named(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    repo = workspace_root / "calc"
    objects = repo / ".git" / "objects"
    before = sum(f.stat().st_size for f in objects.rglob("*") if f.is_file())
    model.add("orchestrator", start_task("calc", "Fix add() and keep the data."), claude_says.text("started"))
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": "truncate -s 100M dump.bin"}),
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add(); dump.bin has the data."),
    )
    bot.say("fix calc")
    task, summary = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.COMPLETED
    assert "Not committed (size limits): dump.bin (100 MB, over the 5 MB per-file limit)" in summary.text
    assert "dump.bin" not in git(repo, "ls-tree", "-r", "--name-only", task.branch)
    assert "a + b" in git(repo, "show", f"{task.branch}:calc.py")
    after = sum(f.stat().st_size for f in objects.rglob("*") if f.is_file())
    assert after - before < 1_000_000, "the 100 MB never reached the owner's object store"


async def test_credential_files_are_refused_and_remote_tokens_masked(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    repo = workspace_root / "calc"
    git(repo, "remote", "add", "origin", "https://dev:ghp_SECRETTOKEN123@github.com/dev/calc.git")
    for name in (
        ".envrc",
        ".netrc",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        "server.pem",
        "tls.key",
        "id_ed25519",
        "credentials-prod.json",
    ):
        (repo / name).write_text("ghp_SECRETTOKEN123\n")
    reads = [
        claude_says.tool_use("read_file", {"path": name})
        for name in (
            ".envrc",
            ".netrc",
            ".npmrc",
            ".pypirc",
            ".git-credentials",
            "server.pem",
            "tls.key",
            "id_ed25519",
            "credentials-prod.json",
        )
    ]
    model.add(
        "orchestrator",
        claude_says.tool_use("start_research", {"workspace": "calc", "request": "look around"}),
        claude_says.text("started"),
    )
    model.add(
        "research",
        *reads,
        claude_says.tool_use("read_file", {"path": ".git/config"}),
        claude_says.tool_use("grep", {"pattern": "SECRET", "path": "."}),
        claude_says.tool_use("grep", {"pattern": "github", "path": ".git"}),
        claude_says.tool_use("glob", {"pattern": "**/*"}),
        claude_says.text("## Plan\n1. nothing"),
    )
    bot.say("research calc")
    await bot.tg.await_for(lambda: any("Proposal #1" in (m.text or "") for m in bot.tg.messages(USER_ID)), timeout=60)
    seen = tool_results(model, "research")
    assert not any("ghp_SECRETTOKEN123" in text for text in seen), "a credential reached the model"
    assert sum("holds secrets" in text for text in seen) == 9
    assert any("url = https://«masked»@github.com/dev/calc.git" in text for text in seen)
    assert any(".git/config" in text and "https://«masked»@github.com" in text for text in seen)  # the grep of .git


async def test_the_worker_cannot_write_into_git_metadata(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", start_task("calc", "Fix add()."), claude_says.text("started"))
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": ".git", "content": "gitdir: /tmp/evil\n"}),
        claude_says.tool_use("write_file", {"path": ".git/hooks/post-commit", "content": "#!/bin/sh\n"}),
        claude_says.tool_use("edit_file", {"path": ".git", "old": "gitdir", "new": "evil"}),
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed."),
    )
    bot.say("fix calc")
    task, _ = await final_summary(bot, 1, timeout=60)
    assert task.status is TaskStatus.COMPLETED
    refused = [t for t in tool_results(model, "code") if "is git metadata" in t]
    assert len(refused) == 3


async def test_diff_of_a_big_change_is_capped_and_says_what_it_left_out(bot: BotHarness, model: RoleScript) -> None:
    make = (
        "python3 -c \"import os\nopen('big.txt','w').write('x = 1\\n' * 400000)\n"
        "[open(f'part{i}.txt','w').write(('line %d\\n' % i) * 40000) for i in range(8)]\n"
        "open('pic.png','wb').write(b'\\x89PNG\\x00' + os.urandom(3000))\""
    )
    model.add("orchestrator", start_task("group-therapy", "Generate data."), claude_says.text("started"))
    model.add("code", claude_says.tool_use("run_command", {"command": make}), claude_says.text("Generated."))
    bot.say("generate data in group therapy")
    _, summary = await final_summary(bot, 1, timeout=60)
    assert "Large files committed: big.txt (2.3 MB)" in summary.text
    assert "Binary files committed: pic.png" in summary.text
    bot.tg.press_button(USER_ID, summary.message_id, "task:diff:1")
    doc = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if m.kind == "document"), None), timeout=30
    )
    assert len(doc.data) <= 1_000_000 + 200, "the document fits the cap (and Telegram's 50 MB)"
    text = doc.data.decode()
    assert "#   big.txt (" in text and "#   pic.png" in text and "x = 1" not in text
    assert "truncated" in text and "cut" in doc.caption


async def test_a_stale_index_lock_does_not_fail_the_resumed_task(
    fake_telegram, fake_anthropic, tmp_path: Path, workspace_root: Path, bot_repo: Path
) -> None:
    from telegram_bot.app import stop_application
    from tests.conftest import make_settings

    model = RoleScript()
    fake_anthropic.handler = model
    settings = make_settings(  # the step "running: sleep 60" follows an edit at once: shown after a short interval
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repository=bot_repo, progress_interval_seconds=0.2
    )
    model.add("orchestrator", start_task("calc", "Fix add(), slowly."), claude_says.text("started"))
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.tool_use("run_command", {"command": "sleep 60"}),
    )
    first = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        fake_telegram.send_text(USER_ID, "fix calc")
        await fake_telegram.await_for(
            lambda: any("running: sleep" in (m.text or "") for m in fake_telegram.messages(USER_ID)), timeout=60
        )
    finally:
        await stop_application(first.app)
    task = await stored_task(settings, 1)
    assert task.status is TaskStatus.INTERRUPTED and task.worktree
    tree = TaskWorktree(workspace_root / "calc", Path(task.worktree), task.branch, "main", task.base_commit)
    admin = worktree_admin_dir(await git_common_dir(tree.repo), tree.path)
    (admin / "index.lock").write_bytes(b"")  # what a SIGKILL during the bot's own `git add` leaves
    assert not settings.paths.worktrees_dir.is_relative_to(settings.paths.database_path.parent.resolve())
    assert Path(task.worktree).is_relative_to(settings.paths.worktrees_dir)

    model.add("code", claude_says.text("Resumed: add() adds."))
    second = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        notice = await fake_telegram.await_for(
            lambda: next((m for m in fake_telegram.messages(USER_ID) if "stopped while" in (m.text or "")), None),
            timeout=60,
        )
        fake_telegram.press_button(USER_ID, notice.message_id, "task:resume:1")
        summary = await fake_telegram.await_for(
            lambda: next(
                (m for m in fake_telegram.messages(USER_ID) if "Task #1" in (m.text or "") and "Files:" in m.text), None
            ),
            timeout=60,
        )
        assert "Task #1 done" in summary.text, summary.text
    finally:
        await stop_application(second.app)
    assert "a + b" in git(workspace_root / "calc", "show", f"{task.branch}:calc.py")
