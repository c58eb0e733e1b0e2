"""The one git command of the product: every git call goes through `run_git` (or `git_text`, `stream_git`).

No terminal prompt, the bot's identity in the environment (so it works on a machine with no git identity configured),
no system or global configuration, and every repository setting that could run a program (hooks, fsmonitor,
filter/textconv/merge drivers, signing, pagers, editors, credential helpers) overridden on the command line, so nothing
a worker planted in the shared `.git` runs inside the bot's own git calls.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agents.git.ref_files import plain_bytes
from agents.sandbox.reaping import reap
from agents.sandbox.shell import child_env

log = logging.getLogger(__name__)

GIT_TIMEOUT_SECONDS = 120.0
GIT_OUTPUT_KEPT = 1_000_000  # of a call whose output goes to a file (`whole`): what is read back of each stream


class GitError(RuntimeError):
    """A git command failed; the message carries git's own error text."""


@dataclass(frozen=True)
class GitIdentity:
    """Author and committer of everything the bot commits."""

    name: str = "agentlab"
    email: str = "agentlab@localhost"


@dataclass(frozen=True)
class GitOutput:
    exit_code: int
    stdout: str
    stderr: str


# Settings that would run a program, each set to a value that runs nothing (or nothing but git itself).
_SAFE_OPTIONS: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.askPass", ""),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("core.attributesFile", "/dev/null"),
    ("sequence.editor", "true"),
    ("credential.helper", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("gc.auto", "0"),  # no background `gc --auto` outliving the call
    ("maintenance.auto", "false"),
    ("core.quotePath", "off"),  # readable non-ASCII paths
    # No transport that runs a command on this machine: a fetch or push over a local path runs the remote's
    # `uploadpack` / `receivepack` (a shell command of the repository's config), and an `ext::` URL is a command.
    # A git directory a worker made (its worktree's `.git` swapped for a folder) can name a promisor remote
    # (`extensions.partialClone`) and a HEAD it lacks: any reading git call would fetch it lazily and run that
    # command here. The command line wins over the repository's own `protocol.*.allow`; the bot's own fetches and
    # pushes between machines allow local paths again (agents/git/remote.py: the owner's checkout, a runner's clone).
    ("protocol.file.allow", "never"),
    ("protocol.ext.allow", "never"),
)


GIT_OPTIONS: tuple[str, ...] = tuple(arg for key, value in _SAFE_OPTIONS for arg in ("-c", f"{key}={value}"))


# Per-name drivers a repository (or an attribute file) can name: <section>.<name>.<key> → the harmless value.
_DRIVER_OVERRIDES: dict[str, dict[str, str]] = {
    "filter": {"clean": "", "smudge": "", "process": "", "required": "false"},
    "diff": {"textconv": ""},  # diff.<name>.command is ignored through --no-ext-diff
    "merge": {"driver": "git merge-file --marker-size=%L %A %O %B"},  # the built-in three-way merge, as a driver
}


_NO_EXTERNAL_DIFF = ("--no-ext-diff", "--no-textconv")
# A worker can make any folder of its worktree a repository of its own, with its own config (filters, fsmonitor)
# and a `.gitmodules` entry of its own: once the bot stages it (a gitlink), a `git status` or `git diff` of the
# worktree would run `git status` inside it to tell whether it is dirty, and that child reads the nested config,
# whose drivers `_driver_options` never saw. `dirty` still shows a submodule whose commit moved, and looks no further.
# Only the command-line option wins over a `submodule.<name>.ignore` the worker writes into `.gitmodules`.
_NO_SUBMODULE_LOOK = ("--ignore-submodules=dirty",)

# Options put right after the subcommand they belong to.
_SUBCOMMAND_OPTIONS: dict[str, tuple[str, ...]] = {
    "diff": (*_NO_EXTERNAL_DIFF, *_NO_SUBMODULE_LOOK),
    "log": _NO_EXTERNAL_DIFF,
    "show": _NO_EXTERNAL_DIFF,
    "status": _NO_SUBMODULE_LOOK,
}


def git_env(identity: GitIdentity | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """No secrets, no inherited GIT_* variables, no system or global config, no prompts or editors, the bot's
    identity."""
    env = {key: value for key, value in child_env().items() if not key.startswith("GIT_")}
    env.pop("SSH_ASKPASS", None)
    identity = identity or GitIdentity()
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_EDITOR="true",
        GIT_SEQUENCE_EDITOR="true",
        GIT_PAGER="cat",
        GIT_AUTHOR_NAME=identity.name,
        GIT_AUTHOR_EMAIL=identity.email,
        GIT_COMMITTER_NAME=identity.name,
        GIT_COMMITTER_EMAIL=identity.email,
        LC_ALL="C",
        LANGUAGE="C",
    )
    if extra:
        env.update(extra)
    return env


