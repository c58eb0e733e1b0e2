"""A runner's task run takes its starter's role from the bot (TaskStart.starter_is_owner: the bot's OWNER_USER_IDS
when the task started), never from the runner's own OWNER_USER_IDS / ALLOWED_USER_IDS, which a runner's environment
usually leaves empty (it talks to no Telegram user) or holds out of date. So do the bot's daily budget and its
per-task bounds (TaskStart.policy: the stricter of the bot's and the runner's own, agents/engine/task_policy.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest

from agents.core.models import UsageRecord
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.llm.usage import cost_today
from agents.sandbox.bwrap import NetworkPolicy
from agents.store.database import Store
from tests.conftest import CALC_BUGGY, make_repo
from tests.temporal_dev import runner_settings

pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
from temporalio.client import Client  # noqa: E402

from agents.engine.payloads import TaskPolicy, TaskStart  # noqa: E402
from agents.engine.runner_node import RunnerNode  # noqa: E402

OWNER, MEMBER = 111, 222


def runner_with_calc(tmp_path: Path, **environment: str) -> Settings:
    """A runner's settings (its own environment, plus `environment`), with calc in its workspaces."""
    make_repo(tmp_path / "workspaces" / "calc", CALC_BUGGY)
    return runner_settings(
        {
            "WORKSPACE_PATH": str(tmp_path / "workspaces"),
            "DATABASE_PATH": str(tmp_path / "data" / "runner.db"),
            "ANTHROPIC_API_KEY": "sk-runner",
            **environment,
        }
    )


def task_start(starter: int, **fields: Any) -> TaskStart:
    """Task 1 of `starter` on calc, as the bot offers it (`fields`: what the bot says besides)."""
    return TaskStart(
        task_id=1,
        chat_id=starter,
        workspace="calc",
        worker="code",
        title="t",
        instructions="i",
        user_id=starter,
        **fields,
    )


@pytest.mark.parametrize(("runner_lists", "bot_says_owner"), [("", True), (str(MEMBER), False)])
async def test_a_runners_task_run_takes_the_starters_role_from_the_bot(
    tmp_path: Path, runner_lists: str, bot_says_owner: bool
) -> None:
    """Each case is a runner whose own lists say the opposite of the bot: none (an owner's task on the bot's own code
    was refused: "only an owner can read or change it"), or a member listed as owner (a member's task would reach the
    bot's own code, and its network questions would be the member's to answer)."""
    settings = runner_with_calc(tmp_path, ALLOWED_USER_IDS=runner_lists, OWNER_USER_IDS=runner_lists)
    starter = OWNER if bot_says_owner else MEMBER
    assert settings.users.is_owner(starter) is not bot_says_owner, "the runner's own lists say the opposite"
    store = await Store.open(settings.paths.database_path)
    try:
        # a client that connects at its first call, which never comes: building a task run calls nothing
        client = await Client.connect("127.0.0.1:9", lazy=True)
        node = RunnerNode(settings, store, client, cast(Any, None), SecretsFilter())
        start = task_start(starter, starter_is_owner=bot_says_owner)
        run = node.task_run(start, "wf")
        assert run.executor.is_owner(starter) is bot_says_owner, "the reach check of the bot's own code"
        assert run.executor.network.is_owner(starter) is bot_says_owner, "who answers its network questions"
        someone_else = MEMBER if starter == OWNER else OWNER
        assert not run.executor.is_owner(someone_else), "of anyone but the starter the runner knows nothing"
    finally:
        await store.close()


async def test_a_runners_task_stops_at_the_bots_daily_budget_counting_from_the_bots_spending(tmp_path: Path) -> None:
    """A runner's store holds only its own usage, and its environment usually sets no DAILY_BUDGET_USD: a task on a
    runner spent on past the bot's budget. The run counts from the bot's budget and spending as it offered the task,
    plus what the runner spent after the claim (not what it had spent before, which the bot's figure holds)."""
    settings = runner_with_calc(tmp_path)
    assert settings.anthropic.daily_budget_usd is None, "the runner's own environment sets no budget"
    store = await Store.open(settings.paths.database_path)

    async def spend(usd: float) -> None:  # input tokens at the default $3 per million
        tokens = round(usd / settings.anthropic.price_input_per_mtok * 1_000_000)
        await store.record_usage(UsageRecord(input_tokens=tokens, output_tokens=0, agent="code-worker", model="m"))

    try:
        client = await Client.connect("127.0.0.1:9", lazy=True)
        node = RunnerNode(settings, store, client, cast(Any, None), SecretsFilter())
        await spend(0.50)  # an earlier task of this runner today: the bot's $0.70 holds it already
        start = task_start(OWNER, daily_budget_usd=1.00, spent_today_usd=0.70)
        run = node.task_run(start, "wf", spent_here_before=await cost_today(store, settings))
        assert await run.executor.base.spending() is None, "$0.70 of $1.00"
        await spend(0.20)
        assert await run.executor.base.spending() is None, "$0.90 of $1.00"
        await spend(0.15)
        said = await run.executor.base.spending()
        assert said is not None and "daily budget of $1.00 is spent ($1.05 today)" in said, said
        unlimited = node.task_run(dataclasses.replace(start, daily_budget_usd=None), "wf")
        assert await unlimited.executor.base.spending() is None, "the bot sets no budget: none holds"
    finally:
        await store.close()


async def test_a_runners_task_run_is_bound_by_the_bots_limits_network_and_mcp_gates(tmp_path: Path) -> None:
    """A runner at its defaults (60 steps, network `ask`, an MCP server ungated and with network) ran the task of a
    bot set to 2 steps, network `off` and that server gated and offline with its own, looser settings. Its task run
    takes the stricter of each: the worker's limits, the network gate, the sandbox, the MCP servers' gates."""
    config = tmp_path / "runner-mcp.json"
    config.write_text('{"mcpServers": {"notes": {"command": "notes-mcp", "network": true}}}')
    settings = runner_with_calc(tmp_path, MCP_CONFIG=str(config))
    assert settings.workers.worker_max_steps == 60 and settings.network.sandbox_network == "ask"
    bot = TaskPolicy(
        sandbox_network="off", worker_max_steps=2, mcp_approve={"notes": ["delete_note"]}, mcp_offline=["notes"]
    )
    store = await Store.open(settings.paths.database_path)
    try:
        client = await Client.connect("127.0.0.1:9", lazy=True)
        node = RunnerNode(settings, store, client, cast(Any, None), SecretsFilter())
        run = node.task_run(task_start(OWNER, policy=bot), "wf")
        bound = run.executor.base.settings
        assert bound.workers.worker_max_steps == 2, "the worker's step limit"
        assert bound.network.sandbox_network == "off", "the sandbox's network"
        assert run.executor.network.policy is NetworkPolicy.OFF, "the network gate refuses without asking"
        (notes,) = run.executor.workers.mcp.servers
        assert notes.needs_approval("delete_note") and not notes.network, "the bot's gate and no network"
        assert node.settings.workers.worker_max_steps == 60, "the runner's own settings stay for its other tasks"
        older = node.task_run(task_start(OWNER), "wf")  # an older bot's payload: no policy
        assert older.executor.base.settings.workers.worker_max_steps == 60
    finally:
        await store.close()
