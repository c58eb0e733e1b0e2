"""`agentlab doctor`: is this machine ready to run the bot? One ✓ / ✗ / ! line per check, each failure with a fix.

The checks never spend money (Anthropic's `count_tokens` is free) and never import `telegram`: getMe is a plain
HTTP call. Network checks are time-boxed. The exit code is non-zero when a required check fails; `!` lines
are optional features (frontend screenshots, a whisper model still to download, folders not yet git repositories).

Why one module over 400 lines: one small function per check, in the order doctor prints them.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import socket
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TextIO

import anthropic
import httpx2

from agents.core.errors import ToolError
from agents.core.models import TaskStatus
from agents.core.settings import Settings, SettingsError, load_settings
from agents.git.command import GitError, run_git
from agents.llm.tls import client_tls
from agents.sandbox import bwrap, task_disk
from agents.sandbox.bwrap import keep_size_filter_program
from agents.sandbox.egress_rules import egress_for
from agents.sandbox.process_cap import pids_parent
from agents.sandbox.task_cgroup import support as task_cgroup_support
from agents.sandbox.task_limits import disk_budget, sandbox_limit_warnings
from agents.sandbox.user_net import available as user_net_available
from agents.sandbox.user_net import direct as direct_network
from agents.sandbox.user_net import nft_available
from agents.store.database import Store
from agents.store.migrations import LATEST_VERSION
from agents.tools import browser
from agents.tools.mcp_config import load as load_mcp_config
from agents.tools.mcp_tasks import probe as probe_mcp
from agents.tools.ripgrep import ripgrep_path
from agents.tools.screenshot import find_chromium
from agents.workspaces.folders import Workspaces

NETWORK_TIMEOUT_SECONDS = 5.0
GIT_TIMEOUT_SECONDS = 5.0
DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"

# whisper model name -> (file name in the whisper cache, approximate download size in MB); mirrors whisper._MODELS
# (importing whisper would import torch, seconds of start-up for a look-up). tests/test_doctor.py checks the names.
WHISPER_DOWNLOADS: dict[str, tuple[str, int]] = {
    "tiny.en": ("tiny.en.pt", 75),
    "tiny": ("tiny.pt", 75),
    "base.en": ("base.en.pt", 145),
    "base": ("base.pt", 145),
    "small.en": ("small.en.pt", 485),
    "small": ("small.pt", 485),
    "medium.en": ("medium.en.pt", 1530),
    "medium": ("medium.pt", 1530),
    "large-v1": ("large-v1.pt", 3090),
    "large-v2": ("large-v2.pt", 3090),
    "large-v3": ("large-v3.pt", 3090),
    "large": ("large-v3.pt", 3090),
    "large-v3-turbo": ("large-v3-turbo.pt", 1620),
    "turbo": ("large-v3-turbo.pt", 1620),
}


class Level(str, Enum):
    """How a check came out; the value is the mark printed in front of its line."""

    ok = "✓"
    warn = "!"
    fail = "✗"


@dataclass(frozen=True)
class Check:
    """One line of the report: `<mark> <name>: <detail>`, then `  fix: <fix>` for ✗ and !."""

    level: Level
    name: str
    detail: str
    fix: str = ""

    def lines(self) -> list[str]:
        out = [f"{self.level.value} {self.name}: {self.detail}"]
        if self.fix and self.level is not Level.ok:
            out.append(f"    fix: {self.fix}")
        return out


def _size(num_bytes: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes} B"


# --------------------------------------------------------------------------------------------------------- network


async def check_telegram(settings: Settings, timeout: float = NETWORK_TIMEOUT_SECONDS) -> Check:
    """getMe at TELEGRAM_API_BASE_URL/bot<token>/getMe: the token is accepted and names the bot."""
    token = settings.telegram_bot_token.get_secret_value()
    root = settings.telegram_api_base_url

    def hide(text: str) -> str:
        return text.replace(token, "<token>") if token else text

    try:
        async with httpx2.AsyncClient(timeout=timeout, verify=client_tls()) as client:
            response = await asyncio.wait_for(client.get(f"{root}/bot{token}/getMe"), timeout + 1)
    except (TimeoutError, httpx2.TimeoutException):
        return Check(
            Level.fail,
            "Telegram",
            f"no answer from {root} within {timeout:g} s",
            "check the network (or TELEGRAM_API_BASE_URL if you run a local Bot API server)",
        )
    except (httpx2.HTTPError, OSError, ValueError) as err:
        return Check(
            Level.fail,
            "Telegram",
            hide(f"cannot reach {root}: {type(err).__name__}: {err}"),
            "check the network and TELEGRAM_API_BASE_URL",
        )
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code in (401, 404) or (isinstance(body, dict) and body.get("error_code") in (401, 404)):
        description = body.get("description") if isinstance(body, dict) else None
        return Check(
            Level.fail,
            "Telegram",
            f"token rejected ({response.status_code} {description or 'Unauthorized'})",
            "copy the token from @BotFather (/mybots → API Token) into TELEGRAM_BOT_TOKEN",
        )
    if response.status_code != 200 or not isinstance(body, dict) or not body.get("ok"):
        description = body.get("description") if isinstance(body, dict) else response.text[:200]
        return Check(
            Level.fail,
            "Telegram",
            hide(f"getMe failed: HTTP {response.status_code} {description}"),
            "check TELEGRAM_API_BASE_URL and TELEGRAM_BOT_TOKEN",
        )
    me = body.get("result") or {}
    return Check(
        Level.ok, "Telegram", f"token accepted, the bot is @{me.get('username', '?')} (id {me.get('id', '?')})"
    )


async def check_anthropic(settings: Settings, timeout: float = NETWORK_TIMEOUT_SECONDS) -> Check:
    """A free `count_tokens` call per configured model: the key is accepted and the models exist."""
    base = settings.anthropic_base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_URL
    client = anthropic.AsyncAnthropic(
        api_key=settings.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic_base_url,
        max_retries=0,
        timeout=timeout,
        http_client=anthropic.DefaultAsyncHttpxClient(verify=client_tls()),
    )
    models = list(dict.fromkeys([settings.orchestrator_model, settings.worker_model]))
    model = models[0]
    try:
        for model in models:
            await asyncio.wait_for(
                client.messages.count_tokens(model=model, messages=[{"role": "user", "content": "ping"}]), timeout + 1
            )
    except anthropic.AuthenticationError:
        return Check(
            Level.fail,
            "Anthropic",
            "API key rejected (401 authentication_error)",
            "create a key at console.anthropic.com → API keys and put it in ANTHROPIC_API_KEY",
        )
    except anthropic.PermissionDeniedError as err:
        return Check(
            Level.fail,
            "Anthropic",
            f"the key may not use the API (403: {_api_message(err)})",
            "check the key's workspace and permissions at console.anthropic.com",
        )
    except anthropic.NotFoundError as err:
        return Check(
            Level.fail,
            "Anthropic",
            f"model {model!r} not found (404: {_api_message(err)})",
            "set ORCHESTRATOR_MODEL / WORKER_MODEL to a model your key can use (or fix ANTHROPIC_BASE_URL)",
        )
    except (TimeoutError, anthropic.APITimeoutError):
        return Check(
            Level.fail,
            "Anthropic",
            f"no answer from {base} within {timeout:g} s",
            "check the network (or ANTHROPIC_BASE_URL)",
        )
    except anthropic.APIConnectionError as err:
        return Check(Level.fail, "Anthropic", f"cannot reach {base}: {err}", "check the network and ANTHROPIC_BASE_URL")
    except anthropic.APIStatusError as err:
        if err.status_code == 429 or err.status_code >= 500:
            return Check(
                Level.warn,
                "Anthropic",
                f"the API answered {err.status_code} ({_api_message(err)})",
                "a temporary condition (rate limit or overload): run doctor again in a minute",
            )
        return Check(
            Level.fail,
            "Anthropic",
            f"count_tokens failed: {err.status_code} {_api_message(err)}",
            "check ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and the model names",
        )
    finally:
        await client.close()
    return Check(Level.ok, "Anthropic", f"API key accepted; model{'s' if len(models) > 1 else ''} {', '.join(models)}")


def _api_message(err: anthropic.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(err.message)


# ------------------------------------------------------------------------------------------------------------- git


async def _git(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    """(exit code, stdout or stderr) of `git <args>` through the bot's one hardened git command; (127, reason) when git
    cannot run, (124, …) on a timeout."""
    try:
        result = await run_git(*args, cwd=cwd or Path.cwd(), timeout=GIT_TIMEOUT_SECONDS)
    except GitError as err:
        return (124 if "timed out" in str(err) else 127), str(err)
    text = result.stdout if result.exit_code == 0 else result.stderr
    return result.exit_code, text.strip()


async def _repository_root(path: Path) -> Path | None:
    code, out = await _git("rev-parse", "--show-toplevel", cwd=path)
    return Path(out).resolve() if code == 0 and out else None


async def check_git(settings: Settings) -> list[Check]:
    """The git binary, and the identity the bot commits under (always set: from settings, with defaults)."""
    identity = Check(
        Level.ok,
        "git identity",
        f"the bot commits as {settings.git_author_name} <{settings.git_author_email}> "
        "(GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL)",
    )
    if shutil.which("git") is None:
        return [Check(Level.fail, "git", "not found on PATH", "install git (apt install git)"), identity]
    code, version = await _git("--version")
    if code != 0:
        return [Check(Level.fail, "git", f"`git --version` failed: {version}", "reinstall git"), identity]
    return [Check(Level.ok, "git", version), identity]


async def check_workspaces(settings: Settings) -> list[Check]:
    """WORKSPACE_PATH exists; each project folder in it is a git repository (others are initialised when needed)."""
    root = Path(settings.workspace_path).expanduser()
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        return [
            Check(
                Level.fail,
                "workspaces",
                f"WORKSPACE_PATH {root} {what}",
                f"mkdir -p {root} and clone your repositories into it, or point WORKSPACE_PATH at such a folder",
            )
        ]
    folders = [w for w in Workspaces(root).all() if not w.is_self]
    if not folders:
        return [
            Check(
                Level.warn,
                "workspaces",
                f"{root} has no project folders yet",
                f"clone a repository into {root} (each sub-folder is a workspace)",
            )
        ]
    roots = await asyncio.gather(*(_repository_root(w.path) for w in folders))
    repos = [w.name for w, top in zip(folders, roots) if top == w.path]
    checks = [
        Check(
            Level.ok,
            "workspaces",
            f"{root}: {len(repos)} git repositor{'y' if len(repos) == 1 else 'ies'}"
            + (f" ({', '.join(repos)})" if repos else ""),
        )
    ]
    for workspace, top in zip(folders, roots):
        if top is None:
            checks.append(
                Check(
                    Level.warn,
                    f"workspace {workspace.name}",
                    "not a git repository",
                    "the bot runs `git init` and commits the files when a task needs it; "
                    f"or run it yourself: git -C {workspace.path} init",
                )
            )
        elif top != workspace.path:
            checks.append(
                Check(
                    Level.warn,
                    f"workspace {workspace.name}",
                    f"inside the git repository {top}",
                    "tasks will branch and commit in that enclosing repository; "
                    "make the folder a repository of its own if that is not what you want",
                )
            )
    return checks


async def check_bot_repository(settings: Settings) -> Check | None:
    """BOT_REPOSITORY (optional) is a git checkout: the workspace `self`."""
    if settings.bot_repository is None:
        return Check(Level.ok, "BOT_REPOSITORY", "off (unset: no workspace `self`, the bot does not work on itself)")
    path = Path(settings.bot_repository).expanduser()
    if not path.is_dir():
        return Check(
            Level.fail,
            "BOT_REPOSITORY",
            f"{path} is not a folder",
            "point BOT_REPOSITORY at this agentlab checkout, or leave it empty",
        )
    top = await _repository_root(path)
    if top is None:
        return Check(
            Level.fail,
            "BOT_REPOSITORY",
            f"{path} is not a git repository",
            "point BOT_REPOSITORY at a git checkout of agentlab (git clone …), or leave it empty",
        )
    return Check(Level.ok, "BOT_REPOSITORY", f"{top} is a git repository (the workspace `self`)")


# ------------------------------------------------------------------------------------------------- local resources


def whisper_cache_dir() -> Path:
    """Where whisper.load_model downloads models by default."""
    default = Path.home() / ".cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or default) / "whisper"


def check_whisper(settings: Settings, cache_dir: Path | None = None) -> Check:
    """WHISPER_MODEL: a checkpoint file that exists, or a model name that is cached or will be downloaded."""
    name = settings.whisper_model.strip()
    if name in WHISPER_DOWNLOADS:
        filename, megabytes = WHISPER_DOWNLOADS[name]
        cached = (cache_dir or whisper_cache_dir()) / filename
        if cached.is_file():
            return Check(Level.ok, "whisper", f"model {name!r} cached at {cached} ({_size(cached.stat().st_size)})")
        return Check(
            Level.warn,
            "whisper",
            f"model {name!r} is not downloaded yet: the bot downloads it when it starts (~{megabytes} MB)",
            "nothing to do (it downloads in the background; voice notes wait for it); on a small machine "
            "choose a smaller WHISPER_MODEL such as tiny or base",
        )
    path = Path(name).expanduser()
    if path.is_file():
        return Check(Level.ok, "whisper", f"checkpoint {path} ({_size(path.stat().st_size)})")
    if settings.voice_engine == "faster-whisper" and path.is_dir():
        if (path / "model.bin").is_file() and (path / "config.json").is_file():
            return Check(Level.ok, "whisper", f"CTranslate2 model folder {path}")
        return Check(
            Level.fail,
            "whisper",
            f"WHISPER_MODEL {path} is a folder without a CTranslate2 model (model.bin, config.json)",
            "point WHISPER_MODEL at a CTranslate2 folder, a .pt checkpoint or a model name",
        )
    if path.exists():
        return Check(
            Level.fail, "whisper", f"WHISPER_MODEL {path} is not a file", "point WHISPER_MODEL at a .pt checkpoint"
        )
    if os.sep in name or "/" in name or name.endswith(".pt") or name.startswith("~"):
        return Check(
            Level.fail,
            "whisper",
            f"the checkpoint {path} does not exist (voice notes would be refused)",
            "fix the WHISPER_MODEL path, or set it to a model name such as base",
        )
    return Check(
        Level.fail,
        "whisper",
        f"WHISPER_MODEL {name!r} is neither a model name nor a file",
        f"use one of {', '.join(n for n in WHISPER_DOWNLOADS if '.' not in n)}, or a checkpoint path",
    )


def check_voice_engine(settings: Settings) -> Check:
    """VOICE_ENGINE: which engine transcribes, whether it is installed, and how fast the last notes were."""
    from agents.inputs.speed_log import read_speeds, summary

    engine = settings.voice_engine
    package = "faster_whisper" if engine == "faster-whisper" else "whisper"
    recent = [s for s in read_speeds(settings.voice_data_dir / "recent-notes.json") if s.engine == engine]
    if importlib.util.find_spec(package) is None:
        return Check(
            Level.fail,
            "voice engine",
            f"VOICE_ENGINE={engine} but {engine} is not installed (voice notes would be refused)",
            "pip install -e '.[faster]' in the venv, or set VOICE_ENGINE=openai-whisper"
            if engine == "faster-whisper"
            else "reinstall the project (pip install -e .)",
        )
    detail = f"{engine} {_version(engine)}"
    if engine == "faster-whisper":
        detail += f" (CTranslate2 {_version('ctranslate2')}); {_faster_device(settings)}"
    start = "at the bot's start (VOICE_PRELOAD)" if settings.voice_preload else "by the first voice note"
    idle = settings.voice_idle_minutes
    end = f"ended after {idle:g} min without notes" if idle > 0 else "kept until the bot stops (VOICE_IDLE_MINUTES=0)"
    where = f"in a process of its own, started {start}, {end}"
    return Check(Level.ok, "voice engine", f"{detail}; {where}; {summary(recent)}")


def _faster_device(settings: Settings) -> str:
    """Which device faster-whisper uses and why: as the bot found it at its last start, else what it will try."""
    from agents.inputs.voice_faster import read_device_record

    record = read_device_record(settings.voice_data_dir / "recent-notes.json")
    if record and record.get("engine") == "faster-whisper":
        device = "int8 on the CPU" if record.get("device") == "cpu" else f"on {record.get('device')}"
        return f"{device} at the bot's last start: {record.get('reason', '?')}"
    try:
        import ctranslate2

        count = ctranslate2.get_cuda_device_count()
    except Exception as err:  # noqa: BLE001 - a broken install is reported by the line itself
        return f"no device known ({type(err).__name__})"
    if count:
        return (
            f"CTranslate2 counts {count} CUDA device{'' if count == 1 else 's'}: the bot proves it with a warm-up "
            "transcription at start and falls back to int8 on the CPU if it fails"
        )
    return "int8 on the CPU (no CUDA device)"


# Resident memory in MB, measured by bench/memory.py (the real bot, whisper base dims; 2-core x86-64 machine): the
# bot idle (no speech process), and the bot with its speech process of each engine after one note (their sum: what
# a voice note needs while the speech process runs). Other sizes scale by their weights: openai-whisper holds fp32
# (4 bytes a parameter), faster-whisper int8 (1 byte).
BOT_MEMORY_MB = 124
VOICE_MEMORY_MB = {"openai-whisper": 125 + 748, "faster-whisper": 125 + 305}
BYTES_PER_PARAMETER = {"openai-whisper": 4, "faster-whisper": 1}
WHISPER_PARAMETERS_M = {"tiny": 39, "base": 74, "small": 244, "medium": 769, "large": 1550, "turbo": 809}
TASK_HEADROOM_MB = 768  # what a task's git, commands and tests need beside the bot, at the least


def whisper_parameters_m(model: str) -> float | None:
    """Millions of parameters of WHISPER_MODEL: from its name, or from the size of its file (fp16: 2 bytes each)."""
    name = model.strip()
    if name in WHISPER_DOWNLOADS or name.startswith(("large", "turbo")):
        family = "turbo" if "turbo" in name else name.split(".")[0].split("-")[0]
        return WHISPER_PARAMETERS_M.get(family)
    path = Path(name).expanduser()
    weights = path / "model.bin" if path.is_dir() else path
    return weights.stat().st_size / 2 / 1e6 if weights.is_file() else None


def voice_memory_mb(engine: str, model: str) -> int | None:
    """About how much the bot holds with `engine` and `model` loaded (None: the model's size is unknown)."""
    parameters = whisper_parameters_m(model)
    if parameters is None:
        return None
    per = BYTES_PER_PARAMETER[engine]
    base = WHISPER_PARAMETERS_M["base"]
    return round(VOICE_MEMORY_MB[engine] + (parameters - base) * per)


def machine_memory_mb() -> int | None:
    """MemTotal of /proc/meminfo, in MB (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def check_memory(settings: Settings, total_mb: int | None = None) -> Check | None:
    """Whether this machine's memory holds the bot with its speech model and a task beside it; names a lighter
    choice when it does not."""
    total_mb = total_mb if total_mb is not None else machine_memory_mb()
    engine, model = settings.voice_engine, settings.whisper_model.strip()
    need = voice_memory_mb(engine, model)
    if total_mb is None or need is None:
        return None
    holds = f"the bot with {engine} {model} holds about {need} MB while its speech process runs (bench/memory.py)"
    if total_mb >= need + TASK_HEADROOM_MB:
        return Check(Level.ok, "memory", f"{total_mb} MB on this machine; {holds}")
    lighter = []
    other = "faster-whisper" if engine == "openai-whisper" else None
    if other and (other_need := voice_memory_mb(other, model)) is not None and other_need < need:
        lighter.append(f"VOICE_ENGINE={other} (about {other_need} MB)")
    family = whisper_parameters_m(model)
    if family is not None and family > WHISPER_PARAMETERS_M["tiny"]:
        smaller = voice_memory_mb("faster-whisper" if other else engine, "tiny")
        lighter.append(f"WHISPER_MODEL=tiny (about {smaller} MB{' with faster-whisper' if other else ''})")
    return Check(
        Level.warn,
        "memory",
        f"{total_mb} MB on this machine; {holds}, leaving less than {TASK_HEADROOM_MB} MB for a task",
        f"a lighter choice: {' or '.join(lighter)}" if lighter else "run the bot on a machine with more memory",
    )


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def check_ripgrep(settings: Settings) -> Check:
    """ripgrep, the engine of the agents' grep tool (never Python's backtracking re)."""
    found = ripgrep_path()
    if found:
        return Check(Level.ok, "ripgrep", f"{found} (the agents' grep)")
    return Check(Level.warn, "ripgrep", "not found: the agents' grep tool refuses every search", "apt install ripgrep")


def check_chromium(settings: Settings) -> Check:
    """Chromium for the frontend worker's screenshots (optional)."""
    found = find_chromium(settings.chromium_path)
    if found:
        return Check(Level.ok, "chromium", f"{found} (frontend screenshots)")
    if settings.chromium_path:
        return Check(
            Level.warn,
            "chromium",
            f"CHROMIUM_PATH {settings.chromium_path} is not an executable",
            "fix CHROMIUM_PATH or leave it empty to look for chromium on PATH",
        )
    return Check(
        Level.warn,
        "chromium",
        "not found: the frontend worker cannot take screenshots",
        "optional: apt install chromium (or set CHROMIUM_PATH)",
    )


