"""The groups `Settings` is made of: one model per part of the bot (telegram, anthropic, workers, sandboxing, …).

Each field is read from the environment key of its name, upper-cased (`VoiceSettings.whisper_model` from
WHISPER_MODEL), so the keys stay flat while the code reads `settings.voice.whisper_model`. `.env.example` documents
every key."""

from __future__ import annotations

import ipaddress
import re
from datetime import tzinfo
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, AliasChoices, BaseModel, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import NoDecode

# an API's root URL, kept without a trailing slash: paths are joined onto it with one
ApiRoot = Annotated[str, AfterValidator(lambda url: url.rstrip("/"))]


class SettingsGroup(BaseModel):
    """What every group shares: a key left empty is unset."""

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_default(cls, value: object, info: ValidationInfo) -> object:
        """A key left empty in .env (`KEY=`, as `.env.example` ships most of them) means unset: its default, None for
        an optional path or file. Without this an empty path became `Path('.')`, the current folder, and a feature
        looked for its parts there. A required key left empty stays empty and is refused by its own check."""
        if not (isinstance(value, str) and not value.strip()):
            return value
        field = cls.model_fields[info.field_name] if info.field_name else None
        if field is None or field.is_required():
            return value
        return field.get_default(call_default_factory=True)


class TelegramSettings(SettingsGroup):
    """The bot's Telegram account, and how updates reach it: long polling, or a webhook when WEBHOOK_URL is set."""

    telegram_bot_token: SecretStr
    telegram_api_base_url: ApiRoot = "https://api.telegram.org"
    webhook_url: str | None = None  # public https base URL; Telegram posts to <webhook_url>/<webhook_path>
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(8443, ge=1, le=65535)
    webhook_path: str = "telegram"
    webhook_secret_token: SecretStr | None = Field(None, validate_default=True)

    @field_validator("telegram_bot_token", mode="before")
    @classmethod
    def _required_given(cls, value: object) -> object:
        return _refuse_empty(value)

    @field_validator("webhook_url", mode="before")
    @classmethod
    def _webhook_url_is_https(cls, value: object) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, str):
            value = value.strip().rstrip("/")
            if not value.startswith("https://") or len(value) <= len("https://"):
                raise ValueError(
                    "must be the public https:// base URL Telegram posts updates to (empty = long polling)"
                )
        return value

    @field_validator("webhook_path")
    @classmethod
    def _webhook_path_is_url_safe(cls, value: str) -> str:
        value = value.strip().strip("/")
        if not _WEBHOOK_PATH.fullmatch(value):
            raise ValueError("must be a URL path such as telegram (letters, digits, - _ . ~ /)")
        return value

    @field_validator("webhook_secret_token")
    @classmethod
    def _secret_required_for_webhook(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is None:
            if info.data.get("webhook_url"):
                raise ValueError("required when WEBHOOK_URL is set (1-256 characters: A-Z a-z 0-9 _ -)")
            return None
        if not _WEBHOOK_SECRET.fullmatch(value.get_secret_value()):
            raise ValueError("must be 1-256 characters of A-Z a-z 0-9 _ - (Telegram's rule)")
        return value


class UserSettings(SettingsGroup):
    """Who may talk to the bot, and which of them are owners."""

    allowed_user_ids: Annotated[frozenset[int], NoDecode]
    # OWNER_USER_IDS: the allowed users who may merge, discard, allow network, create workspaces and work on `self`;
    # empty or unset = every allowed user (a one-person set-up is unchanged); the others are members
    owner_user_ids: Annotated[frozenset[int], NoDecode] = frozenset()

    @field_validator("allowed_user_ids", "owner_user_ids", mode="before")
    @classmethod
    def _split_ids(cls, value: object) -> object:
        if isinstance(value, str):
            parts = [p.strip() for p in value.replace(";", ",").split(",")]
            try:
                return frozenset(int(p) for p in parts if p)
            except ValueError:
                raise ValueError("must be comma-separated Telegram user ids (numbers)") from None
        if isinstance(value, int):
            return frozenset({value})
        return value

    @property
    def owners(self) -> frozenset[int]:
        """Who may do what only owners may: OWNER_USER_IDS, or every allowed user when it is empty; an owner is an
        allowed user who may also do more, so a user taken out of ALLOWED_USER_IDS is no owner, wherever else named."""
        return (self.owner_user_ids or self.allowed_user_ids) & self.allowed_user_ids

    def is_owner(self, user_id: int | None) -> bool:
        """None is the bot itself acting (a restart, a script): only real members are ever refused."""
        return user_id is None or user_id in self.owners


class AnthropicSettings(SettingsGroup):
    """The Anthropic account: the key, the endpoint, the SDK's retries, what tokens cost and the daily budget."""

    anthropic_api_key: SecretStr
    anthropic_base_url: str | None = None
    anthropic_max_retries: int = Field(2, ge=0, le=10)
    anthropic_timeout_seconds: float = Field(120.0, gt=0)
    # what tokens cost and the day's budget: never negative (a negative price would make the day's cost shrink with
    # every call, and the budget would never be reached), never NaN or infinite
    price_input_per_mtok: float = Field(3.0, ge=0, allow_inf_nan=False)
    price_output_per_mtok: float = Field(15.0, ge=0, allow_inf_nan=False)
    price_cache_write_per_mtok: float = Field(3.75, ge=0, allow_inf_nan=False)
    price_cache_read_per_mtok: float = Field(0.30, ge=0, allow_inf_nan=False)
    daily_budget_usd: float | None = Field(None, ge=0, allow_inf_nan=False)

    @field_validator("anthropic_api_key", mode="before")
    @classmethod
    def _required_given(cls, value: object) -> object:
        return _refuse_empty(value)


class PathSettings(SettingsGroup):
    """Where things live: the workspaces, the bot's own checkout, the database and the task worktrees."""

    workspace_path: Path
    bot_repository: Path | None = None
    database_path: Path = Path("data/agentlab.db")
    worktrees_path: Path | None = None  # default: a folder next to the database's, e.g. data-worktrees/ beside data/

    @field_validator("workspace_path", mode="before")
    @classmethod
    def _required_given(cls, value: object) -> object:
        return _refuse_empty(value)

    @property
    def data_dir(self) -> Path:
        """The database's folder: the bot's own files (never bound into a task's sandbox)."""
        return Path(self.database_path).expanduser().resolve().parent

    @property
    def worktrees_dir(self) -> Path:
        """Where task worktrees are checked out: never inside the database's folder (nor the workspaces)."""
        if self.worktrees_path is not None:
            return Path(self.worktrees_path).expanduser().resolve()
        data = self.data_dir
        return data.parent / f"{data.name}-worktrees"

    @property
    def private_dirs(self) -> tuple[Path, Path]:
        """The data folder and the task worktrees: every chat's files, inside the bot's checkout (`self`) by default;
        no agent's file tool reads them there."""
        return (self.data_dir, self.worktrees_dir)

    def private_dirs_hidden_from(self, root: Path) -> tuple[Path, ...]:
        """The private folders a task working in `root` is kept out of (its tools and its sandbox): both, but the
        worktrees folder when `root` is a task's own worktree in it (hiding that folder would hide the root; the other
        tasks' worktrees beside it are out of its reach anyway)."""
        data, worktrees = self.private_dirs
        return (data,) if Path(root).resolve().is_relative_to(worktrees) else (data, worktrees)

    @property
    def voice_data_dir(self) -> Path:
        """The data folder's `voice/`: converted models (faster-whisper) and the timing of the last notes."""
        return self.data_dir / "voice"


class OrchestratorSettings(SettingsGroup):
    """The orchestrator's model and its turn: thinking, rounds, how much history it reads, how long it waits."""

    orchestrator_model: str = "claude-sonnet-4-6"
    orchestrator_thinking: Literal["adaptive", "enabled", "off"] = "off"
    orchestrator_effort: Literal["", "low", "medium", "high", "xhigh", "max"] = ""
    orchestrator_max_tool_rounds: int = Field(12, ge=1)
    max_output_tokens: int = Field(4096, ge=256)
    history_token_budget: int = Field(24_000, ge=1_000)
    max_message_chars: int = Field(20_000, ge=1_000)
    foreground_wait_seconds: float = Field(90.0, gt=0)  # a foreground task is waited for at most this long
    shown_turn_chars: int = Field(16_000, ge=1_000)  # a proposal or task summary as a turn of the chat history


class WorkerSettings(SettingsGroup):
    """A worker's model and its limits: steps, time, tokens, thinking, its context, its commands, its corrections."""

    worker_model: str = "claude-sonnet-4-6"
    worker_max_steps: int = Field(60, ge=1)
    worker_max_output_tokens: int = Field(32_000, ge=1024, le=128_000)  # worker calls stream: past 21k is fine
    worker_max_seconds: float = Field(1800.0, gt=0)
    worker_max_tokens: int = Field(3_000_000, ge=1_000)
    # thinking and effort (agents/llm/reasoning.py): adaptive where the model supports it, else a fixed budget
    worker_thinking: Literal["adaptive", "enabled", "off"] = "adaptive"
    worker_thinking_budget: int = Field(8_000, ge=1024)  # tokens, for models without adaptive thinking
    worker_effort: Literal["", "low", "medium", "high", "xhigh", "max"] = ""  # "": the model's default
    worker_warn_steps: int = Field(5, ge=0)  # the worker is told this many steps before its step limit (0: never)
    worker_context_tokens: int = Field(
        200_000, ge=10_000
    )  # the worker model's window; older results are stubbed near it
    tool_result_max_chars: int = Field(60_000, ge=2_000)  # a longer tool result keeps its head and tail
    max_corrections: int = Field(3, ge=0)
    command_timeout_seconds: float = Field(300.0, gt=0)


class TaskSettings(SettingsGroup):
    """How tasks run: how many at once, the test run's time, progress messages, questions to the user."""

    max_concurrent_tasks: int = Field(3, ge=1)
    max_waiting_tasks: int = Field(20, ge=1)  # per conversation: its tasks waiting or running (attempts count each)
    test_timeout_seconds: float = Field(900.0, gt=0)
    progress_interval_seconds: float = Field(5.0, gt=0)  # a new step shows in the progress message within this
    progress_refresh_seconds: float = Field(15.0, gt=0)  # the elapsed time is refreshed at least this often
    ask_timeout_seconds: float = Field(600.0, gt=0)  # ask_user: no answer by then and the worker decides itself
    ask_max_per_task: int = Field(5, ge=1)  # ask_user: questions one task may ask in all its runs


class CommitSettings(SettingsGroup):
    """What a task leaves behind in the owner's repository: its commits' author, and how big they may be."""

    git_author_name: str = "agentlab"
    git_author_email: str = "agentlab@localhost"
    max_commit_file_bytes: int = Field(5 * 1024 * 1024, ge=1)
    max_commit_task_bytes: int = Field(20 * 1024 * 1024, ge=1)


class BriefingSettings(SettingsGroup):
    """What a turn is told besides the chat: the repository map, the repository's instructions, standing notes
    (agents/work/task_briefing.py, repo_rules.py, standing.py)."""

    repo_map_tokens: int = Field(2000, ge=0)
    repo_map_wait_seconds: float = Field(1.0, ge=0.0)  # a first turn's wait on a cold index + drawing its map
    repo_instructions_max_chars: int = Field(12_000, ge=1_000)  # AGENTS.md & co. in a worker's first turn, at most
    notes_max_per_user: int = Field(20, ge=1)  # standing notes a user may keep
    note_max_chars: int = Field(500, ge=20)  # the length of one standing note


class VoiceSettings(SettingsGroup):
    """Voice notes: the speech engine and model (agents/inputs/voice.py)."""

    voice_engine: Literal["openai-whisper", "faster-whisper"] = "openai-whisper"
    whisper_model: str = "base"
    whisper_language: str | None = None
    voice_max_seconds: float = Field(600.0, gt=0)
    # the speech model lives in a process of its own (agents/inputs/speech_process.py), started by the first voice
    # note (or at start with VOICE_PRELOAD) and ended after VOICE_IDLE_MINUTES without notes (0: kept until the bot
    # stops), so the bot idles without torch
    voice_preload: bool = False
    voice_idle_minutes: float = Field(15.0, ge=0)


class AttachmentSettings(SettingsGroup):
    """Photos and files sent to the bot (agents/inputs/attachments.py)."""

    attachment_image_max_edge: int = Field(1568, ge=200, le=8000)
    attachment_pdf_max_bytes: int = Field(10_000_000, ge=10_000, le=20_000_000)
    attachment_text_max_bytes: int = Field(200_000, ge=1_000, le=2_000_000)


class SandboxSettings(SettingsGroup):
    """How a task's processes are confined and what they may use; see agents/sandbox/bwrap.py."""

    sandbox: Literal["bwrap", "off"] = "bwrap"
    sandbox_max_processes: int = Field(512, ge=16)
    sandbox_max_file_mb: int = Field(1024, ge=1)
    sandbox_max_memory_mb: int = Field(8192, ge=256)  # per task (its cgroup, swap off) and address space per process
    # how much a task's worktree (and its services' logs) may grow; unset: a quarter of the free space where the
    # worktrees are, at most 10 GB (agents/sandbox/task_limits.default_disk_budget)
    sandbox_max_disk_mb: int | None = Field(None, ge=16)
    # auto: a task's worktree is a file system of its own (a sparse ext4 image) where the machine allows one, so a
    # burst of writes meets a hard ceiling; off: a plain folder, its budget polled (agents/sandbox/task_disk.py)
    sandbox_disk_fs: Literal["auto", "off"] = "auto"
    sandbox_tmp_mb: int = Field(1024, ge=16)  # the private /tmp and home (memory-backed)
    sandbox_max_services: int = Field(4, ge=0)  # run_command(background=true) services running at once per task
    # extra read-only folders (e.g. /opt/node), absolute; Settings resolves each (links, `..`) and refuses one that
    # holds or lies in the bot's own places (Settings._read_paths_keep_out_of_the_bots_places)
    sandbox_read_paths: Annotated[tuple[Path, ...], NoDecode] = ()

    @field_validator("sandbox", "sandbox_disk_fs", mode="before")
    @classmethod
    def _lower_mode(cls, value: object) -> object:
        return _lowered(value)

    @field_validator("sandbox_read_paths", mode="before")
    @classmethod
    def _split_paths(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(Path(p.strip()).expanduser() for p in value.replace(";", ",").split(",") if p.strip())
        return value

    @field_validator("sandbox_read_paths")
    @classmethod
    def _absolute_paths(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        """Each path absolute (after `~`): bwrap starts in the task's worktree, so a relative one would be looked up
        there, and a link the worker left in its worktree would choose what the next command's sandbox shows."""
        paths = tuple(path.expanduser() for path in value)
        for path in paths:
            if not path.is_absolute():
                raise ValueError(
                    f"{str(path)!r} is not an absolute path: a task's sandbox starts in its worktree, where a "
                    "relative path would name whatever the worker put there (write it from /, e.g. /opt/node)"
                )
        return paths


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# SANDBOX_NETWORK_PRIVATE is for a LAN's machines (a package mirror): each range it opens lies wholly inside one of
# these blocks, the only private ones (private, shared, IPv6 unique-local and the deprecated site-local); the egress
# rules and proxy (agents/sandbox/egress_rules.py, egress_proxy.py) read them from here
PRIVATE_BLOCKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7", "fec0::/10")
)
# never reached, whatever SANDBOX_NETWORK_PRIVATE opens: the bot's machine itself (every service it binds to 0.0.0.0
# answers on all of 127.0.0.0/8), the cloud's metadata service with its credentials, and no single host
NEVER_OPENED: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(n), what)
    for n, what in (
        ("127.0.0.0/8", "loopback (the bot's own machine)"),
        ("::1/128", "loopback (the bot's own machine)"),
        ("169.254.0.0/16", "link-local addresses (cloud metadata at 169.254.169.254)"),
        ("fe80::/10", "link-local addresses"),
        ("224.0.0.0/4", "multicast addresses"),
        ("ff00::/8", "multicast addresses"),
        ("0.0.0.0/8", "the unspecified address"),
        ("::/128", "the unspecified address"),
    )
)


