"""The files git keeps a repository's refs in, read without running git: where that is plain and exact.

A git process costs milliseconds of CPU; the repository guard and the credential scan ask "did any ref move?" many
times a task, and the repo map asks which commit a checkout is at. Those answers rest on a handful of small files:
the loose refs under `refs/`, `packed-refs`, `HEAD`, the configuration. `ref_sources` reads their bytes (equal
bytes in the same files are the same refs, whatever the file times say); `head_from_files` resolves HEAD where it
is a plain branch or commit. Whatever is not plain (a link, a reftable repository, a symbolic ref chain, a `.git`
that is neither a folder nor a `gitdir:` file, another owner, anything too big) gives None, and the caller asks
git as before.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import zlib
from pathlib import Path

RefSources = tuple[tuple[str, bytes], ...]
_REF_SOURCE_FILES = ("packed-refs", "config", "config.worktree", "commondir")  # besides refs/, what for-each-ref reads
_MAX_REF_ENTRIES = 1000  # more loose refs and folders than this: git is asked (reading them would hold the loop)
_MAX_REF_SOURCE_BYTES = 1024 * 1024  # a bigger packed-refs or config: git is asked every time
_COMMIT_ID = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1 or SHA-256


def ref_sources(common_dir: Path, repo: Path, own_dir: Path | None = None) -> RefSources | None:
    """The bytes of every file `git for-each-ref` in `repo` reads the refs from: each loose ref under `refs/` (its
    path and content), `packed-refs`, the configuration and `commondir` (absent ones as empty), with the identity of
    `repo/.git`; with `own_dir` (a linked worktree's own git directory) its `HEAD` and its own `refs/` too. None
    where that cannot be told cheaply and exactly (a link anywhere among them, a reftable repository, anything but
    plain files and folders, too many or too big): then the caller asks git.

    (Git also leaves out a ref whose commit is no longer in the object store; such a ref could not be put back
    anyway.)"""
    try:
        info = (repo / ".git").lstat()
        if os.path.lexists(common_dir / "reftable"):
            return None
        found: list[tuple[str, bytes]] = [(".git", f"{info.st_mode} {info.st_dev} {info.st_ino}".encode())]
        for name in _REF_SOURCE_FILES:
            data = _file_or_empty(common_dir / name)
            if data is None:
                return None
            found.append((name, data))
        folders = [(common_dir / "refs", "refs")]
        if own_dir is not None:
            head = _file_or_empty(own_dir / "HEAD")
            if head is None:
                return None
            found.append(("own:HEAD", head))
            if os.path.lexists(own_dir / "refs"):
                folders.append((own_dir / "refs", "own:refs"))
        for top, label in folders:
            if not stat.S_ISDIR(top.lstat().st_mode):
                return None
            if not _walk_refs(top, label, found):
                return None
    except OSError:
        return None
    return tuple(sorted(found))


def _walk_refs(top: Path, label: str, found: list[tuple[str, bytes]]) -> bool:
    """Append (label/relative path, bytes) of every file and folder under `top`; False at anything not plain."""
    folders = [top]
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if len(found) > _MAX_REF_ENTRIES or entry.is_symlink():
                    return False
                name = f"{label}/{Path(entry.path).relative_to(top).as_posix()}"
                if entry.is_dir(follow_symlinks=False):
                    folders.append(Path(entry.path))
                    found.append((name + "/", b""))
                    continue
                data = plain_bytes(Path(entry.path))
                if data is None:
                    return False
                found.append((name, data))
    return True


def _file_or_empty(path: Path) -> bytes | None:
    return plain_bytes(path) if os.path.lexists(path) else b""


def plain_bytes(path: Path) -> bytes | None:
    """The content of the plain file `path` (never through a link, never blocking on a pipe); None for anything else
    or a file over `_MAX_REF_SOURCE_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_REF_SOURCE_BYTES:
            return None
        data = handle.read(_MAX_REF_SOURCE_BYTES + 1)
    return data if len(data) <= _MAX_REF_SOURCE_BYTES else None


def git_dirs(checkout: Path) -> tuple[Path, Path] | None:
    """(the checkout's own git directory, the shared one) when `checkout` is the top of a work tree whose `.git` is a
    plain folder, or a plain `gitdir:` file (a linked worktree), all of them the bot's user's own; None otherwise."""
    dot_git = checkout / ".git"
    uid = os.geteuid()
    try:
        info = dot_git.lstat()
        if checkout.lstat().st_uid != uid or info.st_uid != uid:
            return None  # git's ownership check would have its say
        if stat.S_ISDIR(info.st_mode):
            gitdir = common = dot_git
        elif stat.S_ISREG(info.st_mode):
            text = plain_bytes(dot_git)
            if text is None or not text.startswith(b"gitdir: ") or text.count(b"\n") > 1:
                return None
            gitdir = checkout / os.fsdecode(text[len(b"gitdir: ") :].strip())
            pointer = _file_or_empty(gitdir / "commondir")
            if pointer is None:
                return None
            common = gitdir / os.fsdecode(pointer.strip()) if pointer.strip() else gitdir
        else:
            return None
        for folder in {gitdir, common}:
            found = folder.lstat()
            if not stat.S_ISDIR(found.st_mode) or found.st_uid != uid:
                return None
        if not (common / "objects").is_dir():
            return None
    except OSError:
        return None
    return gitdir, common


def checkout_ref_sources(checkout: Path) -> RefSources | None:
    """`ref_sources` of the work tree whose top is `checkout` (a main checkout or a linked worktree)."""
    dirs = git_dirs(checkout)
    if dirs is None:
        return None
    gitdir, common = dirs
    return ref_sources(common, checkout, None if gitdir == common else gitdir)


def head_from_files(checkout: Path) -> str | None:
    """The commit HEAD of the work tree at `checkout` names, read from its files where it is a commit id or a branch
    with a loose or packed ref; None where git must be asked (anything else, an unborn branch included)."""
    dirs = git_dirs(checkout)
    if dirs is None:
        return None
    gitdir, common = dirs
    config = _file_or_empty(common / "config")
    if config is None or b"refstorage" in config.lower() or os.path.lexists(common / "reftable"):
        return None
    head = plain_bytes(gitdir / "HEAD")
    if head is None:
        return None
    head = head.rstrip(b"\n")
    if _COMMIT_ID.fullmatch(head):
        return head.decode()
    if not head.startswith(b"ref: refs/heads/"):
        return None
    refname = head[len(b"ref: ") :]
    if b"\n" in refname or b".." in refname:
        return None
    loose = common / os.fsdecode(refname)
    if os.path.lexists(loose):
        value = plain_bytes(loose)
        value = value.rstrip(b"\n") if value is not None else b""
        return value.decode() if _COMMIT_ID.fullmatch(value) else None
    packed = _file_or_empty(common / "packed-refs")
    for line in (packed or b"").splitlines():
        sha, _, name = line.partition(b" ")
        if name == refname and _COMMIT_ID.fullmatch(sha):
            return sha.decode()
    return None


def is_loose_commit(common_dir: Path, object_id: str) -> bool:
    """Whether `object_id` is a commit stored loose in the repository, whole and matching its id (what git checks
    when it reads one); False where that cannot be told here (packed, in an alternate, replaced, missing, too big:
    then git must be asked)."""
    if not _COMMIT_ID.fullmatch(object_id.encode()) or os.path.lexists(common_dir / "info" / "grafts"):
        return False
    packed = _file_or_empty(common_dir / "packed-refs")
    if packed is None or b"refs/replace/" in packed or os.path.lexists(common_dir / "refs" / "replace"):
        return False  # an object may be replaced by another: git reads it
    stored = plain_bytes(common_dir / "objects" / object_id[:2] / object_id[2:])
    if stored is None:
        return False
    try:
        inflate = zlib.decompressobj()
        data = inflate.decompress(stored, _MAX_REF_SOURCE_BYTES)
    except zlib.error:
        return False
    if not inflate.eof:
        return False
    header, nul, body = data.partition(b"\0")
    if not nul or header != b"commit " + str(len(body)).encode():
        return False
    digest = hashlib.sha1 if len(object_id) == 40 else hashlib.sha256
    return digest(data).hexdigest() == object_id


def head_commit_from_files(checkout: Path) -> str | None:
    """`head_from_files` where that id is a commit stored loose in the repository (what `git rev-parse --verify
    HEAD^{commit}` answers); None where git must be asked (a packed commit included)."""
    dirs = git_dirs(checkout)
    head = head_from_files(checkout) if dirs is not None else None
    if dirs is None or head is None:
        return None
    return head if is_loose_commit(dirs[1], head) else None
