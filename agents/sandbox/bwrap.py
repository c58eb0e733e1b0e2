"""Bubblewrap confinement of a task's processes: what a sandboxed command sees, and the argv that builds it.

A sandboxed command runs in fresh user, PID, mount, IPC, UTS and network namespaces (an allowed network is wired out
to the public Internet only by agents/sandbox/user_net.py: pasta under nftables rules, or the bot's proxy). It sees the
task's worktree read-write; the system's programs and libraries, a short list of harmless `/etc` files, the Python
environments its tests need and the worktree's git metadata read-only; a private size-bounded `/tmp` and an empty
home. The root of the sandbox is read-only, every capability is dropped, and resource limits (processes, file size,
address space) are set before the command starts. `--die-with-parent` plus the PID namespace mean that when the bot
kills bwrap (timeout, /cancel, task end) every process of the command dies with it, detached or not. A program the
bot starts for itself in a task's sandbox (`SandboxSpec.for_own_program`) is found on a PATH without any folder the
worker can write.

Why one module over 400 lines: the mounts, the environment, the argv and the probe describe one boundary and are
reviewed together.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import enum
import functools
import logging
import os
import resource
import shutil
import struct
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.clean_env import child_env
from agents.sandbox.egress_rules import Egress
from agents.sandbox.git_masks import GitMetadataMasks
from agents.sandbox.reaping import reaped_on_failure, start_group
from agents.sandbox.safe_paths import checkout_venv
from agents.sandbox.task_limits import TaskBounds
from agents.sandbox.temp_folders import temp_folder, temp_prefix

log = logging.getLogger(__name__)

SERVICES_MOUNT = "/run/services"  # where a command sees the task's service logs (agents/sandbox/services.py)
HOME = "/home/agent"  # the sandbox's empty home (its own tmpfs)
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc entries programs need to run (names, TLS, time zones, dynamic linker); never shadow, sudoers, ssh keys, ...
ETC_ENTRIES = (
    "passwd",
    "group",
    "hosts",
    "hostname",
    "resolv.conf",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "services",
    "protocols",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "alternatives",
    "mime.types",
    "os-release",
    "debian_version",
    "gitconfig",
    "inputrc",
    "locale.alias",
    "locale.conf",
    "default/locale",
    "fonts",
    "xdg",
    "magic",
    "magic.mime",
    "mailcap",
    "python3",
    "perl",
    "terminfo",
    "chromium",
    "chromium.d",  # the frontend worker's screenshots run Chromium in the sandbox too
)  # not pip.conf, npmrc, environment, profile(.d), bash.bashrc: they can carry registry tokens or proxy passwords
# Environment keys passed into the sandbox from the command's own environment; everything else is dropped.
PASSED_ENV = frozenset(
    {
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "AGENTLAB_TASK",
        "GIT_TERMINAL_PROMPT",
        "PAGER",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD",  # the bot's Python standing in for a workspace: its plugins stay out
        "PYTEST_PLUGINS",  # only the bot's tracer (agents/verify/suite_env.py drops the bot's own value)
        "AGENTLAB_TRACE_OUT",  # the bot's tracer of which functions a test runs (agents/verify/tracer.py)
        "AGENTLAB_TRACE_ROOT",
        "NODE_V8_COVERAGE",  # node's coverage, where the bot traces which functions a red test calls
        "GIT_PAGER",
        "CI",
        "NO_COLOR",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "SOURCE_DATE_EPOCH",
        # JavaScript package managers: offline, the installed version (agents/verify/js_test_script.py JS_TEST_ENV)
        "npm_config_manage_package_manager_versions",
        "npm_config_package_manager_strict",
        "npm_config_package_manager_strict_version",
        "npm_config_offline",
        "npm_config_update_notifier",
        "npm_config_fund",
        "npm_config_audit",
        "COREPACK_ENABLE_STRICT",
        "COREPACK_ENABLE_DOWNLOAD_PROMPT",
        "COREPACK_ENABLE_AUTO_PIN",
        "COREPACK_ENABLE_NETWORK",
        "YARN_ENABLE_OFFLINE_MODE",
        "YARN_ENABLE_TELEMETRY",
    }
)
# Set in every sandbox (the worker's commands too): a package manager never downloads another version of itself
# (pnpm's `packageManager` self-management, corepack); the sandbox's home holds no rc file saying so.
SANDBOX_ENV_DEFAULTS = {
    "npm_config_manage_package_manager_versions": "false",
    "npm_config_package_manager_strict": "false",
    "npm_config_update_notifier": "false",
    "COREPACK_ENABLE_STRICT": "0",
    "COREPACK_ENABLE_DOWNLOAD_PROMPT": "0",
    "COREPACK_ENABLE_AUTO_PIN": "0",
}
# Cache folders tools write inside a project's node_modules (eslint/xo/babel `.cache`, vite's `.vite`): over a
# borrowed, read-only node_modules each gets an empty private tmpfs, so caches work, never write into the owner's
# checkout and never hold the main checkout's paths.
NODE_MODULES_CACHES = (".cache", ".vite", ".vitest", ".vite-temp", ".astro", ".tmp")
UNAVAILABLE_FIX = (
    "install it with `sudo apt-get install bubblewrap` (or `sudo scripts/install-system-deps.sh`); "
    "if it is installed, allow unprivileged user namespaces "
    "(`sudo sysctl -w kernel.unprivileged_userns_clone=1` or "
    "`kernel.apparmor_restrict_unprivileged_userns=0`); or set SANDBOX=off to run commands unconfined"
)


class SandboxMode(str, enum.Enum):
    BWRAP = "bwrap"
    OFF = "off"


class NetworkPolicy(str, enum.Enum):
    ASK = "ask"
    ON = "on"
    OFF = "off"


@dataclass(frozen=True)
class ResourceLimits:
    """Per-command limits, set with `ulimit` inside the sandbox (hard and soft) before the command runs.

    The process limit is the kernel's RLIMIT_NPROC: it is not enforced for a bot running as root (kuid 0)."""

    max_processes: int = 512
    max_file_bytes: int = 1 << 30
    max_memory_bytes: int = 8 << 30  # address space; Node and the JVM reserve a lot of it
    tmp_bytes: int = 1 << 30  # private /tmp, home and /dev/shm are tmpfs (memory): bounded
    # open files per process: the bot's own limit (often tens of thousands) times max_processes could exhaust the
    # machine's whole table (fs.file-max), leaving the bot unable to open a file; 2048 is twice the usual default
    max_open_files: int = 2048

    def ulimit_script(self) -> str:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # a limit may only be lowered: never ask past the bot's
        files = self.max_open_files if hard == resource.RLIM_INFINITY else min(self.max_open_files, hard)
        return (
            f"ulimit -u {self.max_processes} -f {max(1, self.max_file_bytes // 1024)} "
            f"-v {max(1, self.max_memory_bytes // 1024)} -n {files} -c 0"
        )


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandboxed command may see: `worktree` read-write, `read_only` paths (bound at the same place)."""

    worktree: Path
    read_only: tuple[Path, ...] = ()
    network: bool = False
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    path_prefix: tuple[str, ...] = ()  # bin folders put before the system PATH (a virtualenv's)
    masks: tuple[tuple[Path, Path], ...] = ()  # (replacement, target): read-only file shown in place of target
    writable: tuple[Path, ...] = ()  # folders of the bot's own (e.g. a test report's) bound read-write, same place
    task: TaskBounds | None = field(default=None, compare=False)  # the task's cgroup and disk budget (task_limits.py)
    mounts: tuple[tuple[Path, str], ...] = ()  # (host folder, place in the sandbox) bound read-only, e.g. service logs
    # shown empty wherever a bound folder holds them (`covers`): the bot's data folder, a live checkout's credentials
    hidden: tuple[Path, ...] = ()
    egress: Egress = field(default_factory=Egress)  # what an allowed network reaches (agents/sandbox/egress_rules.py)
    probe: SandboxProbe = field(kw_only=True, compare=False, repr=False)  # does bwrap work here (its owner's probe)
    # a program the bot starts for itself in the task's sandbox (an MCP server, the browser, the screenshot driver):
    # its PATH holds no folder the worker can write (see `sandbox_env`)
    own_program: bool = False

    def with_network(self, network: bool) -> SandboxSpec:
        return dataclasses.replace(self, network=network)

    def for_own_program(self) -> SandboxSpec:
        """This sandbox for a program of the bot's own rather than the worker's commands.

        A command found by name on the worker's PATH may be the worker's: the worktree's `.venv` is a link to the
        owner's environment that the worker can replace with a folder of its own programs (a `python3`, an `npx`), and
        the worktree's bin folders come first on that PATH so the worker's and the tests' commands use the project's
        environment. The bot's own programs carry what the worker must not hold (an MCP server's keys in its
        environment, the pictures the bot sends on): they are found on a PATH without any of those folders."""
        return dataclasses.replace(self, own_program=True)


def python_prefixes() -> list[Path]:
    """The bot's interpreter and virtualenv: tests of a workspace without its own environment run with them."""
    return _unique(Path(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix))