async def check_browser(settings: Settings) -> Check:
    """The frontend worker's browser (chrome-devtools-mcp): installed, and whether it starts in a task's sandbox."""
    install, what = browser.find(settings.browser_tools_dir, find_chromium(settings.chromium_path))
    if install is None:
        return Check(
            Level.warn,
            "browser",
            f"{what}: the frontend worker keeps only `screenshot`",
            "make setup (scripts/install-browser.sh) where node, npm and chromium are installed",
        )
    sandbox = bwrap.SandboxProbe()
    if settings.sandbox != "off" and await sandbox.unavailable_reason():
        return Check(Level.warn, "browser", f"{what} cannot start: it runs in a task's sandbox", "see the sandbox line")
    try:
        count = await probe_mcp(browser.config(install, proxy=False), settings, sandbox, call="list_pages")
    except ToolError as err:
        return Check(Level.warn, "browser", f"{what} does not start: {err}", "run it by hand to see why")
    pinned = "" if install.version == browser.VERSION else f" (the set-up pins {browser.VERSION})"
    return Check(Level.ok, "browser", f"{what}{pinned} starts in a task's sandbox, Chromium too ({count} tools)")


async def check_mcp_servers(settings: Settings) -> list[Check]:
    """Each server of MCP_CONFIG: whether it starts (stdio: in a task's sandbox) and how many tools it offers."""
    if settings.mcp_config is None:
        return [Check(Level.ok, "MCP", "none (MCP_CONFIG unset; the frontend worker's browser is built in)")]
    sandbox = bwrap.SandboxProbe()  # one probe for the servers' checks
    servers, problems = load_mcp_config(settings.mcp_config)
    checks = [Check(Level.warn, "MCP_CONFIG", p, "fix the file (its shape is in .env.example)") for p in problems]
    if not servers and not problems:
        checks.append(Check(Level.ok, "MCP", f"none ({settings.mcp_config} names no server)"))

    async def one(config) -> Check:  # noqa: ANN001 - an McpServerConfig
        how = "stdio in a task's sandbox" if config.stdio else f"{config.url} from the bot"
        roles = ", ".join(sorted(r.value for r in config.roles))
        approve = f"; approve: {', '.join(sorted(config.approve))}" if config.approve else ""
        if config.stdio and settings.sandbox != "off" and await sandbox.unavailable_reason():
            return Check(Level.warn, f"MCP {config.name}", f"cannot start ({how})", "see the sandbox line")
        try:
            count = await probe_mcp(config, settings, sandbox)
        except ToolError as err:
            fix = (
                "check its command, args and env; its folder must be in SANDBOX_READ_PATHS"
                if config.stdio
                else f"check that {config.url} is up and reachable from the bot, and its headers (a token) in "
                "MCP_CONFIG"
            )
            return Check(Level.warn, f"MCP {config.name}", f"does not start ({how}): {err}", fix)
        return Check(Level.ok, f"MCP {config.name}", f"starts ({how}), {count} tools; roles {roles}{approve}")

    return checks + list(await asyncio.gather(*(one(c) for c in servers)))


