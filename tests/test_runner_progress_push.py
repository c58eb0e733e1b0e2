"""A runner's progress push (TASK_ENGINE=temporal): while a task runs, the runner pushes each new commit of its
branch, polled every few seconds; it asks git (a process each time) only when the branch's ref file changed, and
still asks git wherever the ref is not a plain loose file (packed here)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, cast

import pytest

from agents.core.models import Task, TaskStatus, WorkerKind
from agents.core.secrets_filter import SecretsFilter
from agents.store.database import Store
from tests.conftest import CALC_BUGGY, git, make_repo
from tests.temporal_dev import runner_settings

pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
from agents.engine.runner_node import RunnerNode  # noqa: E402

BRANCH = "agentlab/task-1-fix-add"


def git_logged(folder: Path) -> Path:
    """A `git` first on PATH that appends its arguments to `folder`/git.log, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    folder.mkdir()
    script = folder / "git"
    script.write_text(f'#!/bin/sh\necho "$*" >> {folder / "git.log"}\nexec {real} "$@"\n')
    script.chmod(0o755)
    return folder / "git.log"


def rev_parses(log: Path) -> int:
    return sum("rev-parse" in line for line in log.read_text().splitlines()) if log.exists() else 0


async def test_the_progress_push_runs_git_only_when_the_branch_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "workspaces" / "calc", CALC_BUGGY)
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", BRANCH)
    settings = runner_settings(
        {
            "WORKSPACE_PATH": str(tmp_path / "workspaces"),
            "DATABASE_PATH": str(tmp_path / "data" / "runner.db"),
            "ANTHROPIC_API_KEY": "sk-runner",
        }
    )
    store = await Store.open(settings.paths.database_path)
    try:
        task = Task(
            id=1, chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i", branch=BRANCH
        )
        await store.mirror_task(task.model_copy(update={"status": TaskStatus.IN_PROGRESS}))
        await store.update_task(1, base_commit=base)
        # no Temporal client nor model: with no remote in the clone, nothing is pushed nor signalled
        node = RunnerNode(settings, store, cast(Any, None), cast(Any, None), SecretsFilter())
        log = git_logged(tmp_path / "bin")
        monkeypatch.setenv("PATH", f"{log.parent}{os.pathsep}{os.environ['PATH']}")

        assert await node.pushes.progress(1, "wf", None) is None  # at its base commit: nothing to push
        assert rev_parses(log) == 1
        for _ in range(3):  # the branch has not moved: no git process at all
            await node.pushes.progress(1, "wf", None)
        assert rev_parses(log) == 1, log.read_text()

        (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        git(repo, "commit", "-q", "-am", "fix")  # the branch moved: git is asked again, once
        await node.pushes.progress(1, "wf", None)
        assert rev_parses(log) == 2
        assert "remote get-url origin" in log.read_text(), "a new commit: the push is tried (this clone has no remote)"
        await node.pushes.progress(1, "wf", None)
        assert rev_parses(log) == 2

        git(repo, "pack-refs", "--all")  # the ref is no longer a loose file: git is asked at every poll
        await node.pushes.progress(1, "wf", None)
        await node.pushes.progress(1, "wf", None)
        assert rev_parses(log) == 4
    finally:
        await store.close()