def virtualenv_paths(checkout: Path, name: str = ".venv") -> list[Path]:
    """The checkout's virtualenv `name` and the host installation of Python it was made from, when the checkout has
    a real one (`safe_paths.checkout_venv`: no symlink, base matched among the host's interpreters by version, never
    from `pyvenv.cfg`'s `home`); else nothing: a repository never chooses what the sandbox binds."""
    venv, base, _why_not = checkout_venv(checkout, name)
    return [] if venv is None or base is None else [venv, base]


def git_metadata(worktree: Path) -> Path | None:
    """The git common dir of a linked worktree (`.git` is a file pointing into it), to be bound read-only."""
    dot_git = worktree / ".git"
    if not dot_git.is_file():
        return None  # a plain repository: its .git is inside the worktree already
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    admin = (worktree / text.removeprefix("gitdir:").strip()).resolve()
    try:
        common = (admin / (admin / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except OSError:
        common = admin
    return common if common.is_dir() else None


def worktree_link(worktree: Path, common: Path) -> Path | None:
    """The worktree's `.git` file, when it is the plain file naming its admin folder in `common` (the trusted
    repository's git directory), to be bound read-only over itself: no process of the task can then replace it. A
    worker that swapped it for a git directory of its own (whose config can name a command to fetch with) would
    otherwise have the bot's own git calls in the worktree, run outside the sandbox, read that directory."""
    dot_git = worktree / ".git"
    if dot_git.is_symlink() or not dot_git.is_file() or git_metadata(worktree) != common.resolve():
        return None
    return dot_git


def spec_for(
    secrets: SecretsFilter,
    probe: SandboxProbe,
    worktree: Path,
    *,
    repository: Path | None = None,
    network: bool = False,
    limits: ResourceLimits | None = None,
    extra_read_only: Iterable[Path] = (),
    git_masks: GitMetadataMasks | None = None,
) -> SandboxSpec:
    """The sandbox of a task's worktree: git metadata and `.venv` (or the bot's interpreter) read-only.

    What is bound comes from `repository` (the owner's checkout the worktree was made from), never from files in
    the worktree: a worker that rewrites its `.git` file or `.venv` link must not choose what the next sandbox
    shows. Without `repository` (tests, benchmarks) the worktree's own `.git` and `.venv` are trusted. `secrets`:
    the process's output filter, which masks the copies of the git metadata files the sandbox shows
    (agents/sandbox/git_masks.py; `git_masks`: its owner's copies, remembered between specs); `probe`: the process's
    bwrap probe, asked before each command runs."""
    worktree = Path(worktree).resolve()
    trusted = Path(repository).resolve() if repository is not None else worktree
    read_only: list[Path] = []
    masks: list[tuple[Path, Path]] = []
    git_masks = git_masks or GitMetadataMasks(secrets)
    if repository is not None:
        metadata = trusted / ".git" if (trusted / ".git").is_dir() else git_metadata(trusted)
    else:
        metadata = git_metadata(worktree)
    if metadata is not None:
        read_only.append(metadata)
        masks += git_masks.files(metadata)
        if repository is not None and (link := worktree_link(worktree, metadata)) is not None:
            read_only.append(link)
    elif not (worktree / ".git").is_symlink() and (worktree / ".git").is_dir():
        masks += git_masks.files(worktree / ".git")
    venv_paths = virtualenv_paths(trusted)
    read_only += venv_paths
    read_only += python_prefixes()
    read_only += [Path(p) for p in extra_read_only]
    path_prefix = [str(worktree / ".venv" / "bin")] if venv_paths else []
    path_prefix.append(str(Path(sys.executable).parent))
    spec = SandboxSpec(
        worktree,
        tuple(_unique(read_only)),
        network,
        limits or ResourceLimits(),
        tuple(dict.fromkeys(path_prefix)),
        tuple(masks),
        probe=probe,
    )
    absolute_binds(spec)  # SANDBOX_READ_PATHS is checked at start; this refuses any other way in
    return spec


def task_writes(entry: str, spec: SandboxSpec) -> bool:
    """Whether the folder `entry` (a PATH entry) is one the task can write: inside its worktree or a writable folder,
    as written or resolved (the worktree's `.venv` is a link the worker may replace with a folder of its own)."""
    writable = (spec.worktree, *spec.writable)
    return any(_inside(Path(entry), w) or _inside(Path(os.path.realpath(entry)), w) for w in writable)


def sandbox_env(env: Mapping[str, str], spec: SandboxSpec) -> dict[str, str]:
    """The whole environment of a sandboxed command: a few harmless keys of `env`, then PATH, HOME and TMPDIR."""
    kept = dict(SANDBOX_ENV_DEFAULTS)
    if spec.probe.node_options:
        kept["NODE_OPTIONS"] = spec.probe.node_options
    kept.update({k: v for k, v in env.items() if k in PASSED_ENV or k.startswith("LC_")})
    visible = (spec.worktree, *spec.read_only, *spec.writable)
    # PYTHONPATH / VIRTUAL_ENV / PATH entries the bot set for the tests (the worktree's sources first, a borrowed
    # environment's bin) are kept when they point at something the sandbox shows
    for key in ("PYTHONPATH", "VIRTUAL_ENV"):
        entries = [e for e in env.get(key, "").split(os.pathsep) if e and any(_inside(Path(e), v) for v in visible)]
        if entries:
            kept[key] = os.pathsep.join(entries)
    extra = [e for e in env.get("PATH", "").split(os.pathsep) if e and any(_inside(Path(e), v) for v in visible)]
    path = [*extra, *spec.path_prefix]
    if spec.own_program:  # nothing the worker can write (see SandboxSpec.for_own_program)
        path = [e for e in path if not task_writes(e, spec)]
    kept.update(
        PATH=":".join(dict.fromkeys((*path, *SYSTEM_PATH.split(":")))),
        HOME=HOME,
        TMPDIR="/tmp",
        USER="agent",
        LOGNAME="agent",
        SHELL="/bin/bash",
    )
    return kept


# A seccomp filter for every sandboxed command: fallocate with FALLOC_FL_KEEP_SIZE (a reservation that leaves the
# file's size as it is, so the per-file limit RLIMIT_FSIZE never sees it) fails with EOPNOTSUPP, as on a file system
# without it; plain fallocate stays (bounded per file), and so does everything else. (audit arch, fallocate's number)
_SECCOMP_ARCH = {"x86_64": (0xC000003E, 285), "aarch64": (0xC00000B7, 47)}
_EOPNOTSUPP = 95


def keep_size_filter_program() -> bytes | None:
    """The classic BPF program of that filter for this machine (None where its numbers are not known)."""
    known = _SECCOMP_ARCH.get(os.uname().machine)
    if known is None or not _seccomp_filters():
        return None
    arch, number = known
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | _EOPNOTSUPP
    program = [
        (load, 0, 0, 4),  # the architecture
        (jeq, 0, 5, arch),  # another one: allow (its numbers differ)
        (load, 0, 0, 0),  # the system call's number
        (jge, 4, 0, 0x40000000),  # the x32 numbering of x86_64: refused
        (jeq, 0, 2, number),  # not fallocate: allow
        (load, 0, 0, 24),  # fallocate's mode (the low half of its second argument)
        (jset, 1, 0, 0x01),  # FALLOC_FL_KEEP_SIZE: refused
        (ret, 0, 0, allow),
        (ret, 0, 0, deny),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


@functools.cache
def _seccomp_filters() -> bool:
    """Whether the kernel has seccomp filters (its status names a Seccomp_filters line)."""
    try:
        return "Seccomp_filters:" in Path("/proc/self/status").read_text()
    except OSError:
        return False


@contextlib.contextmanager
def keep_size_filter() -> Iterator[int | None]:
    """A descriptor holding the filter for one bwrap (`--seccomp` reads it whole), closed after; None where no
    program is known."""
    program = keep_size_filter_program()
    if program is None:
        yield None
        return
    fd = os.memfd_create("agentlab-seccomp")
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


def bwrap_argv(
    spec: SandboxSpec,
    command: str,
    *,
    bwrap: str = "bwrap",
    shell: str = "/bin/bash",
    user_net: tuple[int, int] | None = None,
    joined: bool = False,
    seccomp: int | None = None,
    resolv_conf: Path | None = None,
) -> list[str]:
    """The argv that runs `command` with `shell -c` inside the sandbox described by `spec`, cwd = the worktree.

    With `user_net` (info fd, block fd; agents/sandbox/user_net.py) an allowed network stays a namespace of its own that
    pasta attaches to before the command runs; without it an allowed network is the host's. `joined`: bwrap is
    started inside the task's network namespace already (agents/sandbox/task_net.py) and keeps it. `seccomp`: a
    descriptor of `keep_size_filter`, passed to bwrap. `resolv_conf`: shown as `/etc/resolv.conf` (the resolver an
    allowed network may use)."""
    absolute_binds(spec)
    argv = [bwrap, "--unshare-all"]
    if seccomp is not None:
        argv += ["--seccomp", str(seccomp)]
    if user_net is not None:
        argv += ["--info-fd", str(user_net[0]), "--block-fd", str(user_net[1])]
    elif spec.network or joined:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox"]
    for system in SYSTEM_DIRS:
        path = Path(system)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), system]
        elif path.is_dir():
            argv += ["--ro-bind", system, system]
    argv += ["--ro-bind", str(etc_copy()), "/etc"]  # one bind instead of ~40: each costs ~0.7 ms of start-up
    if resolv_conf is not None:
        argv += ["--ro-bind", str(resolv_conf), "/etc/resolv.conf"]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        # bwrap's /dev is a tmpfs no `--size` reaches: its own /dev/shm is bounded like /tmp, and the rest of /dev
        # (device nodes, each a mount of its own) is read-only, so no command stores files in memory there
        "--size",
        str(spec.limits.tmp_bytes),
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        str(spec.limits.tmp_bytes),
        "--tmpfs",
        "/tmp",
        "--size",
        str(spec.limits.tmp_bytes),
        "--tmpfs",
        HOME,
    ]
    worktree = str(spec.worktree)
    for path in spec.read_only:
        if path.exists() and not _inside(path, spec.worktree):
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--bind", worktree, worktree]
    for path in spec.read_only:  # read-only paths inside the worktree (e.g. nothing today) after the rw bind
        if path.exists() and _inside(path, spec.worktree) and path != spec.worktree:
            argv += ["--ro-bind", str(path), str(path)]
    for cache in node_modules_caches(spec):
        argv += ["--size", str(spec.limits.tmp_bytes), "--tmpfs", str(cache)]
    for replacement, target in spec.masks:
        argv += ["--ro-bind", str(replacement), str(target)]
    for path in spec.writable:  # after the private /tmp: a bot folder under /tmp stays reachable
        argv += ["--bind", str(path), str(path)]
    for host, place in spec.mounts:
        argv += ["--ro-bind", str(host), place]
    argv += covers(spec)
    argv += [
        "--remount-ro",
        "/",
        "--chdir",
        worktree,
        "--",
        shell,
        "-c",
        f'{spec.limits.ulimit_script()} && exec {shell} -c "$1"',
        "sandbox",
        command,
    ]
    return argv