async def _exec_git(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdin: bytes | None = None,
    whole: bool = False,
    held: int | None = None,
) -> GitOutput:
    if whole:
        return await _exec_git_whole(argv, cwd, env, timeout, held)
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except (FileNotFoundError, NotADirectoryError, PermissionError) as err:
        raise GitError(f"cannot run git in {cwd}: {err.strerror or err}") from None
    try:
        async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it can swallow a cancellation racing git's exit
            stdout, stderr = await proc.communicate(stdin)
    except (TimeoutError, asyncio.CancelledError) as err:
        await reap(proc)
        if isinstance(err, asyncio.CancelledError):
            raise
        raise GitError(f"git {_subcommand(argv)} timed out after {timeout:g} s") from None
    assert proc.returncode is not None
    return GitOutput(
        proc.returncode, stdout.decode("utf-8", errors="replace"), stderr.decode("utf-8", errors="replace")
    )


async def _exec_git_whole(
    argv: list[str], cwd: Path, env: Mapping[str, str], timeout: float, held: int | None = None
) -> GitOutput:
    """A git call that must end whole once started (a merge into the owner's checkout): its output goes to files,
    not pipes, so a bot killed meanwhile (SIGKILL, the machine's OOM killer) leaves git writing to a file rather than
    dying of SIGPIPE on its first line ("Auto-merging …") with the merged files uncommitted on the owner's HEAD; and a
    cancelled caller (the bot shutting down) leaves it to finish rather than killing it halfway. Only a timeout ends
    it early. `held`: a descriptor git keeps open as long as it runs (a lock the caller took: merge.merge_lock), so a
    bot started after a kill can tell when a merge its predecessor began has ended."""
    kept = (held,) if held is not None else ()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = await asyncio.create_subprocess_exec(
                "git",
                *argv,
                cwd=str(cwd),
                env=dict(env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                pass_fds=kept,
            )
        except (FileNotFoundError, NotADirectoryError, PermissionError) as error:
            raise GitError(f"cannot run git in {cwd}: {error.strerror or error}") from None
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(proc.wait())  # a cancellation leaves git to finish; asyncio reaps it then
        except TimeoutError:
            await reap(proc)
            raise GitError(f"git {_subcommand(argv)} timed out after {timeout:g} s") from None
        assert proc.returncode is not None
        out.seek(0)
        err.seek(0)
        return GitOutput(
            proc.returncode,
            out.read(GIT_OUTPUT_KEPT).decode("utf-8", errors="replace"),
            err.read(GIT_OUTPUT_KEPT).decode("utf-8", errors="replace"),
        )


def _subcommand_index(argv: list[str]) -> int:
    """Where the subcommand is in `argv` (git's own options before it skipped); len(argv) when there is none."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-c", "-C") else 1
    return min(i, len(argv))


def _subcommand(argv: list[str]) -> str:
    i = _subcommand_index(argv)
    return argv[i] if i < len(argv) else ""


_DRIVER_CACHE_SIZE = 256
# the local configuration's bytes -> its driver overrides. Process-wide: a pure function of those bytes (the key)
_driver_cache: dict[bytes, list[str]] = {}


def _named_git_dir(cwd: Path) -> Path | None:
    """The git directory a checkout's `.git` file (or link) names, read once; None when `cwd` holds a `.git` folder
    or none at all. The call then tells git that folder (GIT_DIR), so git never reads `.git` again: a worker that
    flips its worktree's `.git` between the bot's read and git's own (to a folder whose config names a filter the
    bot did not see, or a history of its own) changes nothing of a call already prepared. A `.git` naming a folder
    inside the checkout itself is the worker's own, never the bot's: refused."""
    dotgit = cwd / ".git"
    try:
        if dotgit.is_symlink():
            gitdir = dotgit.resolve(strict=True)
        elif dotgit.is_dir() or not os.path.lexists(dotgit):
            return None
        else:
            pointer = plain_bytes(dotgit)
            if pointer is None or not pointer.startswith(b"gitdir: "):
                raise GitError(f"{dotgit} is not a git file the bot can read")
            gitdir = (cwd / os.fsdecode(pointer[len(b"gitdir: ") :].strip())).resolve(strict=True)
        top = cwd.resolve(strict=True)
    except (OSError, RuntimeError, ValueError) as err:
        raise GitError(f"{dotgit} names no git directory the bot can read ({err})") from None
    if gitdir == top or top in gitdir.parents:
        raise GitError(f"{dotgit} names a git directory inside the checkout itself: not the bot's")
    return gitdir


def _local_config(cwd: Path, named: Path | None) -> bytes | None:
    """The bytes of every configuration file git reads in `cwd` (`git_env` leaves out the system and global ones),
    with the git directories they were found in; None when that cannot be told without git: `cwd` is not the top of
    a checkout or a linked worktree, or the configuration includes other files. `named`: the git directory the
    checkout's `.git` file names, as `_named_git_dir` read it (the one git is told).

    Read on the event loop before every git call, from files a task's worker writes (any folder of the worktree
    that its `.git` names): each is read as a plain file only (`plain_bytes`: never through a link at the name,
    never waiting on a FIFO, never past a size), else None and git is asked."""
    dotgit = cwd / ".git"
    try:
        if named is None and dotgit.is_dir():
            gitdir = common = dotgit
        elif named is None:
            return None
        else:
            gitdir = named
            if os.path.lexists(gitdir / "commondir"):
                if (commondir := plain_bytes(gitdir / "commondir")) is None:
                    return None
                common = gitdir / os.fsdecode(commondir.strip())
            else:
                common = gitdir
        parts = [str(gitdir).encode(), str(common).encode()]
        for path in (common / "config", gitdir / "config.worktree"):
            data = plain_bytes(path) if os.path.lexists(path) else b""
            if data is None:
                return None
            parts.append(data)
    except (OSError, ValueError):
        return None
    blob = b"\0".join(parts)
    return None if b"include" in blob.lower() else blob


# A key of a filter, diff or merge section spells the section's name out in the file: `[filter "x"]`, `[Diff.x]`
# (section names are letters, digits, `-` and `.`, case-insensitive, never escaped). Configuration files holding none
# of these words name no driver at all.
_DRIVER_SECTIONS = (b"filter", b"diff", b"merge")


def _names_no_driver(config: bytes) -> bool:
    """True when the configuration files in `config` (as `_local_config` reads them) cannot name a driver."""
    files = config.split(b"\0", 2)[2:]  # the two git directories' paths first: they are not configuration
    lowered = b"".join(files).lower()
    return not any(word in lowered for word in _DRIVER_SECTIONS)


async def _driver_options(cwd: Path, env: Mapping[str, str], named: Path | None) -> list[str]:
    """`-c` overrides for every filter, diff and merge driver the effective configuration (includes too) names.

    Asking git costs a process per git call, so git is not asked where the configuration files (a few hundred bytes,
    read on every call) do not even hold the word `filter`, `diff` or `merge`, and otherwise the answer is kept per
    configuration: keyed by the bytes of the configuration files themselves, it is asked again whenever a byte
    changes. A configuration with includes is asked every time."""
    config = _local_config(cwd, named)
    if config is not None and _names_no_driver(config):
        return []
    if config is not None and (known := _driver_cache.get(config)) is not None:
        return list(known)
    listed = await _exec_git(
        [*GIT_OPTIONS, "config", "--includes", "-z", "--name-only", "--get-regexp", r"^(filter|diff|merge)\."],
        cwd,
        env,
        GIT_TIMEOUT_SECONDS,
    )
    options: list[str] = []
    names: set[tuple[str, str]] = set()
    for key in split_nul(listed.stdout):
        section, _, rest = key.partition(".")
        name, dot, _ = rest.rpartition(".")
        if dot and name:
            names.add((section, name))
    for section, name in sorted(names):
        for key, value in _DRIVER_OVERRIDES.get(section.lower(), {}).items():
            options += ["-c", f"{section}.{name}.{key}={value}"]
    if config is not None and listed.exit_code in (0, 1):  # 1: no such key, nothing to override
        if len(_driver_cache) >= _DRIVER_CACHE_SIZE:
            _driver_cache.clear()
        _driver_cache[config] = list(options)
    return options


async def _prepared(
    args: tuple[str, ...], cwd: Path, identity: GitIdentity | None, extra_env: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    env = git_env(identity, extra_env)
    named = _named_git_dir(Path(cwd))
    if named is not None:  # git reads this folder, not `.git` again (see _named_git_dir)
        env.update(GIT_DIR=str(named), GIT_WORK_TREE=str(cwd))
    at = _subcommand_index(list(args))  # a caller's own `-c key=value` may come before the subcommand
    if at < len(args) and (extra := _SUBCOMMAND_OPTIONS.get(args[at])):
        args = (*args[: at + 1], *extra, *args[at + 1 :])
    return [*GIT_OPTIONS, *await _driver_options(Path(cwd), env, named), *args], env


async def run_git(
    *args: str,
    cwd: Path,
    identity: GitIdentity | None = None,
    timeout: float = GIT_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    whole: bool = False,
    held: int | None = None,
) -> GitOutput:
    """Run `git <args>` in `cwd`, hardened as described above; its exit code and output, whatever the exit code.

    The one git command of the product: repo_map and doctor use it too. `stdin` is fed to git's standard input.
    `whole`: a call that must finish once started, whatever becomes of the bot (`_exec_git_whole`; no `stdin`), and
    `held` a descriptor it keeps open while it runs.
    A checkout whose `.git` the bot refuses to follow (`_named_git_dir`) answers as git does where there is no
    repository: exit code 128 and why.
    """
    try:
        argv, env = await _prepared(args, Path(cwd), identity, extra_env)
    except GitError as err:
        return GitOutput(128, "", f"fatal: {err}")
    return await _exec_git(argv, Path(cwd), env, timeout, stdin, whole=whole, held=held)


async def stream_git(
    *args: str,
    cwd: Path,
    out: BinaryIO,
    limit: int,
    timeout: float = GIT_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[int, bool]:
    """Copy the stdout of `git <args>` (hardened like run_git) into `out` in chunks, at most `limit` bytes.

    Returns (bytes written, cut short); git is stopped as soon as the limit is reached, so nothing bigger than one
    chunk is ever held in memory. Raises GitError for a checkout whose `.git` the bot refuses to follow.
    """
    argv, env = await _prepared(args, Path(cwd), None, extra_env)
    proc = await asyncio.create_subprocess_exec(
        "git",
        *argv,
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    stdout = proc.stdout
    written, cut = 0, False

    async def copy() -> None:
        nonlocal written, cut
        while chunk := await stdout.read(65_536):
            room = limit - written
            if len(chunk) > room:
                chunk, cut = chunk[:room], True
            out.write(chunk)
            written += len(chunk)
            if cut:
                return

    try:
        async with asyncio.timeout(timeout):
            await copy()
    except TimeoutError:
        cut = True
    finally:
        await reap(proc)
    return written, cut


async def git_text(
    *args: str,
    cwd: Path,
    identity: GitIdentity | None = None,
    timeout: float = GIT_TIMEOUT_SECONDS,
    extra_env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
) -> str:
    """Run `git <args>` in `cwd`; return stdout, or raise GitError with git's stderr on a non-zero exit."""
    result = await run_git(*args, cwd=cwd, identity=identity, timeout=timeout, extra_env=extra_env, stdin=stdin)
    if result.exit_code != 0:
        detail = result.stderr.strip() or result.stdout.strip() or f"exit code {result.exit_code}"
        raise GitError(f"git {' '.join(args)}: {detail}")
    return result.stdout


async def git_succeeds(*args: str, cwd: Path) -> bool:
    return (await run_git(*args, cwd=cwd)).exit_code == 0


def split_nul(text: str) -> list[str]:
    return [p for p in text.split("\0") if p]


def nul_joined(items: list[str]) -> bytes:
    return b"".join(item.encode("utf-8", "surrogateescape") + b"\0" for item in items)


async def object_sizes(
    cwd: Path, names: list[str], fmt: str = "%(objectname) %(objecttype) %(objectsize)"
) -> dict[str, tuple[str, int]]:
    """name → (type, size) through one `git cat-file --batch-check` (missing objects are left out)."""
    if not names:
        return {}
    env = git_env(None)
    proc = await asyncio.create_subprocess_exec(
        "git",
        *GIT_OPTIONS,
        "cat-file",
        f"--batch-check={fmt}",
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(GIT_TIMEOUT_SECONDS):
            out, _ = await proc.communicate("\n".join(names).encode() + b"\n")
    except (TimeoutError, asyncio.CancelledError):
        await reap(proc)
        raise
    found: dict[str, tuple[str, int]] = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].isdigit():
            found[parts[0]] = (parts[1], int(parts[2]))
    return found