BWRAP_INSTALL_FIX = (
    "install it: `sudo apt-get install bubblewrap` (or `sudo scripts/install-system-deps.sh`); or set SANDBOX=off "
    "to run commands unconfined"
)
USERNS_FIX = (
    "allow unprivileged user namespaces (`sudo sysctl -w kernel.unprivileged_userns_clone=1`, or "
    "`kernel.apparmor_restrict_unprivileged_userns=0`; in Docker: --security-opt seccomp=unconfined --security-opt "
    "apparmor=unconfined); or set SANDBOX=off to run commands unconfined"
)
CGROUP_FIX = "run the bot where it may make cgroups (as root, or in a delegated cgroup: systemd's Delegate=yes)"


def network_tools_fix() -> str | None:
    """The fix when an allowed network cannot go direct: install what is missing of passt (pasta) and nftables."""
    missing = [name for name, there in (("passt", user_net_available()), ("nftables", nft_available())) if not there]
    if not missing:
        return None
    return f"install {' and '.join(missing)}: `sudo apt-get install {' '.join(missing)}`"


async def check_sandbox(settings: Settings) -> Check:
    """bubblewrap confines every process of a task; without it commands are refused unless SANDBOX=off."""
    if bwrap.SandboxMode(settings.sandbox) is bwrap.SandboxMode.OFF:
        return Check(
            Level.warn,
            "sandbox",
            "SANDBOX=off: workers' commands and test runs are NOT confined; a hostile "
            "worker can read the bot's keys and your files and use the network",
            "set SANDBOX=bwrap (the default) once bubblewrap works here",
        )
    reason = await bwrap.SandboxProbe().unavailable_reason()  # probed now, whatever an earlier check found
    if reason:  # the reason ends with the general fix; the line's own fix is the one for this failure
        detail = reason.removesuffix(".").removesuffix(f": {bwrap.UNAVAILABLE_FIX}")
        return Check(Level.fail, "sandbox", detail, BWRAP_INSTALL_FIX if bwrap.bwrap_path() is None else USERNS_FIX)
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    limits = sandbox_limit_warnings(settings.sandbox_network != "off")
    cgroup = task_cgroup_support()
    if limits:  # what this machine cannot bound, each with its own fix
        fixes = [] if cgroup.available else [CGROUP_FIX]
        if settings.sandbox_network != "off" and (network_fix := network_tools_fix()):
            fixes.append(network_fix)
        return Check(Level.warn, "sandbox", "bubblewrap confines commands, but " + "; ".join(limits), "; ".join(fixes))
    egress = egress_for(settings.sandbox_network_domains, settings.sandbox_network_private)
    net = "the public Internet only, via pasta" if direct_network(egress) else "the bot's HTTP proxy only"
    if cgroup.available:
        root_note = f" ({cgroup.description}; an allowed network is {net})"
    elif pids_parent() is not None:
        root_note = " (processes bounded by a pids cgroup per command)"
    elif as_root:
        root_note = (
            " (the bot runs as root and no pids cgroup is writable: the kernel does not apply the process "
            "limit to root; run it as a normal user so a fork bomb is bounded)"
        )
    else:
        root_note = ""
    return Check(Level.ok, "sandbox", f"bubblewrap confines commands (network: {settings.sandbox_network}){root_note}")