def covers(spec: SandboxSpec) -> list[str]:
    """bwrap's arguments that show each of `spec.hidden` lying in a folder the sandbox binds as empty: a file as
    /dev/null, a folder as an empty read-only tmpfs. Both sides are compared resolved, and a hidden path is covered
    wherever a bound folder shows it: a folder bound by a link's (or a `..`) spelling shows its target's files under
    that spelling, so the cover goes there too. A link is covered where it leads, which is where it leads inside too;
    what lies outside every bound folder is not there to cover."""
    shown = (spec.worktree, *spec.read_only, *spec.writable)
    argv: list[str] = []
    for path in spec.hidden:
        real = _resolved(path)
        if not real.exists():
            continue
        for place in _unique(_shown_at(real, folder) for folder in shown if _inside(real, _resolved(folder))):
            if real.is_dir():
                argv += ["--tmpfs", str(place), "--remount-ro", str(place)]
            else:
                argv += ["--ro-bind", "/dev/null", str(place)]
    return argv


def _shown_at(real: Path, folder: Path) -> Path:
    """Where the sandbox shows `real` (resolved), which lies in the resolved `folder`: under `folder` as bound."""
    return folder / real.relative_to(_resolved(folder))


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(path))


def absolute_binds(spec: SandboxSpec) -> None:
    """Refuse a read-only or writable path that is not absolute: bwrap runs in the task's worktree, where a relative
    one would be looked up, so a link the worker left there would choose what the sandbox shows."""
    for path in (*spec.read_only, *spec.writable):
        if not Path(path).is_absolute():
            raise ValueError(f"the sandbox binds only absolute paths: {str(path)!r} would be looked up in the worktree")


