"""TASK_ENGINE=temporal: a task run by an `agentlab runner` gets the user's standing notes (kept in the bot's store,
sent with the task) and the repository's instructions (read from the runner's own clone at the base commit)."""

from __future__ import annotations

import pytest

from tests.conftest import git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text
from tests.support.tasks import ended, start_task
from tests.support.temporal import cheap_tests, needs_temporal, queue, remote, runners, tbot, workspace_root  # noqa: F401  (fixtures)

pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
pytestmark = needs_temporal


@cheap_tests  # about what the worker is sent, not the verdict: a test command that costs nothing
async def test_a_runners_worker_gets_the_bots_notes_and_the_repositorys_rules(
    tbot, model: RoleScript, runners, remote, tmp_path
) -> None:
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(remote), str(seed))
    (seed / "AGENTS.md").write_text("RUNNER-ROOT-RULE: keep add() pure.\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "agents")
    git(seed, "push", "-q", "origin", "HEAD")
    runners.serve("a")  # its own store and workspaces; served on the test's loop (no process boundary proved here)
    model.add(
        "orchestrator",
        claude_says.tool_use("remember", {"text": "in calc name tests after the bug", "workspace": "calc"}),
        claude_says.text("Noted."),
    )
    tbot.say("remember that in calc we name tests after the bug")
    await tbot.tg.await_for(lambda: len(model.requests["orchestrator"]) == 2)
    assert "Noted as note #1" in last_user_text(model.requests["orchestrator"][1])
    model.add("orchestrator", start_task("calc", "Look at calc.py."), claude_says.text("Started."))
    model.add("code", claude_says.text("Looked."))
    tbot.say("look at calc.py")
    await ended(tbot, 1)
    first = " ".join(b.get("text", "") for b in model.requests["code"][0]["messages"][0]["content"])
    assert "in calc name tests after the bug" in first, "the note travelled with the task"
    assert "RUNNER-ROOT-RULE" in first.split("Repository map (")[0], "read from the runner's clone"