def check_network_reach(settings: Settings) -> Check | None:
    """What a command allowed the network reaches (SANDBOX_NETWORK_DOMAINS, SANDBOX_NETWORK_PRIVATE); a warning when
    private addresses are opened to it. None with SANDBOX_NETWORK=off."""
    if settings.sandbox_network == "off":
        return None
    egress = egress_for(settings.sandbox_network_domains, settings.sandbox_network_private)
    if egress.private:
        return Check(
            Level.warn,
            "network reach",
            "SANDBOX_NETWORK_PRIVATE opens private addresses to every command allowed the network: "
            + ", ".join(str(n) for n in egress.private)
            + " (what listens there, a database or an admin page, is reachable too)",
            "keep it to the one mirror or registry that needs it (a single address, not a range), or leave it empty",
        )
    return Check(Level.ok, "network reach", f"a command allowed the network reaches {egress.describe()}")


async def check_disk_bound(settings: Settings) -> Check:
    """`check_disk_budget` after a real try at a worktree's own file system (where SANDBOX_DISK_FS=auto)."""
    found = await task_disk.probe() if settings.sandbox_disk_fs == "auto" else task_disk.support()
    return check_disk_budget(settings, found)


async def check_task_disks(settings: Settings) -> Check | None:
    """Mounts and loop devices of the task disks that no task owns (a bot or runner killed mid-task, a cancel that
    raced a mount): named with the commands that free them; nothing to say when there are none."""
    owned = await asyncio.to_thread(_resumable_worktrees, settings.database_path)
    found = task_disk.strays(settings.worktrees_dir, owned)
    if not found:
        return None
    points = " ".join(s.name for s in found if s.kind == "mount")
    devices = " ".join(s.name for s in found if s.kind == "loop device")
    fix = "; ".join(
        part
        for part in (
            f"unmount them: umount -l {points}" if points else "",
            f"then detach the loop devices: losetup -d {devices}" if devices else "",
            "the next start of the bot deletes the images whose worktree is gone",
        )
        if part
    )
    named = "; ".join(f"{s.kind} {s.name} ({s.why})" for s in found)
    return Check(Level.warn, "task disks", f"{len(found)} left behind that no task owns: {named}", fix)


