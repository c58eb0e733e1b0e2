"""Questions about a repository and its commits: is it one, its branch, a rev, a file at a commit, an export."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import stat
from pathlib import Path

from agents.git.command import GitError, GitIdentity, git_succeeds, git_text, run_git, split_nul
from agents.git.ref_files import (
    branch_exists_from_files,
    git_dirs,
    head_branch_from_files,
    head_commit_from_files,
    plain_bytes,
)
from agents.git.trees import known_absent

_NOT_A_REPOSITORY = "not a git repository"


_COMMON_DIRS_KEPT = 256
# checkout → (its `.git` folder's identity, answer). Process-wide: a pure function of the file system, each answer kept
# with the identity it rested on and used only while that identity holds
_common_dirs: dict[Path, tuple[tuple[int, int, int], Path]] = {}


def _git_folder_identity(repo: Path) -> tuple[int, int, int] | None:
    """(device, inode, owner) of `repo/.git` when it is a real folder (a main checkout's top); None otherwise."""
    try:
        info = (repo / ".git").lstat()
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_uid) if stat.S_ISDIR(info.st_mode) else None


async def git_common_dir(repo: Path) -> Path:
    """The repository's shared git directory (`.git` of the main checkout), absolute.

    A task asks this several times of the same checkout; where git answered `repo/.git` (a main checkout's top) the
    answer is kept for as long as that `.git` is the very same folder (device, inode and owner unchanged), so git is
    asked again only for another checkout, a linked worktree, a folder below the top, or a `.git` put in its place."""
    repo = Path(repo)
    key = repo.resolve()
    identity = _git_folder_identity(key)
    known = _common_dirs.get(key)
    if identity is not None and known is not None and known[0] == identity:
        return known[1]
    if identity is not None and (found := _main_git_folder(key)) is not None:
        return found
    out = (await git_text("rev-parse", "--git-common-dir", cwd=repo)).strip()
    common = (repo / out).resolve()
    if identity is not None and common == key / ".git" and identity == _git_folder_identity(key):
        if len(_common_dirs) >= _COMMON_DIRS_KEPT:
            _common_dirs.clear()
        _common_dirs[key] = (identity, common)
    return common


def _main_git_folder(checkout: Path) -> Path | None:
    """`checkout/.git` where it is a plain git folder of the bot's user (`ref_files.git_dirs`) that git takes as the
    repository of `checkout` (a HEAD, `refs/`, and no `commondir` pointing elsewhere): what `git rev-parse
    --git-common-dir` answers there; None where git must be asked."""
    dot_git = checkout / ".git"
    dirs = git_dirs(checkout)
    if dirs is None or dirs != (dot_git, dot_git) or os.path.lexists(dot_git / "commondir"):
        return None
    head = plain_bytes(dot_git / "HEAD")
    if head is None or not (head.startswith(b"ref: refs/") or _COMMIT_HEX.fullmatch(head.strip())):
        return None
    return dot_git if (dot_git / "refs").is_dir() and not (dot_git / "refs").is_symlink() else None


_COMMIT_HEX = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?")


def _toplevel_from_files(path: Path) -> Path | None:
    """What `git rev-parse --show-toplevel` answers in `path` where `path` is plainly the top of a main checkout: a
    `.git` folder git takes as the repository (`_main_git_folder`) whose configuration names no other work tree, is
    not bare and includes no other file. Git answers the real path, and so does this; None where git must be asked
    (a folder below the top included)."""
    try:
        real = Path(path).resolve()
    except OSError:
        return None
    config = plain_bytes(real / ".git" / "config") if _main_git_folder(real) is not None else None
    if config is None:
        return None
    lowered = config.lower()
    if b"include" in lowered or b"worktree" in lowered:
        return None
    for line in lowered.splitlines():
        if b"bare" in line and line.replace(b" ", b"").replace(b"\t", b"").strip() != b"bare=false":
            return None
    return real


