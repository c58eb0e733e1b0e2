"""The judge of two ✔ attempts the tests cannot tell apart: the model reads both diffs, which are the workers' files,
so what it reads goes through the output filter as every other text sent to the model does."""

from __future__ import annotations

import json
from pathlib import Path

from agents.core.models import Task, TaskStatus, WorkerKind
from agents.core.secrets_filter import SecretsFilter
from agents.store.database import Store
from agents.work.attempt_ranking import AttemptFacts
from agents.work.attempt_summary import AttemptSummary
from agents.workspaces.folders import Workspaces
from tests.conftest import USER_ID, git, make_repo
from tests.scripted import RoleScript, say
from tests.support.settings import offline_settings

NPM_TOKEN = "npm_" + "aB3dE5gH7jK9mN2pQ4sT6vW8yZ1cF0hJ2kL4"  # a shape the filter knows
OWN_KEY = "Own-Key-Of-No-Shape-7741"  # the bot's API key: masked because the filter was given it


async def test_the_judge_reads_both_diffs_masked(tmp_path: Path, store: Store) -> None:
    """Each attempt copied the workspace's tracked `.npmrc` (a `cp` prints nothing to mask) and the bot committed the
    copy: the judge's request carried the token in both diffs, and the request's task text the bot's own key."""
    root = tmp_path / "workspaces"
    npmrc = f"//registry.npmjs.org/:_authToken={NPM_TOKEN}\n"
    repo = make_repo(root / "calc", {"calc.py": "def add(a, b):\n    return a - b\n", ".npmrc": npmrc})
    base = git(repo, "rev-parse", "HEAD").strip()
    for number, body in ((1, "a + b"), (2, "b + a")):
        git(repo, "checkout", "-q", "-b", f"agentlab/task-{number}", base)
        (repo / f"copy{number}.txt").write_text(npmrc)
        (repo / "calc.py").write_text(f"def add(a, b):\n    return {body}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"attempt {number}")
    git(repo, "checkout", "-q", "main")
    members = [
        Task(
            id=n,
            chat_id=USER_ID,
            workspace="calc",
            worker=WorkerKind.CODE,
            title="fix add",
            instructions=f"Fix add. The key is {OWN_KEY}.",
            status=TaskStatus.COMPLETED,
            branch=f"agentlab/task-{n}",
            base_commit=base,
            attempt=n,
            attempt_of=2,
        )
        for n in (1, 2)
    ]
    facts = [
        AttemptFacts(task_id=n, number=n, status=TaskStatus.COMPLETED, fixed=1, committed=True, tested=True)
        for n in (1, 2)
    ]
    settings = offline_settings(root, anthropic_api_key=OWN_KEY, database_path=tmp_path / "data" / "agentlab.db")
    model = RoleScript([say("A\nIt is shorter.")])
    secrets = SecretsFilter()
    secrets.add(settings.secret_values())
    summary = AttemptSummary(settings, store, None, Workspaces(root, None), secrets, model=model)  # type: ignore[arg-type]  # no outbox: compare sends nothing
    picked, why = await summary.compare(members, (facts[0], facts[1]), fallback=(facts[1], "by size"))
    assert picked == facts[0] and "It is shorter" in why, why
    [asked] = model.calls
    said = json.dumps(asked["messages"])
    assert "copy1.txt" in said and "copy2.txt" in said, "the judge read both diffs"
    assert NPM_TOKEN not in said and OWN_KEY not in said, said[:800]