def _resumable_worktrees(database: Path) -> set[Path] | None:
    """The worktrees of the tasks still going or resumable, read from the bot's database; None when it cannot be read
    (then no mount is judged by it)."""
    if not database.is_file():
        return set()
    statuses = [s.value for s in TaskStatus.cancellable()]
    marks = ",".join("?" * len(statuses))
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=2)) as db:
            rows = db.execute(
                f"SELECT worktree FROM tasks WHERE worktree IS NOT NULL AND status IN ({marks})", statuses
            ).fetchall()
    except sqlite3.Error:
        return None
    return {Path(row[0]) for row in rows}


def check_disk_budget(settings: Settings, found: task_disk.Support | None = None) -> Check:
    """What bounds a task's disk use here, and how: the budget, the hard per-file bound, and for the task as a whole
    either a file system of its own per task (agents/sandbox/task_disk.py; `found`: what a real try found, else what
    the machine offers) or the poll alone."""
    budget = disk_budget(settings.sandbox_max_disk_mb, settings.worktrees_dir) >> 20
    source = "SANDBOX_MAX_DISK_MB" if settings.sandbox_max_disk_mb is not None else "a quarter of the free space"
    per_file = min(settings.sandbox_max_file_mb, budget)
    keep_size = (
        "a reservation that keeps the file size (fallocate --keep-size) is refused (seccomp)"
        if keep_size_filter_program() is not None
        else "a reservation that keeps the file size (fallocate --keep-size) is not under it: no seccomp filter here"
    )
    said = (
        f"{budget:,} MB per task ({source}; the services' logs count in it). Bound in force: hard per file, "
        f"{per_file:,} MB (RLIMIT_FSIZE: the smaller of SANDBOX_MAX_FILE_MB and the budget, refused by the kernel "
        f"at once; {keep_size}); "
    )
    found = found or task_disk.support()
    if settings.sandbox_disk_fs == "auto" and found.available:
        return Check(
            Level.ok,
            "disk budget",
            said + f"for the task as a whole, a file system of its own per task, {budget:,} MB beyond its checkout "
            '(a sparse ext4 image mounted on its worktree: a burst of writes meets "No space left on device"), '
            "with polling every 0.2 s still stopping the command that goes past the budget and deleting its files",
        )
    why = "SANDBOX_DISK_FS=off" if settings.sandbox_disk_fs == "off" else found.reason
    return Check(
        Level.ok if settings.sandbox_disk_fs == "off" else Level.warn,
        "disk budget",
        said + f"for the task as a whole, polling every 0.2 s ({why}): a burst between two looks is not bounded "
        "(several files written at once and removed before the next look take the host's disk for that moment)",
        "run the bot as root with loop devices (/dev/loop-control) and mkfs.ext4 for a hard bound: each task's "
        "worktree a file system of its own (SANDBOX_DISK_FS=auto)",
    )


