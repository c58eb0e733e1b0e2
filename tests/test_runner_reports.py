"""A runner's report, applied on the bot's side (agents/engine/task_reports.py): the branch it names is fetched from
the shared remote into the owner's checkout only when it is the task's. A runner runs many chats' tasks; a report
naming another branch (the owner's `release`) would have it force-fetched over the owner's own and made the task's,
for Merge and Discard to act on."""

from __future__ import annotations

from pathlib import Path

from agents.core.branch_names import is_task_branch, task_branch_name
from agents.core.models import Task, WorkerKind
from agents.engine.payloads import TaskReport
from agents.engine.task_reports import TaskReports
from agents.store.database import Store
from agents.workspaces.folders import Workspaces
from tests.conftest import git
from tests.support.settings import offline_settings


class Notices:
    """The bot's outbox, recording what it is asked to deliver (only notices: a summary here fails the test)."""

    def __init__(self) -> None:
        self.said: list[str] = []

    async def deliver(self, chat_id, markdown, *, buttons=None, reply_to=None, kind="notice", task_id=None):
        assert kind == "notice", f"unexpected {kind}: {markdown}"
        self.said.append(markdown)
        return 1


def test_a_task_branch_is_the_name_the_bot_gives_that_task() -> None:
    name = task_branch_name(12, "Fix the login form!")
    assert is_task_branch(name, 12) and is_task_branch(f"{name}-2", 12)
    for other in (
        task_branch_name(1, "x"),
        task_branch_name(120, "x"),
        "release",
        "main",
        "agentlab/task-12-",
        f"{name}/x",
    ):
        assert not is_task_branch(other, 12), other


async def test_a_report_naming_a_branch_not_the_tasks_fetches_nothing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    repo = root / "calc"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "branch", "release")
    owners = git(repo, "rev-parse", "release").strip()
    shared = tmp_path / "shared.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(shared))
    git(repo, "remote", "add", "origin", str(shared))
    runner = tmp_path / "runner"
    git(tmp_path, "clone", "-q", str(shared), str(runner))
    git(runner, "checkout", "-q", "release")
    (runner / "a.txt").write_text("planted\n")
    git(runner, "commit", "-q", "-am", "planted on the shared remote")
    git(runner, "push", "-q", "--force", "origin", "release")

    store = await Store.open(tmp_path / "db.sqlite")
    try:
        task = await store.add_task(
            Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i")
        )
        notices = Notices()
        settings = offline_settings(root, runner_remote="origin")
        reports = TaskReports(settings, store, notices, Workspaces(root))
        report = TaskReport(task_id=task.stored_id, status="completed", branch="release", pushed=True, commit_sha="x")
        await reports.apply(task, "run-1", report)
        stored = await store.get_task(task.stored_id)
    finally:
        await store.close()
    assert git(repo, "rev-parse", "release").strip() == owners, "the owner's `release` was overwritten"
    assert stored is not None and stored.branch is None, stored