def never_opened(network: IPNetwork) -> str | None:
    """What of NEVER_OPENED `network` (or a single address's /32, /128) takes in, None where it takes in none."""
    return next((what for n, what in NEVER_OPENED if n.version == network.version and n.overlaps(network)), None)


def private_range(item: str) -> IPNetwork:
    """A SANDBOX_NETWORK_PRIVATE item as its network; a ValueError, one sentence naming it, where it is no address or
    range, takes in something NEVER_OPENED, or reaches outside PRIVATE_BLOCKS."""
    try:
        network = ipaddress.ip_network(item, strict=False)
    except ValueError:
        raise ValueError(f"{item!r} is not an IP address or range (such as 192.168.1.20 or 10.8.0.0/16)") from None
    blocks = ", ".join(str(b) for b in PRIVATE_BLOCKS)
    what = never_opened(network)
    if what is not None:
        raise ValueError(f"{item!r} takes in {what}, which no range may open: a range must lie inside one of {blocks}")
    if not any(network.network_address in b and network.broadcast_address in b for b in PRIVATE_BLOCKS):
        raise ValueError(f"{item!r} is not wholly inside a private block: a range must lie inside one of {blocks}")
    return network


class NetworkSettings(SettingsGroup):
    """A task's network: asked for, on or off, and what an allowed network reaches (agents/sandbox/egress_rules.py)."""

    sandbox_network: Literal["ask", "on", "off"] = "ask"
    sandbox_network_answer_seconds: float = Field(300.0, gt=0)  # no answer to a network request = deny
    # always only public addresses; with domains only those (and their sub-domains; `packages` = the package
    # registries' preset); `private`: addresses or ranges (a LAN package mirror) that are the only private ones
    # reachable, each inside PRIVATE_BLOCKS and taking in nothing NEVER_OPENED (private_range)
    sandbox_network_domains: Annotated[tuple[str, ...], NoDecode] = ()
    sandbox_network_private: Annotated[tuple[str, ...], NoDecode] = ()

    @field_validator("sandbox_network", mode="before")
    @classmethod
    def _lower_mode(cls, value: object) -> object:
        return _lowered(value)

    @field_validator("sandbox_network_domains", mode="before")
    @classmethod
    def _split_domains(cls, value: object) -> object:
        names = _comma_list(value)
        for name in names:
            if not _DOMAIN.fullmatch(name):
                raise ValueError(f"{name!r} is not a domain name (or the preset `packages`)")
        return names

    @field_validator("sandbox_network_private", mode="before")
    @classmethod
    def _split_networks(cls, value: object) -> object:
        return tuple(str(private_range(item)) for item in _comma_list(value))