def node_modules_caches(spec: SandboxSpec) -> list[Path]:
    """The cache folders inside the read-only `node_modules` folders of `spec` that get a private writable tmpfs."""
    caches = []
    for path in spec.read_only:
        if path.name == "node_modules" and not _inside(path, spec.worktree):
            caches += [path / name for name in NODE_MODULES_CACHES if (path / name).is_dir()]
    return caches


@functools.cache
def etc_copy() -> Path:
    """A private copy of the harmless `/etc` entries (ETC_ENTRIES), made once per bot process, bound as `/etc`.

    Symlinks are copied as symlinks (e.g. /etc/alternatives -> /usr/...), so they resolve inside the sandbox."""
    folder = temp_folder("sandbox", "etc")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for entry in ETC_ENTRIES:
        source, target = Path("/etc") / entry, folder / entry
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_symlink():
                target.symlink_to(os.readlink(source))
            elif source.is_dir():
                shutil.copytree(
                    source,
                    target,
                    symlinks=True,
                    ignore_dangling_symlinks=True,
                    ignore=shutil.ignore_patterns("private", "*.key", "*.pem.key"),
                )  # /etc/ssl/private
            elif source.is_file():
                shutil.copy2(source, target)
        except OSError as err:  # unreadable or odd entries are simply not there in the sandbox
            log.debug("sandbox /etc: skipped %s: %s", source, err)
    folder.chmod(0o755)
    return folder


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


