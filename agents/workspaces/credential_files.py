"""The values of a workspace's credential files join the output filter before a task starts.

`read_file` refuses `.npmrc`, `.envrc`, `.env.production` (workspaces.is_secret_file), but a shell prints them
(`cat .npmrc`, `git show HEAD:.npmrc`). So the bot reads them first, itself: the deny-listed files committed at HEAD
and those in the checkout's working tree, and adds the secret-looking values they assign to the output filter (the
task's `SecretScope`); whatever a command prints afterwards shows them as `«masked»`. The history of every ref
is searched too (`git log -p --all` limited to those names), for HISTORY_SECONDS at most.

Not covered: history beyond that time on a very large repository, and a value re-encoded by the command.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from pathlib import Path

from agents.core.secrets_filter import SecretScope, SecretsFilter, credential_values
from agents.git.command import GitError, run_git
from agents.git.ref_files import RefSources, checkout_ref_sources, head_from_files
from agents.git.trees import tree_entries
from agents.workspaces.file_walk import walk_tree
from agents.workspaces.folders import is_secret_file

log = logging.getLogger(__name__)

MAX_FILES = 200
MAX_BYTES = 256 * 1024  # per file: a credential file is small; a larger one is read only this far
HISTORY_SECONDS = 10.0
# workspaces.is_secret_file as git pathspecs (for the history search)
SECRET_PATHSPECS = tuple(
    f":(glob,icase)**/{name}"
    for name in (
        ".env",
        ".env.*",
        ".envrc",
        ".netrc",
        "_netrc",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        ".pgpass",
        "*.pem",
        "*.key",
        "id_*",
        "credentials*.json",
    )
)


async def mask_credential_files(checkout: Path, into: SecretsFilter | SecretScope) -> int:
    """Read the checkout's deny-listed files (at HEAD and on disk) and add their values to `into`: masked from now on
    (while it is open, for a task's scope; for the process's life, for the filter itself); how many values were
    found. Failures are logged, never raised: the filter's token shapes still apply."""
    values: list[str] = []
    try:
        values += await _at_head(Path(checkout))
    except (GitError, OSError) as err:
        log.info("credential files at HEAD of %s not read: %s", checkout, err)
    try:
        values += await _history_once(Path(checkout))
    except (GitError, OSError) as err:  # a timeout on a huge history: HEAD and the disk still count
        log.info("credential files in the history of %s not read: %s", checkout, err)
    values += await asyncio.to_thread(_on_disk, Path(checkout))
    into.add(values)
    return len(set(values))


# a commit → the values its credential files hold. Process-wide: a commit's files never change (the values are
# added to each task's own scope from here, not kept masked by this cache)
_commit_values: dict[str, list[str]] = {}
COMMITS_KEPT = 64


async def _at_head(checkout: Path) -> list[str]:
    """The values the credential files committed at HEAD assign; read once per commit where HEAD can be read from
    the git files (the next task from the same commit reads none)."""
    head = head_from_files(checkout)
    if head is not None and (known := _commit_values.get(head)) is not None:
        return list(known)
    rev = head or "HEAD"
    listing = await tree_entries(checkout, rev)  # the commit's listing, kept for what the task asks of it next
    if listing is None:
        return []
    names = [e.path for e in listing if is_secret_file(e.path.rsplit("/", 1)[-1])][:MAX_FILES]
    values: list[str] = []
    complete = True
    for name in names:
        shown = await run_git("cat-file", "blob", f"{rev}:{name}", cwd=checkout)
        if shown.exit_code == 0:
            values += credential_values(shown.stdout[:MAX_BYTES])
        complete = complete and shown.exit_code == 0
    if head is not None and complete:
        while len(_commit_values) >= COMMITS_KEPT:
            del _commit_values[next(iter(_commit_values))]  # the oldest
        _commit_values[head] = list(values)
    return values


# the refs' tips -> the values their history holds (one search per state). Process-wide: a pure function of the tips
_history_seen: dict[str, list[str]] = {}
HISTORY_STATES = 64  # the latest states of refs kept, so the cache does not grow with every commit


async def _history_once(checkout: Path) -> list[str]:
    """`_in_history`, searched once per state of the repository's refs: the next task on the same repository with no
    new commits pays for reading the ref files (or, where they are not plain, `git for-each-ref`), not for a walk of
    the whole history. The same set of tips has the same history, whatever the refs are named (a new task branch at
    an existing commit adds nothing), whatever repository they are in."""
    sources = checkout_ref_sources(checkout)
    if sources is not None:  # the set of tips (what a walk of every ref starts from), not the names
        key = "tips:" + hashlib.sha256(b"\n".join(_tips(sources))).hexdigest()
    else:
        listed = await run_git("for-each-ref", "--format=%(objectname)", cwd=checkout)
        if listed.exit_code != 0:
            return await _in_history(checkout)
        key = hashlib.sha256(listed.stdout.encode()).hexdigest()
    if key not in _history_seen:
        _history_seen[key] = await _in_history(checkout)
        while len(_history_seen) > HISTORY_STATES:
            del _history_seen[next(iter(_history_seen))]  # the oldest state
    return _history_seen[key]


def _tips(sources: RefSources) -> list[bytes]:
    """Every value a loose ref or a line of `packed-refs` holds (a commit id, or a symbolic ref's target, which is
    among them anyway), sorted, each once: equal sets, equal histories."""
    tips: set[bytes] = set()
    for name, data in sources:
        if name.startswith(("refs/", "own:refs/")) and not name.endswith("/"):
            tips.add(data.strip())
        elif name == "packed-refs":
            tips.update(line.split(b" ", 1)[0].lstrip(b"^") for line in data.splitlines() if not line.startswith(b"#"))
    return sorted(tips)


async def _in_history(checkout: Path) -> list[str]:
    """Values ever added to a credential file on any ref (what `git log -p --all` would print)."""
    shown = await run_git(
        "log", "--all", "-p", "--no-color", "--format=", "--", *SECRET_PATHSPECS, cwd=checkout, timeout=HISTORY_SECONDS
    )
    if shown.exit_code != 0:
        return []
    added = [line[1:] for line in shown.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return credential_values("\n".join(added))


def credential_files_on_disk(checkout: Path) -> list[Path]:
    """The deny-listed files (is_secret_file) in the checkout's working tree, the first MAX_FILES of them."""
    found: list[Path] = []
    for folder, _dirs, files in walk_tree(checkout):
        found += [folder / name for name in files if is_secret_file(name)]
        if len(found) >= MAX_FILES:
            break
    return found[:MAX_FILES]


def _on_disk(checkout: Path) -> list[str]:
    values: list[str] = []
    for path in credential_files_on_disk(checkout):
        try:  # never through a link: O_NOFOLLOW
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(MAX_BYTES)
        except OSError:
            continue
        values += credential_values(data.decode("utf-8", errors="replace"))
    return values
