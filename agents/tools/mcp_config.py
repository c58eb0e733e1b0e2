"""The owner's MCP servers (MCP_CONFIG): Claude Code's `.mcp.json` shape plus agentlab's own keys.

    {"mcpServers": {
        "notes": {"command": "python3", "args": ["/opt/notes/server.py"], "env": {"NOTES": "/opt/notes/db"},
                  "roles": ["code", "frontend"], "approve": ["delete_note"], "network": false},
        "docs":  {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ..."}}}}

`roles`: the worker kinds that get the server (default every kind but research); `approve`: tool names (or "*")
that wait for an owner's Allow before each call; `network`: a stdio server's own network (default false: it lives in
the task's network namespace, reaching the task's services on localhost and nothing else). A stdio server runs in the
task's sandbox (`command`, `args`, `env`); a `url` server (streamable HTTP) is reached by the bot itself.

The file is read only from the owner's settings (never from a repository). A broken file or entry is one sentence
(`ConfigProblem`) for the log and `agentlab doctor`; the good entries still load. An entry with a key not named above
is broken too: a misspelt `approve` (`aprove`) or `roles` (`role`) read as absent would load the server with no gate,
or for every worker kind.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agents.core.models import WorkerKind

DEFAULT_ROLES = frozenset(k for k in WorkerKind if k is not WorkerKind.RESEARCH)
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
TOOL_NAME_MAX = 64  # Anthropic's limit on a tool's name


@dataclass(frozen=True)
class McpServerConfig:
    """One server: stdio (`command`) or streamable HTTP (`url`), with the roles, approvals and network it gets."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    roles: frozenset[WorkerKind] = DEFAULT_ROLES
    approve: frozenset[str] = frozenset()
    network: bool = False
    read_paths: tuple[Path, ...] = ()  # besides SANDBOX_READ_PATHS: what the bot adds (its own tools' folder)
    address_space: int | None = None  # a per-process address-space limit of its own (Chromium reserves ~1 TB)

    @property
    def stdio(self) -> bool:
        return self.command is not None

    def needs_approval(self, tool: str) -> bool:
        """Whether `approve` names the server's `tool`: as the server names it or as the chat shows it
        (`mcp__<server>__<tool>`), in any case; `"*"` names every tool."""
        return "*" in self.approve or any(_names(entry, self.name, tool) for entry in self.approve)

    def unmatched_approvals(self, tools: list[str]) -> list[str]:
        """The `approve` entries that name none of `tools` (the server's listing): a typo, or a tool renamed since.
        Such a server's every tool is then asked (`ServerTools`): an owner who meant to gate one is never
        left with none gated."""
        return sorted(e for e in self.approve if e != "*" and not any(_names(e, self.name, t) for t in tools))

    def argv(self) -> list[str]:
        return [self.command or "", *self.args]

    def secret_values(self) -> list[str]:
        """What of its `env` and `headers` the output filter must know (added at start-up, so that a server that
        prints its own token shows it masked): every header value and the credential after its scheme word
        (`Bearer …`), and every env value but a path, which is the folder a server is told of, not a secret."""
        found = [v for v in self.headers.values() if v]
        found += [v.split(None, 1)[1] for v in self.headers.values() if len(v.split(None, 1)) == 2]
        found += [v for v in self.env.values() if v and not v.startswith(("/", "~", "./"))]
        return found

    def command_paths(self) -> list[Path]:
        """The command's own file (resolved on the bot's PATH), so the sandbox can run it."""
        if not self.command:
            return []
        found = shutil.which(self.command) if "/" not in self.command else self.command
        if not found:
            return []
        path = Path(found)
        return list(dict.fromkeys([path, path.resolve()]))


def _names(entry: str, server: str, tool: str) -> bool:
    wanted = entry.strip().casefold()
    return wanted in (tool.casefold(), tool_name(server, tool).casefold())


class ConfigProblem(ValueError):
    """MCP_CONFIG cannot be used (or one entry of it); the message is one sentence for the owner."""


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>` as the model sees it (characters Anthropic refuses become `_`, at most 64)."""
    return _NAME_OK.sub("_", f"mcp__{server}__{tool}")[:TOOL_NAME_MAX]


def load(path: Path | None) -> tuple[list[McpServerConfig], list[str]]:
    """The servers of the file at `path` (none without one) and one sentence per problem found."""
    if path is None:
        return [], []
    try:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return [], [f"MCP_CONFIG {path} cannot be read: {err}"]
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return [], [f'MCP_CONFIG {path} has no "mcpServers" object']
    found, problems = [], []
    for name, entry in servers.items():
        try:
            found.append(parse_entry(str(name), entry))
        except ConfigProblem as err:
            problems.append(f"MCP_CONFIG server {name!r}: {err}")
    return found, problems


# The keys an entry may hold: the `.mcp.json` shape's and agentlab's own. Any other drops the entry (said at start):
# a misspelt gate must never leave a server loaded as if it had none.
ENTRY_KEYS = frozenset({"command", "args", "env", "url", "headers", "type", "roles", "approve", "network"})


def parse_entry(name: str, entry: object) -> McpServerConfig:
    """One `mcpServers` entry, checked; raises ConfigProblem naming what is wrong."""
    if not isinstance(entry, dict):
        raise ConfigProblem("an entry must be an object")
    if not name or _NAME_OK.search(name) or "__" in name:
        raise ConfigProblem("a server's name may hold letters, digits, '-' and single '_' only")
    if name == "browser":
        raise ConfigProblem("the name 'browser' is the frontend worker's own browser")
    if unknown := sorted(str(key) for key in entry if key not in ENTRY_KEYS):
        # a misspelt `approve` or `roles` read as absent would run the server ungated, or for every worker kind
        raise ConfigProblem(f"unknown key {', '.join(map(repr, unknown))} (known: {', '.join(sorted(ENTRY_KEYS))})")
    command, url = entry.get("command"), entry.get("url")
    if bool(command) == bool(url):
        raise ConfigProblem('give either "command" (stdio) or "url" (streamable HTTP)')
    if entry.get("type") not in (None, "stdio", "http", "streamable-http"):
        raise ConfigProblem(f"transport {entry.get('type')!r} is not supported (stdio or http)")
    roles = entry.get("roles")
    try:
        kinds = DEFAULT_ROLES if roles is None else frozenset(WorkerKind(str(r)) for r in _strings(roles, "roles"))
    except ValueError:
        raise ConfigProblem(f"roles must be among {', '.join(k.value for k in WorkerKind)}") from None
    approve = entry.get("approve", [])
    approve = ["*"] if approve == "*" else _strings(approve, "approve")
    network = entry.get("network", False)
    if not isinstance(network, bool):
        raise ConfigProblem('"network" must be true or false')
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise ConfigProblem('"url" must be an http(s) URL')
    if command is not None and not isinstance(command, str):
        raise ConfigProblem('"command" must be a string')
    return McpServerConfig(
        name=name,
        command=command,
        args=tuple(_strings(entry.get("args", []), "args")),
        env=_string_map(entry.get("env", {}), "env"),
        url=url,
        headers=_string_map(entry.get("headers", {}), "headers"),
        roles=kinds,
        approve=frozenset(approve),
        network=network,
    )


def _strings(value: object, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigProblem(f'"{key}" must be a list of strings')
    return value


def _string_map(value: object, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigProblem(f'"{key}" must be an object of strings')
    return {str(k): v for k, v in value.items()}