class ToolSettings(SettingsGroup):
    """MCP servers and the browser: agents/tools/mcp_config.py, mcp_client.py, browser.py, screenshot.py."""

    mcp_config: Path | None = None  # the owner's .mcp.json-shaped file (never read from a repository)
    mcp_start_timeout_seconds: float = Field(30.0, gt=0)  # a server that lists no tools by then is unavailable
    mcp_call_timeout_seconds: float = Field(120.0, gt=0)  # one tool call
    browser_tools_dir: Path | None = None  # where `make setup` installs chrome-devtools-mcp (default: the bot's .tools)
    chromium_path: str | None = None


class EngineSettings(SettingsGroup):
    """Where tasks run: in the bot's process, or as Temporal workflows on `agentlab runner`s (agents/engine/)."""

    task_engine: Literal["local", "temporal"] = "local"
    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    temporal_task_queue: str = "agentlab"  # the shared queue runners claim tasks from (each also has its own)
    temporal_heartbeat_seconds: float = Field(10.0, ge=1.0)  # a runner silent this long is lost: another takes over
    temporal_claim_seconds: float = Field(600.0, ge=1.0)  # no runner takes the task within this: it is `interrupted`
    temporal_takeovers: int = Field(1, ge=0)  # how often a task lost with its runner moves to another one
    runner_name: str | None = None  # `agentlab runner`: its name in the cluster (default: host name and process id)
    runner_remote: str = "origin"  # the workspaces' shared remote: runners push task branches, the bot fetches them

    @field_validator("task_engine", mode="before")
    @classmethod
    def _lower_mode(cls, value: object) -> object:
        return _lowered(value)


