"""The bot's per-task bounds on a runner (agents/engine/task_policy.py): for each bound the stricter of the bot's
(TaskPolicy, sent with the task) and the runner's own settings; a bound an older bot does not send leaves the
runner's. No Temporal: the rule is plain settings in, settings out."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import LEAF_BY_KEY, Settings
from agents.engine.payloads import TaskPolicy
from agents.engine.task_policy import SMALLER_IS_STRICTER, bound_settings, policy_of
from agents.sandbox.egress_rules import PACKAGES_PRESET
from agents.tools.mcp_tasks import TaskMcp
from tests.temporal_dev import runner_settings


def settings(tmp_path: Path, **environment: str) -> Settings:
    """A machine's settings from its environment (`environment`, keys as in `.env`)."""
    return runner_settings(
        {
            "WORKSPACE_PATH": str(tmp_path / "workspaces"),
            "DATABASE_PATH": str(tmp_path / "data" / "agentlab.db"),
            "ANTHROPIC_API_KEY": "sk-test",
            **environment,
        }
    )


def on_runner(tmp_path: Path, bot: dict[str, str], runner: dict[str, str]) -> Settings:
    """The runner's settings for a task of the bot: the bot's bounds sent as the bot sends them."""
    return bound_settings(settings(tmp_path, **runner), policy_of(settings(tmp_path, **bot)))


def test_the_bots_step_limit_and_network_off_bind_a_runner_left_at_its_defaults(tmp_path: Path) -> None:
    """The defect: a runner at its defaults (60 steps, network `ask`) ran the task of a bot set to 2 steps and
    network `off` with its own."""
    s = on_runner(tmp_path, {"WORKER_MAX_STEPS": "2", "SANDBOX_NETWORK": "off"}, {})
    assert s.workers.worker_max_steps == 2
    assert s.network.sandbox_network == "off"


@pytest.mark.parametrize(
    ("bot", "runner", "bound"),
    [
        ("off", "on", "off"),
        ("ask", "on", "ask"),
        ("on", "ask", "ask"),
        ("on", "off", "off"),
        ("on", "on", "on"),
    ],
)
def test_the_network_mode_is_the_stricter_of_off_ask_on(tmp_path: Path, bot: str, runner: str, bound: str) -> None:
    s = on_runner(tmp_path, {"SANDBOX_NETWORK": bot}, {"SANDBOX_NETWORK": runner})
    assert s.network.sandbox_network == bound


def test_each_limit_is_the_smaller_and_the_runners_tighter_one_stays(tmp_path: Path) -> None:
    bot = {
        "WORKER_MAX_STEPS": "5",
        "WORKER_MAX_TOKENS": "50000",
        "WORKER_MAX_SECONDS": "60",
        "ASK_MAX_PER_TASK": "1",
        "SANDBOX_MAX_MEMORY_MB": "1024",
        "SANDBOX_MAX_PROCESSES": "64",
        "MAX_COMMIT_FILE_BYTES": "1000",
        "SANDBOX_NETWORK_ANSWER_SECONDS": "30",
    }
    runner = {"WORKER_MAX_STEPS": "3", "MAX_COMMIT_TASK_BYTES": "5000", "SANDBOX_MAX_PROCESSES": "32"}
    s = on_runner(tmp_path, bot, runner)
    assert s.workers.worker_max_steps == 3, "the runner's own is tighter"
    assert (s.workers.worker_max_tokens, s.workers.worker_max_seconds) == (50_000, 60.0)
    assert s.tasks.ask_max_per_task == 1
    assert (s.sandboxing.sandbox_max_memory_mb, s.sandboxing.sandbox_max_processes) == (1024, 32)
    assert (s.commits.max_commit_file_bytes, s.commits.max_commit_task_bytes) == (1000, 5000)
    assert s.network.sandbox_network_answer_seconds == 30.0


def test_the_disk_budget_the_bot_names_binds_a_runner_left_at_its_default(tmp_path: Path) -> None:
    assert on_runner(tmp_path, {"SANDBOX_MAX_DISK_MB": "64"}, {}).sandboxing.sandbox_max_disk_mb == 64
    assert (
        on_runner(tmp_path, {"SANDBOX_MAX_DISK_MB": "64"}, {"SANDBOX_MAX_DISK_MB": "32"}).sandboxing.sandbox_max_disk_mb
        == 32
    )
    assert on_runner(tmp_path, {}, {"SANDBOX_MAX_DISK_MB": "32"}).sandboxing.sandbox_max_disk_mb == 32, (
        "the bot's default is its own machine's: the runner's stays"
    )


def test_a_sandbox_the_bot_keeps_is_kept_on_a_runner_set_to_off(tmp_path: Path) -> None:
    assert on_runner(tmp_path, {}, {"SANDBOX": "off"}).sandboxing.sandbox == "bwrap"
    assert on_runner(tmp_path, {"SANDBOX": "off"}, {}).sandboxing.sandbox == "bwrap"