# Node's WebAssembly reserves ~10 GB of address space per instance for its trap handler: over the sandbox's
# address-space limit, wasm users (vitest/vite's es-module-lexer, ...) die "Out of memory". Where this node knows
# the flag that turns the reservation off, every sandboxed node gets it (NODE_OPTIONS; probed with the sandbox).
NODE_WASM_FLAG = "--disable-wasm-trap-handler"


PROBE_SECONDS = 10.0  # the probe's `bwrap ... true` (and node's flag check); past it, ended and taken as a failure


class SandboxProbe:
    """Whether bwrap confines commands on this machine (`bwrap ... true`), and the NODE_OPTIONS every sandboxed node
    gets: probed once per probe object. The process's owner (the bot's `Runtime`, a runner, `agentlab doctor`) makes
    one and every sandbox spec it builds carries it; a fresh object probes again (after installing bubblewrap)."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._done = False
        self._node_options: str | None = None

    async def unavailable_reason(self) -> str | None:
        """None when bwrap confines commands here, else one sentence naming the fix. Not logged here: the bot's
        start says it once (agents/runtime.py), `agentlab doctor` prints it in its format."""
        if not self._done:  # two first callers may both probe: harmless, and no lock tied to one event loop
            reason = await _probe(self)
            self._node_options = await _probe_node()
            self._reason, self._done = reason, True
        return self._reason

    @property
    def node_options(self) -> str | None:
        """NODE_OPTIONS for sandboxed node processes (NODE_WASM_FLAG where node knows it), once probed; else None."""
        return self._node_options


async def _probe_node() -> str | None:
    """NODE_WASM_FLAG when the system's node accepts it (node 20.15+): then sandboxed node processes get it."""
    node = shutil.which("node", path=SYSTEM_PATH)
    if node is None:
        return None
    try:
        process = await start_group(
            [node, NODE_WASM_FLAG, "-e", "0"],
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env=child_env(),
        )
        async with reaped_on_failure(process, group=True), asyncio.timeout(PROBE_SECONDS):
            code = await process.wait()
    except (OSError, TimeoutError):
        return None
    return NODE_WASM_FLAG if code == 0 else None