_TOPLEVELS_KEPT = 256
# a path → (what git's answer rested on, the answer). Process-wide: a pure function of the file system, used only
# while what it rested on holds
_toplevels: dict[str, tuple[tuple[object, ...], Path]] = {}


def _checkout_identity(path: Path) -> tuple[object, ...] | None:
    """What `git rev-parse --show-toplevel` in `path` rests on, where `path` is a main checkout's top: the real path,
    the `.git` folder (device, inode, owner), the owner of `path`, the configuration's bytes (core.worktree, say);
    None otherwise (then git is asked every time)."""
    try:
        real = Path(path).resolve()
        dot_git = (real / ".git").lstat()
        if not stat.S_ISDIR(dot_git.st_mode) or os.path.lexists(real / ".git" / "commondir"):
            return None
        config = plain_bytes(real / ".git" / "config")
        if config is None or b"include" in config.lower():
            return None
        owner = real.lstat().st_uid
    except OSError:
        return None
    return (str(real), dot_git.st_dev, dot_git.st_ino, dot_git.st_uid, owner, hashlib.sha256(config).digest())


def _known_toplevel(path: Path) -> Path | None:
    known = _toplevels.get(str(path))
    return known[1] if known is not None and known[0] == _checkout_identity(path) else None


def _remember_toplevel(path: Path, identity: tuple[object, ...] | None, top: Path) -> None:
    if identity is not None and identity == _checkout_identity(path):  # nothing moved while git answered
        if len(_toplevels) >= _TOPLEVELS_KEPT:
            _toplevels.clear()
        _toplevels[str(path)] = (identity, top)


async def toplevel(path: Path) -> Path | None:
    """The work tree containing `path`, or None when `path` is not inside one (other failures raise).

    A plain main checkout's top is told from its files (`_toplevel_from_files`); git's answer for any other main
    checkout's top is kept while what it rests on stays the same (`_checkout_identity`): a task asks it more than
    once."""
    if (known := _known_toplevel(path) or _toplevel_from_files(path)) is not None:
        return known
    identity = _checkout_identity(path)
    result = await run_git("rev-parse", "--show-toplevel", cwd=path)
    if result.exit_code == 0:
        top = Path(result.stdout.strip())
        _remember_toplevel(path, identity, top)
        return top
    if _NOT_A_REPOSITORY in result.stderr:
        return None
    raise GitError(f"git rev-parse in {path}: {result.stderr.strip()}")