def _stored_version(path: Path) -> int | None:
    """PRAGMA user_version of an existing database file, read-only; None if there is no file."""
    if not path.is_file():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


async def check_database(settings: Settings) -> Check:
    """DATABASE_PATH can be opened for writing and is at the latest migration (doctor applies pending ones)."""
    path = Path(settings.database_path).expanduser()
    fix = f"make {path.parent} writable for this user, or set DATABASE_PATH to a writable place"
    try:
        before = await asyncio.to_thread(_stored_version, path)
    except sqlite3.Error as err:
        return Check(
            Level.fail,
            "database",
            f"{path} is not a readable SQLite database: {err}",
            "move the file away (the bot creates a fresh one) or fix DATABASE_PATH",
        )
    if before is not None and before > LATEST_VERSION:
        return Check(
            Level.fail,
            "database",
            f"{path} is at schema v{before}, newer than this agentlab (v{LATEST_VERSION})",
            "update agentlab (git pull) or point DATABASE_PATH at another file",
        )
    try:
        store = await Store.open(path)
    except (OSError, sqlite3.Error) as err:
        return Check(Level.fail, "database", f"cannot open {path}: {err}", fix)
    try:
        version = await store.schema_version()
    finally:
        await store.close()
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        return Check(Level.fail, "database", f"{path} (or its folder) is not writable", fix)
    if version != LATEST_VERSION:
        return Check(
            Level.fail,
            "database",
            f"{path} is at schema v{version}, expected v{LATEST_VERSION}",
            "move the file away (the bot creates a fresh one)",
        )
    if before is None:
        state = "created"
    elif before < version:
        state = f"migrated v{before} → v{version}"
    else:
        state = f"schema v{version}, the latest"
    return Check(Level.ok, "database", f"{path} writable, {state}")