def test_the_domains_are_those_both_allow_and_none_shared_is_network_off(tmp_path: Path) -> None:
    listed = {"SANDBOX_NETWORK": "on", "SANDBOX_NETWORK_DOMAINS": "pypi.org,github.com"}
    s = on_runner(tmp_path, listed, {})
    assert s.network.sandbox_network_domains == ("pypi.org", "github.com"), "a runner without a list: the bot's"
    s = on_runner(tmp_path, {"SANDBOX_NETWORK": "on"}, {"SANDBOX_NETWORK": "on", "SANDBOX_NETWORK_DOMAINS": "x.org"})
    assert s.network.sandbox_network_domains == ("x.org",), "a bot without a list: the runner's"
    s = on_runner(
        tmp_path,
        listed,
        {"SANDBOX_NETWORK": "on", "SANDBOX_NETWORK_DOMAINS": "files.pythonhosted.org,github.com,api.github.com"},
    )
    assert set(s.network.sandbox_network_domains) == {"github.com", "api.github.com"}, "a sub-domain both allow"
    assert s.network.sandbox_network == "on"
    s = on_runner(
        tmp_path,
        {"SANDBOX_NETWORK": "on", "SANDBOX_NETWORK_DOMAINS": "packages"},
        {"SANDBOX_NETWORK": "on", "SANDBOX_NETWORK_DOMAINS": "pypi.org"},
    )
    assert s.network.sandbox_network_domains == ("pypi.org",) and "pypi.org" in PACKAGES_PRESET, "a preset spelt out"
    s = on_runner(tmp_path, listed, {"SANDBOX_NETWORK": "on", "SANDBOX_NETWORK_DOMAINS": "example.com"})
    assert s.network.sandbox_network == "off", "no domain both allow: no network at all (an empty list is any)"


def test_the_private_ranges_are_those_both_open(tmp_path: Path) -> None:
    runner = {"SANDBOX_NETWORK_PRIVATE": "10.0.0.0/8,192.168.1.20"}
    assert on_runner(tmp_path, {}, runner).network.sandbox_network_private == (), "the bot opens none"
    s = on_runner(tmp_path, {"SANDBOX_NETWORK_PRIVATE": "10.8.0.0/16,172.16.0.0/12"}, runner)
    assert s.network.sandbox_network_private == ("10.8.0.0/16",)


def test_an_older_bots_payload_leaves_the_runners_own_settings(tmp_path: Path) -> None:
    own = settings(tmp_path, WORKER_MAX_STEPS="7", SANDBOX_NETWORK="on", SANDBOX_NETWORK_DOMAINS="x.org")
    assert bound_settings(own, None) is own
    s = bound_settings(own, TaskPolicy())
    assert (s.workers.worker_max_steps, s.network.sandbox_network, s.network.sandbox_network_domains) == (
        7,
        "on",
        ("x.org",),
    )


def test_every_bound_is_a_field_of_the_policy_and_a_setting_and_the_policy_travels_as_json(tmp_path: Path) -> None:
    fields = {f.name for f in dataclasses.fields(TaskPolicy)}
    assert set(SMALLER_IS_STRICTER) <= fields
    assert all(key in LEAF_BY_KEY for key in SMALLER_IS_STRICTER)
    policy = policy_of(settings(tmp_path, WORKER_MAX_STEPS="2"))
    assert TaskPolicy(**json.loads(json.dumps(dataclasses.asdict(policy)))) == policy


def test_the_bots_mcp_approve_gates_and_offline_servers_bind_the_runners_server_of_that_name(tmp_path: Path) -> None:
    def config(name: str, servers: dict[str, object]) -> str:
        path = tmp_path / name
        path.write_text(json.dumps({"mcpServers": servers}))
        return str(path)

    bot = config("bot.json", {"notes": {"command": "notes-mcp", "approve": ["delete_note"]}, "web": {"command": "w"}})
    runner = config(
        "runner.json",
        {
            "notes": {"command": "notes-mcp", "approve": ["rename_note"], "network": True},
            "web": {"command": "w", "network": True},
            "other": {"command": "o", "network": True},
        },
    )
    own = settings(tmp_path, MCP_CONFIG=runner)
    mcp = TaskMcp.from_settings(
        bound_settings(own, policy := policy_of(settings(tmp_path, MCP_CONFIG=bot))), SecretsFilter(), None
    )
    mcp.bind(policy.mcp_approve, policy.mcp_offline)
    by_name = {c.name: c for c in mcp.servers}
    assert by_name["notes"].needs_approval("delete_note") and by_name["notes"].needs_approval("rename_note")
    assert not by_name["notes"].needs_approval("read_note")
    assert (by_name["notes"].network, by_name["web"].network) == (False, False), "the bot runs them offline"
    assert by_name["other"].network and not by_name["other"].approve, "a server the bot has not: the runner's"