async def has_commits(repo: Path) -> bool:
    """Whether HEAD names a commit; read from the git files where that commit is stored loose, asked of git
    otherwise."""
    if head_commit_from_files(Path(repo)) is not None:
        return True
    return await git_succeeds("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=repo)


async def _toplevel_and_commits(path: Path) -> tuple[Path | None, bool]:
    """`toplevel(path)` and, when there is one, `has_commits` of it, asked of git in one call (none where both
    are known without git)."""
    known = _known_toplevel(path) or _toplevel_from_files(path)
    if known is not None and head_commit_from_files(known) is not None:
        return known, True
    identity = _checkout_identity(path)
    result = await run_git("rev-parse", "--show-toplevel", "--verify", "--quiet", "HEAD^{commit}", cwd=path)
    if result.exit_code in (0, 1) and result.stdout.strip():
        if result.exit_code == 0:  # the top, then the commit
            top, committed = Path(result.stdout.rstrip("\n").rpartition("\n")[0].strip()), True
        else:  # the top printed; `--verify --quiet` found no commit
            top, committed = Path(result.stdout.strip()), False
        _remember_toplevel(path, identity, top)
        return top, committed
    if _NOT_A_REPOSITORY in result.stderr:
        return None, False
    asked = await toplevel(path)  # any other failure: asked on its own, which raises git's own error
    return asked, asked is not None and await has_commits(asked)


async def ensure_repository(path: Path, identity: GitIdentity | None = None) -> bool:
    """Make sure `path` is in a git work tree with at least one commit; True when this initialised a new repository.

    A folder outside any repository gets `git init -b main` and an initial commit of what is there (respecting any
    .gitignore). So does a folder inside another repository that tracks nothing in it (WORKSPACE_PATH in a home
    folder kept in git): a task there would otherwise check out that whole repository. One whose files that
    repository tracks is refused. A repository without commits gets an initial commit of its files (empty if there
    are none), so that task branches can be made from it.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    top, committed = await _toplevel_and_commits(path)
    if top is not None and not same_path(top, path):
        # Made its own repository, as a plain folder is, only where the enclosing one has none of its files: over
        # files it tracks, a repository of their own would be a second history of them, which is the owner's call.
        if await git_text("ls-files", "-z", "--", ".", cwd=path):
            raise GitError(
                f"{path} is no git repository of its own: its files belong to the repository at {top}, and a task "
                "there would check out all of that. Make it a repository of its own (git init) or work in that one."
            )
        top, committed = None, False
    initialised = top is None
    if top is None:
        await git_text("init", "-q", "-b", "main", cwd=path)
        top = path
    if not committed:
        await git_text("add", "-A", cwd=top)
        await git_text(
            "commit",
            "-q",
            "--allow-empty",
            "--no-verify",
            "-m",
            "Initial commit (agentlab)",
            cwd=top,
            identity=identity,
        )
    return initialised


async def current_branch(repo: Path) -> str:
    """The checked-out branch name, or the commit sha when HEAD is detached; read from the git files where they are
    plain (`ref_files.head_branch_from_files`), asked of git otherwise."""
    if (known := head_branch_from_files(Path(repo))) is not None:
        return known
    result = await run_git("symbolic-ref", "--short", "-q", "HEAD", cwd=repo)
    if result.exit_code == 0 and result.stdout.strip():
        return result.stdout.strip()
    return (await git_text("rev-parse", "HEAD", cwd=repo)).strip()


async def branch_exists(repo: Path, branch: str) -> bool:
    """Whether `repo` has the branch `branch`; read from the ref files where they are plain, asked of git
    otherwise."""
    if (known := branch_exists_from_files(Path(repo), branch)) is not None:
        return known
    return await git_succeeds("show-ref", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo)


async def rev_parse(repo: Path, rev: str) -> str:
    if rev == "HEAD" and (head := head_commit_from_files(Path(repo))) is not None:
        return head  # a loose commit HEAD names, read from the git files
    return (await git_text("rev-parse", "--verify", f"{rev}^{{commit}}", cwd=repo)).strip()


def same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


async def config_get(repo: Path, key: str) -> str | None:
    result = await run_git("config", "--local", "--get", key, cwd=repo)
    if result.exit_code != 0:
        return None
    return result.stdout.strip() or None


async def file_at(repo: Path, commit: str, path: str) -> str | None:
    """The text of `path` at `commit`, or None when it is not there (known without git where the commit's files
    were listed already: `trees.known_absent`)."""
    if known_absent(Path(repo), commit, path):
        return None
    result = await run_git("show", f"{commit}:{path}", cwd=repo)
    return result.stdout if result.exit_code == 0 else None


async def is_tracked(repo: Path, path: str) -> bool:
    return await git_succeeds("ls-files", "--error-unmatch", "--", path, cwd=repo)


_CHANGES_KEPT = 64
# (checkout, base, head) → its changes. Process-wide: what changed between two commits never changes
_known_changes: dict[tuple[str, str, str], list[tuple[str, str]]] = {}


def remember_changes(path: Path, base_commit: str, head: str, changes: list[tuple[str, str]]) -> None:
    """Keep what git said changed between two commits in a checkout (`commit_all` has just asked), for
    `changes_between`: commits do not change, so neither does their diff."""
    if len(_known_changes) >= _CHANGES_KEPT:
        del _known_changes[next(iter(_known_changes))]  # the oldest
    _known_changes[(str(Path(path).resolve()), base_commit, head)] = list(changes)


async def commits_by_others(repo: Path, base_commit: str, branch: str, email: str) -> list[str]:
    """The commits on `branch` since `base_commit` whose committer is not `email` (the bot's own commits carry it):
    `<short sha> by <name>`, newest first; none when the branch is gone."""
    if not await branch_exists(repo, branch):
        return []
    listed = await git_text("log", "--format=%h%x00%ce%x00%cn", f"{base_commit}..refs/heads/{branch}", cwd=repo)
    found = []
    for line in listed.splitlines():
        sha, committer, name = (line.split("\0") + ["", ""])[:3]
        if committer.strip().lower() != email.strip().lower():
            found.append(f"{sha} by {name}")
    return found


async def changes_between(checkout: Path, repo: Path, base_commit: str, head: str) -> list[tuple[str, str]]:
    """(status letter, path) of every file changed between `base_commit` and `head`, the task's commit whose checkout
    is `checkout`: as `remember_changes` kept it, else asked of the owner's repository `repo` (never through the
    checkout's `.git`, which its worker may point elsewhere)."""
    if (known := _known_changes.get((str(Path(checkout).resolve()), base_commit, head))) is not None:
        return list(known)
    text = await git_text("diff", "--name-status", "--no-renames", "-z", f"{base_commit}..{head}", cwd=repo)
    fields = split_nul(text)
    return [(fields[i][:1], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]


# What `git archive` would otherwise take from the commit's own `.gitattributes`: `export-subst` rewrites a file's
# `$Format:…$` (code that is one thing committed and another in the copy), `export-ignore` leaves files out, `ident`,
# `text`/`eol`, `working-tree-encoding` and filters change bytes. A copy the tests judge must hold the commit's bytes,
# whatever the commit (a worker's) says: a throw-away git directory's `info/attributes`, which wins over every
# `.gitattributes`, unsets them all.
RAW_ATTRIBUTES = b"* -export-subst -export-ignore -ident -text -eol -filter -working-tree-encoding\n"


async def export_tree(repo: Path, commit: str, target: Path) -> None:
    """Write the files of `commit` into the empty folder `target` (no git metadata: a throw-away copy), byte for byte
    as committed (`RAW_ATTRIBUTES`)."""
    target.mkdir(parents=True, exist_ok=True)
    archive = target.parent / f"{target.name}.tar"
    exporter = target.parent / f"{target.name}.git"
    try:
        await asyncio.to_thread(_raw_git_dir, exporter, await git_common_dir(repo) / "objects")
        await git_text(
            "archive", "--format=tar", "-o", str(archive), commit, cwd=repo, extra_env={"GIT_DIR": str(exporter)}
        )
        await asyncio.to_thread(_untar, archive, target)
    finally:
        archive.unlink(missing_ok=True)
        await asyncio.to_thread(shutil.rmtree, exporter, True)


def _raw_git_dir(folder: Path, objects: Path) -> None:
    """A bare git directory that reads `objects` (an alternate: nothing copied) with `RAW_ATTRIBUTES`."""
    (folder / "objects" / "info").mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "info").mkdir()
    (folder / "HEAD").write_bytes(b"ref: refs/heads/none\n")
    (folder / "objects" / "info" / "alternates").write_bytes(os.fsencode(objects) + b"\n")
    (folder / "info" / "attributes").write_bytes(RAW_ATTRIBUTES)


def _untar(archive: Path, target: Path) -> None:
    import tarfile

    def safe(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        try:
            return tarfile.data_filter(member, path)
        except tarfile.FilterError:  # a link out of the copy (absolute, or through `..`): left out, never followed
            return None

    with tarfile.open(archive) as tar:
        tar.extractall(target, filter=safe)


async def uncommitted_files(repo: Path) -> list[str]:
    """The checkout's files that no commit holds: untracked ones, then ignored ones (an ignored folder as one
    `folder/` entry)."""
    untracked = split_nul(await git_text("ls-files", "-z", "-o", "--exclude-standard", cwd=repo))
    ignored = split_nul(await git_text("ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory", cwd=repo))
    return untracked + ignored
