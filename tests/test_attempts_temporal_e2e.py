"""Attempts with TASK_ENGINE=temporal: the three attempts spread over three runners like any tasks (each runner runs
one task at a time), and the bot still shows one progress message, one summary and merges the passing attempt. calc's
tests are run by a quick runner that names them (tests/conftest.py CALC_QUICK_NAMED): the attempts are judged by
`test_add` as under pytest, whose run on a runner tests/test_temporal_e2e.py keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.core.models import AttemptState, TaskStatus
from tests.conftest import CALC_QUICK_NAMED, USER_ID, BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.attempts import Racers, start_attempts, summary_of
from tests.support.tasks import branches, message_with
from tests.support.temporal import (  # noqa: F401  (fixtures)
    Runners,
    needs_temporal,
    queue,
    remote,
    runners,
    tbot,
    workspace_root,
)

pytestmark = needs_temporal


@pytest.mark.parametrize("remote", [CALC_QUICK_NAMED], indirect=True, ids=["quick-named-tests"])
async def test_attempts_spread_over_runners_and_the_passing_one_is_merged(
    tbot: BotHarness, model: RoleScript, runners: Runners, workspace_root: Path, remote: Path
) -> None:
    runners.env["MAX_CORRECTIONS"] = "1"
    for name in ("a", "b", "c"):
        runners.serve(name)
    racers = Racers()  # every first turn waits for the other two: three runners run them at once
    model.add(
        "orchestrator",
        start_attempts("calc", "Fix the bug in calc.py so test_add passes.", 3),
        claude_says.text("Three attempts are racing."),
    )
    model.add("code", *[racers] * 8)  # 3 attempts × (first, after its tool) + a correction of the 2 that fail
    tbot.say("try three ways to fix the bug in calc.py")
    summary = await tbot.tg.await_for(lambda: summary_of(tbot), timeout=240)
    store = tbot.runtime.store
    members = await store.attempts.members(1)
    assert [t.status for t in members] == [TaskStatus.BLOCKED, TaskStatus.COMPLETED, TaskStatus.BLOCKED]
    ran_on = set()
    for task in members:
        events = [e.detail for e in await store.task_events(task.stored_id)]
        ran_on |= {d for d in events if d.startswith("running on ")}
    assert ran_on == {"running on a", "running on b", "running on c"}, ran_on
    assert "✔ Attempt 2 (#2)" in summary.text and "Pick: attempt 2 (task #2)" in summary.text, summary.text
    assert "1 fixed · 0 broken · 1 file +1 −1" in summary.text  # the runner's verdict counts came home
    texts = [m.text or "" for m in tbot.tg.messages(USER_ID)]
    assert sum("Attempts #1: 3 ways" in t for t in texts) == 1 and not [t for t in texts if "Files:" in t]
    assert sum("3 attempts" in t for t in texts) == 1, "one progress message for the group"

    tbot.tg.press_button(USER_ID, summary.message_id, "attempts:merge:1")
    await tbot.tg.await_for(lambda: message_with(tbot, "Attempt 2 (task #2) merged"), timeout=60)
    repo = workspace_root / "calc"
    assert git(repo, "show", "main:calc.py").strip().endswith("return a + b")
    left = branches(repo)
    assert len(left) == 2 and any(b.startswith("agentlab/task-2-") for b in left), left
    on_remote = git(remote, "branch", "--format=%(refname:short)").split()
    assert not [b for b in on_remote if b.startswith(("agentlab/task-1-", "agentlab/task-3-"))], on_remote
    assert (await store.attempts.get(1)).state is AttemptState.MERGED