async def _probe(probe: SandboxProbe) -> str | None:
    """Run `true` in a sandbox of an empty folder (its spec carries `probe`, whose answer this is)."""
    if not sys.platform.startswith("linux"):
        return (
            f"Commands cannot be sandboxed on {sys.platform}: bubblewrap needs Linux; "
            "set SANDBOX=off to run them unconfined."
        )
    bwrap = bwrap_path()
    if bwrap is None:
        return f"Commands are refused because bubblewrap (bwrap) is not installed: {UNAVAILABLE_FIX}."
    await asyncio.to_thread(etc_copy)  # hundreds of files and links (/etc/ssl/certs), made once: not on the loop
    with tempfile.TemporaryDirectory(prefix=temp_prefix("sandbox", "probe")) as folder:
        # an empty temporary folder: no git config for the spec to mask
        argv = bwrap_argv(spec_for(SecretsFilter(), probe, Path(folder)), "true", bwrap=bwrap)
        try:
            process = await start_group(
                argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env={},
            )
            # Timed out or cancelled: bwrap's whole group is ended before its folder goes. A sandbox bwrap has not
            # let go yet is in that group; bwrap killed alone left it waiting for good.
            async with reaped_on_failure(process, group=True), asyncio.timeout(PROBE_SECONDS):
                output, _ = await process.communicate()
        except TimeoutError:
            return (
                f"Commands are refused because bubblewrap did not finish a test sandbox within {PROBE_SECONDS:g} s: "
                f"{UNAVAILABLE_FIX}."
            )
        except OSError as err:
            return f"Commands are refused because bubblewrap could not start ({err}): {UNAVAILABLE_FIX}."
    if process.returncode != 0:
        said = output.decode(errors="replace").strip().splitlines()
        detail = said[-1] if said else f"exit {process.returncode}"
        return f"Commands are refused because bubblewrap cannot create a sandbox here ({detail}): {UNAVAILABLE_FIX}."
    return None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))
