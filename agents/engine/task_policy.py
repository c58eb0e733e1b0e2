"""The bot's per-task bounds on a runner: what the bot sends with each task (`policy_of`), and the runner's settings
for that task with each bound the stricter of the bot's and its own (`bound_settings`).

A runner builds a task's worker, sandbox and network gate from its own `.env`, which the bot's owner never sees: a
runner left at its defaults (60 steps, network `ask`, no domain list) would loosen a bot set to 2 steps and network
`off`. So the bot's bounds travel in TaskStart (`TaskPolicy`) and bind the task on every runner, while a runner may
still hold its tasks tighter than the bot does. The rule, bound by bound:
- SANDBOX: `bwrap` wins over `off`; SANDBOX_NETWORK: the lower of off < ask < on (an unknown mode is `off`).
- SANDBOX_NETWORK_DOMAINS (presets spelt out; empty = any public address): what both allow. One side empty: the
  other's list; both lists: the names of each that the other allows (itself or a parent domain), and network `off`
  when none is left. SANDBOX_NETWORK_PRIVATE likewise: the ranges of each that lie inside one of the other's (none
  when either opens none).
- The limits (steps, tokens, seconds, corrections, timeouts, questions, processes, memory, file size, disk, /tmp,
  services, commit sizes): the smaller. SANDBOX_MAX_DISK_MB unset on the bot is its machine's default: the runner's own
  applies; unset on the runner: its default budget, or the bot's number when smaller.
- MCP_CONFIG: a server the runner has under a name the bot's config has too keeps the bot's `approve` gates besides
  its own, and runs without network where the bot's does (`TaskMcp.bind`).
A bound the payload lacks (None: an older bot) leaves the runner's own."""

from __future__ import annotations

import ipaddress
from typing import Any

from agents.core.setting_groups import IPNetwork
from agents.core.settings import LEAF_BY_KEY, Settings
from agents.engine.payloads import TaskPolicy
from agents.sandbox.egress_rules import domain_allowed, parse_domains
from agents.sandbox.task_limits import default_disk_budget
from agents.tools.mcp_config import load as load_mcp_config

NETWORK_MODES = ("off", "ask", "on")  # strictest first
SANDBOX_MODES = ("bwrap", "off")
# the bounds of which the smaller is the stricter: TaskPolicy's field, the Settings key (the same name)
SMALLER_IS_STRICTER = (
    "sandbox_network_answer_seconds",  # no answer by then = deny
    "worker_max_steps",
    "worker_max_tokens",
    "worker_max_seconds",
    "max_corrections",
    "command_timeout_seconds",
    "test_timeout_seconds",
    "ask_max_per_task",
    "sandbox_max_processes",
    "sandbox_max_memory_mb",
    "sandbox_max_file_mb",
    "sandbox_tmp_mb",
    "sandbox_max_services",
    "max_commit_file_bytes",
    "max_commit_task_bytes",
)


def policy_of(s: Settings) -> TaskPolicy:
    """The bot's bounds for a task it offers: its settings now, and its MCP_CONFIG's gates (a server its config
    drops for a problem has none to pass on; the bot runs no such server either)."""
    servers, _ = load_mcp_config(s.tools.mcp_config)
    own = {key: _value(s, key) for key in SMALLER_IS_STRICTER}
    return TaskPolicy(
        sandbox=s.sandboxing.sandbox,
        sandbox_network=s.network.sandbox_network,
        sandbox_network_domains=list(s.network.sandbox_network_domains),
        sandbox_network_private=list(s.network.sandbox_network_private),
        sandbox_max_disk_mb=s.sandboxing.sandbox_max_disk_mb,
        mcp_approve={c.name: sorted(c.approve) for c in servers if c.approve},
        mcp_offline=sorted(c.name for c in servers if not c.network),
        **own,
    )


def bound_settings(own: Settings, policy: TaskPolicy | None) -> Settings:
    """`own` (a runner's settings) for one task of the bot whose bounds are `policy`: each bound the stricter."""
    if policy is None:
        return own
    update: dict[str, Any] = {}
    if policy.sandbox is not None:
        update["sandbox"] = stricter_mode(SANDBOX_MODES, policy.sandbox, own.sandboxing.sandbox)
    network: str = own.network.sandbox_network
    if policy.sandbox_network is not None:
        network = stricter_mode(NETWORK_MODES, policy.sandbox_network, network)
    if policy.sandbox_network_domains is not None:
        domains = shared_domains(policy.sandbox_network_domains, own.network.sandbox_network_domains)
        if domains is None:
            network = "off"
        else:
            update["sandbox_network_domains"] = domains
    if policy.sandbox_network_private is not None:
        update["sandbox_network_private"] = shared_ranges(
            policy.sandbox_network_private, own.network.sandbox_network_private
        )
    update["sandbox_network"] = network
    for key in SMALLER_IS_STRICTER:
        bot = getattr(policy, key)
        if bot is not None:
            update[key] = min(bot, _value(own, key))
    if policy.sandbox_max_disk_mb is not None:
        mine = own.sandboxing.sandbox_max_disk_mb
        default_mb = default_disk_budget(own.paths.worktrees_dir) >> 20 if mine is None else mine
        if policy.sandbox_max_disk_mb < default_mb:
            update["sandbox_max_disk_mb"] = policy.sandbox_max_disk_mb
    return own.model_copy(update=update)


def stricter_mode(modes: tuple[str, ...], bot: str, own: str) -> str:
    """Of two modes the one earlier in `modes` (strictest first); one not in it is read as the strictest."""
    rank = {mode: n for n, mode in enumerate(modes)}
    return modes[min(rank.get(bot.strip().lower(), 0), rank.get(own, 0))]


def shared_domains(bot: list[str], own: tuple[str, ...]) -> tuple[str, ...] | None:
    """The domains both lists allow (a name with its sub-domains; an empty list allows any public address): () for
    any, None for none. A list that cannot be read allows none."""
    try:
        theirs, mine = parse_domains(bot), parse_domains(own)
    except ValueError:
        return None
    if not theirs or not mine:
        return theirs or mine
    both = [d for d in theirs if domain_allowed(d, mine)] + [d for d in mine if domain_allowed(d, theirs)]
    return tuple(dict.fromkeys(both)) or None


def shared_ranges(bot: list[str], own: tuple[str, ...]) -> tuple[str, ...]:
    """The private ranges both open: each range of one that lies inside a range of the other (two ranges either nest
    or do not meet). A range that cannot be read opens nothing."""
    theirs, mine = _networks(bot), _networks(own)
    both = [a for a in theirs if _inside(a, mine)] + [a for a in mine if _inside(a, theirs)]
    return tuple(dict.fromkeys(str(n) for n in both))


def _networks(items: list[str] | tuple[str, ...]) -> list[IPNetwork]:
    found: list[IPNetwork] = []
    for item in items:
        try:
            found.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            continue
    return found


def _inside(network: IPNetwork, others: list[IPNetwork]) -> bool:
    return any(
        network.version == other.version and network.network_address in other and network.broadcast_address in other
        for other in others
    )


def _value(s: Settings, key: str) -> Any:
    """A setting by its flat key (`worker_max_steps`), read from its group."""
    return getattr(getattr(s, LEAF_BY_KEY[key].group), key)
