"""A hostile orchestrator model floods the desk tools within one turn (forty calls in one answer), through the real
bot: a conversation's waiting and running tasks stop at MAX_WAITING_TASKS (each attempt counts), a turn creates a few
workspaces at most, and a member's turn hands the owners one request at most."""

from __future__ import annotations

import shutil
import sys

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.team import MEMBER, OWNER, team, team_turn, tool_results  # noqa: F401  (team: a fixture)

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) is not installed: scripts/install-system-deps.sh",
    ),
]

FLOOD = 40  # tool calls in ONE model response (about 40 x ~40 output tokens: well within max_output_tokens)


async def one_turn(bot: BotHarness, model: RoleScript, calls: list, chat: int, user: int) -> list[str]:
    """One turn of `user` in `chat` whose model answers with all of `calls` in a single response."""
    return tool_results(await team_turn(bot, model, [claude_says.tool_uses(calls)], chat, user))


async def test_one_turn_cannot_queue_unbounded_tasks(
    team: BotHarness, model: RoleScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted instruction makes the model call start_task (attempts=4) FLOOD times in one response, each call
    work for up to four workers (DAILY_BUDGET_USD is unset by default): five calls fill MAX_WAITING_TASKS (20), the
    rest are refused saying so."""
    monkeypatch.setattr(team.runtime.crew.starts.engine, "wake", lambda: None)  # keep them pending: no worker runs
    calls = [
        (
            "start_task",
            {"workspace": "calc", "worker": "code", "instructions": f"job {i}", "background": True, "attempts": 4},
        )
        for i in range(FLOOD)
    ]
    results = await one_turn(team, model, calls, chat=OWNER, user=OWNER)
    queued = await team.runtime.store.list_tasks(OWNER, statuses=[TaskStatus.PENDING], limit=10_000)
    assert len(queued) == 20, f"{len(queued)} queued; first result: {results[0][:150]}"
    assert sum("(MAX_WAITING_TASKS)" in r for r in results) == FLOOD - 5, results[-1]


async def test_one_turn_cannot_create_unbounded_workspaces(team: BotHarness, model: RoleScript, workspace_root) -> None:
    """create_workspace FLOOD times in one response (each a git repository, listed in the context of every later
    turn of every chat and indexed for the repo map): three are made, the rest refused."""
    before = {p.name for p in workspace_root.iterdir()}
    calls = [("create_workspace", {"name": f"flood-{i:03d}"}) for i in range(FLOOD)]
    await one_turn(team, model, calls, chat=OWNER, user=OWNER)
    made = {p.name for p in workspace_root.iterdir()} - before
    assert len(made) == 3, f"one turn created {len(made)} workspaces"


async def test_a_members_turn_cannot_flood_the_owners_with_requests(team: BotHarness, model: RoleScript) -> None:
    """A member's model calls an owners-only tool (create_workspace) FLOOD times with different names: each
    refusal could hand a request to the owners (Access.owners_only -> Notifier.ask_owners), from a member's private
    chat into each owner's private chat: the owners get the first one, and the later refusals say they were asked."""
    team.tg.send_command(OWNER, "/start")  # the owner's private chat exists
    await team.tg.await_for(lambda: team.tg.messages(OWNER))
    before = len(team.tg.messages(OWNER))
    calls = [("create_workspace", {"name": f"ask-{i:03d}"}) for i in range(FLOOD)]
    results = await one_turn(team, model, calls, chat=MEMBER, user=MEMBER)
    assert all("only an owner can" in r for r in results), results[:3]
    asked = [m for m in team.tg.messages(OWNER)[before:] if "asks" in (m.text or "")]
    assert len(asked) == 1, f"one member turn put {len(asked)} requests into the owner's private chat"
    assert all("the owners were asked already in this turn" in r for r in results[1:]), results[1]