def check_updates_mode(settings: Settings) -> Check:
    """Long polling or webhook (settings already validated the webhook keys)."""
    if not settings.webhook_url:
        return Check(Level.ok, "updates", "long polling (WEBHOOK_URL is empty; no inbound port needed)")
    public = f"{settings.webhook_url}/{settings.webhook_path}"
    return Check(
        Level.ok,
        "updates",
        f"webhook {public} → listening on {settings.webhook_listen}:{settings.webhook_port} "
        "(the reverse proxy must forward HTTPS to it)",
    )


async def check_task_engine(settings: Settings) -> Check:
    """TASK_ENGINE=temporal: the cluster answers, and which runners are polling for tasks."""
    if settings.task_engine != "temporal":
        return Check(Level.ok, "task engine", "local: tasks run in the bot's process")
    try:
        from agents.engine import cluster
    except ImportError as err:
        return Check(
            Level.fail,
            "task engine",
            f"TASK_ENGINE=temporal but the Temporal SDK is missing ({err})",
            "pip install -e '.[temporal]'",
        )
    try:
        client = await cluster.connect(settings, identity="agentlab-doctor")
        runners = await cluster.live_runners(client, settings)
    except ConnectionError as err:
        return Check(Level.fail, "task engine", str(err), "start the Temporal server, or fix TEMPORAL_ADDRESS")
    s = settings
    where = f"Temporal at {s.temporal_address} (namespace {s.temporal_namespace}, queue {s.temporal_task_queue})"
    if not runners:
        return Check(
            Level.warn,
            "task engine",
            f"{where}: no runner is polling; tasks wait for one",
            "start `agentlab runner` on a machine with the workspaces (see `agentlab runner --help`)",
        )
    return Check(Level.ok, "task engine", f"{where}; live runners: {', '.join(runners)}")


# ------------------------------------------------------------------------------------------------------- the report


CheckResult = Check | list[Check] | None  # one line, several, or none (the check does not apply here)


async def _guarded(name: str, check: Callable[[], CheckResult | Awaitable[CheckResult]]) -> list[Check]:
    """Run one check (plain or async); a crash becomes a ✗ line instead of a traceback."""
    try:
        called = check()
        result: CheckResult = await called if isinstance(called, Awaitable) else called
    except Exception as err:  # noqa: BLE001 - every failure is reported, none is fatal to the report
        return [
            Check(
                Level.fail,
                name,
                f"the check itself failed: {type(err).__name__}: {err}",
                "run with LOG_LEVEL=DEBUG and report it",
            )
        ]
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


async def check_github(settings: Settings) -> list[Check] | None:
    """GITHUB_TOKEN accepted, and able to push to each workspace's GitHub repository; GITHUB_USERS allowed; the
    webhook's address free to listen on. Nothing when GITHUB_TOKEN is unset (no GitHub features)."""
    from agents.github.api import GitHubClient, GitHubUnavailable
    from agents.github.repository import github_repository
    from agents.workspaces.folders import Workspaces

    if settings.github_token is None:
        return [Check(Level.ok, "GitHub", "off (GITHUB_TOKEN unset: no issues, mentions or pull requests)")]
    client = GitHubClient(settings.github_token.get_secret_value(), settings.github_api_url)
    checks: list[Check] = []
    try:
        try:
            login = await client.user()
        except GitHubUnavailable as err:
            if err.status is None:
                fix = f"check the network and GITHUB_API_URL ({settings.github_api_url})"
            elif err.status == 401:
                fix = "GitHub refuses the token: make a new one (README: GitHub) and set GITHUB_TOKEN"
            else:
                fix = "check the token's permissions and GitHub's status (a 403 can be a rate limit: wait an hour)"
            return [Check(Level.fail, "GitHub", f"GITHUB_TOKEN: {err}", fix)]
        checks.append(Check(Level.ok, "GitHub", f"GITHUB_TOKEN accepted (acting as {login})"))
        for ws in Workspaces(settings.workspace_path, settings.bot_repository).all():
            repo = await github_repository(ws.path, settings.github_web_url)
            if repo is None:
                continue
            try:
                data = await client.repository(repo.full_name)
            except GitHubUnavailable as err:
                checks.append(
                    Check(
                        Level.warn,
                        "GitHub",
                        f"{ws.name}: {repo.full_name}: {err}",
                        "give the token access to this repository (contents, pull requests, issues: read and write)",
                    )
                )
                continue
            if not (data.get("permissions") or {}).get("push", True):
                checks.append(
                    Check(
                        Level.warn,
                        "GitHub",
                        f"{ws.name}: the token cannot push to {repo.full_name}",
                        "give it contents: read and write",
                    )
                )
            else:
                checks.append(
                    Check(
                        Level.ok,
                        "GitHub",
                        f"{ws.name} → {repo.full_name} (default branch {data.get('default_branch')})",
                    )
                )
    finally:
        await client.close()
    if not settings.github_users:
        checks.append(Check(Level.ok, "GitHub", "mentions: nobody's (GITHUB_USERS unset: a mention starts no work)"))
    strangers = [login for login, uid in settings.github_users.items() if uid not in settings.allowed_user_ids]
    if strangers:
        checks.append(
            Check(
                Level.warn,
                "GitHub",
                f"GITHUB_USERS names users who are not in ALLOWED_USER_IDS: {', '.join(strangers)}",
                "their mentions are ignored; add their Telegram ids to ALLOWED_USER_IDS",
            )
        )
    if not settings.github_webhook_listen:
        off = "off (GITHUB_WEBHOOK_LISTEN unset: no webhook; a pull request's checks are polled)"
        checks.append(Check(Level.ok, "GitHub webhook", off))
    else:
        host, _, port = settings.github_webhook_listen.rpartition(":")
        try:
            with socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host.strip("[]"), int(port)))
            checks.append(
                Check(
                    Level.ok,
                    "GitHub webhook",
                    f"POST /github on {settings.github_webhook_listen}: point the repository's webhook at "
                    "https://<your host>/github (JSON, the secret, events: issues, issue comments, pull request "
                    "reviews, check suites)",
                )
            )
        except OSError as err:
            checks.append(
                Check(
                    Level.warn,
                    "GitHub webhook",
                    f"cannot listen on {settings.github_webhook_listen}: {err.strerror or err}",
                    "free the port (is the bot already running?) or change GITHUB_WEBHOOK_LISTEN",
                )
            )
    return checks