class ScheduleSettings(SettingsGroup):
    """Tasks and research that start by themselves (agents/work/schedule_book.py)."""

    timezone: str | None = None  # TIMEZONE: an IANA name (Europe/Berlin) schedules are read and shown in
    schedules_max: int = Field(20, ge=1)  # SCHEDULES_MAX: live (active or paused) schedules per conversation

    @field_validator("timezone", mode="before")
    @classmethod
    def _known_zone(cls, value: object) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            ZoneInfo(str(value).strip())
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("must be an IANA time zone name such as Europe/Berlin or UTC") from None
        return str(value).strip()

    @property
    def zone(self) -> tzinfo:
        """The time zone schedules use: TIMEZONE, else the machine's own (tzlocal: /etc/localtime, TZ)."""
        if self.timezone:
            return ZoneInfo(self.timezone)
        from tzlocal import get_localzone  # APScheduler's own dependency

        return get_localzone()


class GitHubSettings(SettingsGroup):
    """GitHub: pull requests from a task, work from an issue comment (agents/github/, agents/work/pull_requests.py)."""

    github_token: SecretStr | None = None  # the bot's own: REST API and pushes; never reaches a task or a model
    github_api_url: ApiRoot = "https://api.github.com"
    github_users: Annotated[dict[str, int], NoDecode] = Field(default_factory=dict)  # login (lower case) → user id
    github_webhook_listen: str | None = None  # host:port of POST /github
    github_webhook_secret: SecretStr | None = Field(None, validate_default=True)
    github_mention: str = "@agentlab"
    github_checks_poll_seconds: float = Field(30.0, gt=0)  # first wait between polls of a PR's checks (then doubled)
    github_checks_poll_max_seconds: float = Field(600.0, gt=0)  # the longest wait between two polls
    github_checks_give_up_seconds: float = Field(6 * 3600.0, gt=0)  # polling stops after this (no result then)

    @field_validator("github_users", mode="before")
    @classmethod
    def _split_github_users(cls, value: object) -> object:
        if isinstance(value, str):
            users: dict[str, int] = {}
            for pair in value.replace(";", ",").split(","):
                if not pair.strip():
                    continue
                login, sep, user_id = pair.partition("=")
                if not sep or not login.strip() or not user_id.strip().lstrip("-").isdigit():
                    raise ValueError("must be login=telegram_user_id pairs, comma-separated (e.g. octocat=1001)")
                users[login.strip().lower()] = int(user_id)
            return users
        return value

    @field_validator("github_webhook_listen")
    @classmethod
    def _listen_is_host_port(cls, value: str | None) -> str | None:
        return None if value is None else _host_port(value)

    @field_validator("github_webhook_secret")
    @classmethod
    def _github_secret_required(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is None and info.data.get("github_webhook_listen"):
            raise ValueError("required when GITHUB_WEBHOOK_LISTEN is set (the webhook's secret on GitHub)")
        return value

    @property
    def github_web_url(self) -> str:
        """GitHub's web root for this API root: https://github.com for api.github.com, the host itself for GitHub
        Enterprise (`https://HOST/api/v3`) and for a test server."""
        api = self.github_api_url
        if api == "https://api.github.com":
            return "https://github.com"
        return api.removesuffix("/api/v3")


class ReviewSettings(SettingsGroup):
    """The review page: a Telegram Mini App served by the bot (agents/review/)."""

    review_url: str | None = None  # the public address of REVIEW_LISTEN (https://, or http:// on loopback)
    review_listen: str = "127.0.0.1:8088"  # host:port the review server binds (polling mode too)
    review_auth_max_age: float = Field(86_400.0, gt=0)  # launch data older than this shows nothing
    review_app_name: str | None = None  # the Mini App's short name (BotFather /newapp): the Review link in groups
    review_diff_page_bytes: int = Field(100_000, ge=10_000)  # the diff is shown in pages of about this size

    @field_validator("review_listen")
    @classmethod
    def _review_listen_is_host_port(cls, value: str) -> str:
        return _host_port(value)

    @field_validator("review_url")
    @classmethod
    def _review_url_is_https(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise ValueError("must be an https:// address (http:// only for 127.0.0.1 or localhost)")
        return value.strip().rstrip("/")


class StreamingSettings(SettingsGroup):
    """Streamed answers: the answer grows in the chat while Claude writes it (telegram_bot/handlers.py)."""

    stream_answers: bool = True
    stream_first_frame_seconds: float = Field(0.3, ge=0.0)  # no preview frame before this (a quick answer has none)
    stream_draft_interval_seconds: float = Field(0.4, ge=0.05)  # between sendMessageDraft frames (private chats)
    stream_edit_interval_seconds: float = Field(1.5, ge=0.2)  # between edits of the preview (drafts refused)
    stream_group_edit_interval_seconds: float = Field(3.5, ge=1.0)  # groups: Telegram allows ~20 messages a minute


class LogSettings(SettingsGroup):
    """The bot's log: its level and its format."""

    log_level: str = "INFO"
    log_format: Literal["text", "json"] = Field(  # LOG_FORMAT; AGENTLAB_LOG_FORMAT wins when both are set
        "text", validation_alias=AliasChoices("agentlab_log_format", "log_format")
    )

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower_log_format(cls, value: object) -> object:
        if isinstance(value, str):
            return value.strip().lower() or "text"
        return value


def _refuse_empty(value: object) -> object:
    """A required key left empty is named as such, with what to do."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("empty (required): run `agentlab init`, or fill it in .env")
    return value


def _lowered(value: object) -> object:
    """A mode such as SANDBOX or TASK_ENGINE, read case-blind."""
    return value.strip().lower() if isinstance(value, str) else value


def _host_port(value: str) -> str:
    """`host:port` with a port a socket can bind, stripped."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("must be host:port, e.g. 127.0.0.1:8088")
    return value.strip()


_WEBHOOK_PATH = re.compile(r"[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*")
_WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
_DOMAIN = re.compile(r"(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.?")


def _comma_list(value: object) -> tuple[str, ...]:
    """A comma-separated settings value (or a list) as a tuple of its lower-cased, stripped, non-empty items."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list | tuple) else [value]
    return tuple(str(item).strip().lower() for item in items if str(item).strip())