def check_access(settings: Settings) -> Check:
    """ALLOWED_USER_IDS: who may use the bot; empty is a bot that refuses everyone."""
    if not settings.allowed_user_ids:
        return Check(
            Level.fail,
            "ALLOWED_USER_IDS",
            "empty: nobody may use the bot (every message is refused)",
            "add your id: ALLOWED_USER_IDS=<your Telegram user id> in .env (message @userinfobot to learn it, or "
            "message this bot: its log names every refused id)",
        )
    count = len(settings.allowed_user_ids)
    return Check(Level.ok, "ALLOWED_USER_IDS", f"{count} user{'s' if count > 1 else ''} may use the bot")


async def run_checks(settings: Settings) -> list[Check]:
    """Every check after the settings, concurrently, in a fixed order."""
    groups = await asyncio.gather(
        _guarded("ALLOWED_USER_IDS", lambda: check_access(settings)),
        _guarded("Telegram", lambda: check_telegram(settings)),
        _guarded("Anthropic", lambda: check_anthropic(settings)),
        _guarded("updates", lambda: check_updates_mode(settings)),
        _guarded("workspaces", lambda: check_workspaces(settings)),
        _guarded("BOT_REPOSITORY", lambda: check_bot_repository(settings)),
        _guarded("git", lambda: check_git(settings)),
        _guarded("whisper", lambda: check_whisper(settings)),
        _guarded("voice engine", lambda: check_voice_engine(settings)),
        _guarded("memory", lambda: check_memory(settings)),
        _guarded("ripgrep", lambda: check_ripgrep(settings)),
        _guarded("chromium", lambda: check_chromium(settings)),
        _guarded("browser", lambda: check_browser(settings)),
        _guarded("MCP", lambda: check_mcp_servers(settings)),
        _guarded("database", lambda: check_database(settings)),
        _guarded("sandbox", lambda: check_sandbox(settings)),
        _guarded("network reach", lambda: check_network_reach(settings)),
        _guarded("disk budget", lambda: check_disk_bound(settings)),
        _guarded("task disks", lambda: check_task_disks(settings)),
        _guarded("task engine", lambda: check_task_engine(settings)),
        _guarded("GitHub", lambda: check_github(settings)),
    )
    return [check for group in groups for check in group]


def _settings_source() -> str:
    env_file = Path(".env")
    if env_file.is_file():
        return f"from the environment and {env_file.resolve()}"
    return f"from the environment (no .env in {Path.cwd()})"


async def doctor(out: TextIO | None = None, load: Callable[[], Settings] = load_settings) -> int:
    """Print the report; 0 when every required check passed, 1 otherwise."""
    out = out or sys.stdout

    def emit(check: Check) -> None:
        for line in check.lines():
            print(line, file=out)

    try:
        settings = load()
    except SettingsError as err:
        emit(
            Check(
                Level.fail,
                "settings",
                str(err).removeprefix("configuration error: "),
                "run `agentlab init`, or fill in .env (every key is explained in .env.example)",
            )
        )
        return 1
    emit(Check(Level.ok, "settings", f"valid, {_settings_source()}"))
    # Every finding is a line of this report: a library's warning, printed by logging's last-resort handler where
    # no handler is configured (the command line), would break its format.
    root = logging.getLogger()
    quiet = logging.NullHandler() if not root.handlers else None
    if quiet is not None:
        root.addHandler(quiet)
    try:
        checks = await run_checks(settings)
    finally:
        if quiet is not None:
            root.removeHandler(quiet)
    for check in checks:
        emit(check)
    failed = [c for c in checks if c.level is Level.fail]
    warned = [c for c in checks if c.level is Level.warn]
    if failed:
        print(
            f"\n{len(failed)} required check{'s' if len(failed) > 1 else ''} failed: "
            f"{', '.join(dict.fromkeys(c.name for c in failed))}.",
            file=out,
        )
        return 1
    note = f" ({len(warned)} optional warning{'s' if len(warned) > 1 else ''})" if warned else ""
    print(f"\nReady: every required check passed{note}. Start the bot with `agentlab run`.", file=out)
    return 0


_TOKEN_SHAPE = re.compile(r"^\d+:[A-Za-z0-9_-]+$")


def token_looks_valid(token: str) -> bool:
    """A Telegram bot token's shape, `<bot id>:<secret>` (checked before asking Telegram)."""
    return bool(_TOKEN_SHAPE.match(token.strip()))
