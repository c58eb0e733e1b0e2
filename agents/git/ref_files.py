"""The files git keeps a repository's refs in, read without running git: where that is plain and exact.

A git process costs milliseconds of CPU; the repository guard and the credential scan ask "did any ref move?" many times
a task, and the repo map asks which commit a checkout is at. Those answers rest on a handful of small files: the loose
refs under `refs/`, `packed-refs`, `HEAD`, the configuration. `ref_sources` reads their bytes (equal bytes in the same
files are the same refs, whatever the file times say); `head_from_files` resolves HEAD where it is a plain branch or
commit; `branch_exists_from_files` and `head_branch_from_files` answer whether a branch exists and which one is checked
out (by git's short name); `loose_object_header` gives a loose object's type and size; a commit is recognised loose here
and packed in `pack_index`. Whatever is not plain (a link, a reftable repository, a symbolic ref chain, a `.git` that is
neither a folder nor a `gitdir:` file, another owner, anything too big) gives None, and the caller asks git as before.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import zlib
from pathlib import Path

from agents.git.pack_index import is_packed_commit

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
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_REF_SOURCE_BYTES:
        os.close(fd)  # a folder too: a file object over it could not even be made
        return None
    with os.fdopen(fd, "rb") as handle:
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
    if not _plain_ref_storage(common):
        return None
    head = _head_target(gitdir)
    if head is None or _COMMIT_ID.fullmatch(head):
        return head.decode() if head is not None else None
    refname = head[len(b"ref: ") :]
    if b".." in refname:
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
    if not _COMMIT_ID.fullmatch(object_id.encode()) or not nothing_replaced(common_dir):
        return False
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


_HEADER_READ = 256  # compressed bytes read for a loose object's header ("<type> <size>\0")


def loose_object_header(common_dir: Path, object_id: str) -> tuple[str, int] | None:
    """(type, size) of `object_id` where it is stored loose in the repository, read from its header as `git cat-file
    --batch-check` reads it; None where git must be asked (packed, replaced, missing, not a plain file, not a
    header)."""
    if not _COMMIT_ID.fullmatch(object_id.encode()) or not nothing_replaced(common_dir):
        return None
    try:
        fd = os.open(
            common_dir / "objects" / object_id[:2] / object_id[2:],
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        )
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        start = handle.read(_HEADER_READ)
    try:
        header, nul, _ = zlib.decompressobj().decompress(start, 64).partition(b"\0")
    except zlib.error:
        return None
    kind, _, size = header.partition(b" ")
    if not nul or kind not in (b"blob", b"tree", b"commit", b"tag") or not size.isdigit():
        return None
    return kind.decode(), int(size)


def nothing_replaced(common_dir: Path) -> bool:
    """No grafts and no `refs/replace/`: an object id names what is stored under it (else git reads it)."""
    if os.path.lexists(common_dir / "info" / "grafts") or os.path.lexists(common_dir / "refs" / "replace"):
        return False
    packed = _file_or_empty(common_dir / "packed-refs")
    return packed is not None and b"refs/replace/" not in packed


def head_commit_from_files(checkout: Path) -> str | None:
    """`head_from_files` where that id is a commit stored loose or whole in a pack of the repository (what `git
    rev-parse --verify HEAD^{commit}` answers); None where git must be asked."""
    dirs = git_dirs(checkout)
    head = head_from_files(checkout) if dirs is not None else None
    if dirs is None or head is None:
        return None
    if is_loose_commit(dirs[1], head):
        return head
    return head if nothing_replaced(dirs[1]) and is_packed_commit(dirs[1], head) else None


_BRANCH_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]*(/[A-Za-z0-9_][A-Za-z0-9_.+\-]*)*")


def _plain_branch_name(name: str) -> bool:
    """A branch name git takes as it is (no `..`, no `.lock` part, nothing to quote or expand): only those are
    looked up in the files."""
    return (
        bool(_BRANCH_NAME.fullmatch(name))
        and ".." not in name
        and not any(part.endswith((".lock", ".")) for part in name.split("/"))
    )


def _head_target(gitdir: Path) -> bytes | None:
    """The work tree's HEAD file as a commit id or a `ref: refs/heads/…` line (one line, its newline stripped);
    None for anything else (a link, another kind of symbolic ref, more lines): git must be asked then."""
    head = plain_bytes(gitdir / "HEAD")
    if head is None or head.count(b"\n") > 1:
        return None
    head = head.rstrip(b"\n")
    if _COMMIT_ID.fullmatch(head) or (head.startswith(b"ref: refs/heads/") and b"\n" not in head):
        return head
    return None


def _plain_ref_storage(common: Path) -> bool:
    config = _file_or_empty(common / "config")
    return config is not None and b"refstorage" not in config.lower() and not os.path.lexists(common / "reftable")


def _packed_names(common: Path) -> set[bytes] | None:
    packed = _file_or_empty(common / "packed-refs")
    if packed is None:
        return None
    lines = (line.split(b" ", 1) for line in packed.splitlines() if not line.startswith((b"#", b"^")))
    return {parts[1] for parts in lines if len(parts) == 2}


def branch_exists_from_files(checkout: Path, branch: str) -> bool | None:
    """Whether the branch `branch` exists (what `git show-ref --verify refs/heads/<branch>` answers), read from the
    files of the work tree at `checkout`: its loose ref holding a commit id, or a line of `packed-refs`; None where
    git must be asked (a symbolic or odd loose ref, an unusual name, reftable, anything not plain)."""
    dirs = git_dirs(checkout)
    if dirs is None or not _plain_branch_name(branch) or not _plain_ref_storage(dirs[1]):
        return None
    refname = f"refs/heads/{branch}"
    loose = dirs[1] / refname
    if os.path.lexists(loose):
        value = plain_bytes(loose)
        return True if value is not None and _COMMIT_ID.fullmatch(value.rstrip(b"\n")) else None
    names = _packed_names(dirs[1])
    return None if names is None else refname.encode() in names


def head_branch_from_files(checkout: Path) -> str | None:
    """What `git symbolic-ref --short HEAD` answers in the work tree at `checkout`, where HEAD names a plain branch
    whose short name is not also that of another ref (a tag, say: git would then answer `heads/<name>`); else, where
    HEAD is detached at a commit id, that id (what `git rev-parse HEAD` answers); None where git must be asked."""
    dirs = git_dirs(checkout)
    if dirs is None or not _plain_ref_storage(dirs[1]):
        return None
    gitdir, common = dirs
    head = _head_target(gitdir)
    if head is None or _COMMIT_ID.fullmatch(head):
        return head.decode() if head is not None else None
    name = head[len(b"ref: refs/heads/") :].decode(errors="replace")
    packed = _packed_names(common)
    if not _plain_branch_name(name) or packed is None:
        return None
    # the names `git rev-parse` tries for `name`, besides refs/heads/: any of them there makes the short form longer
    others = [name, f"refs/{name}", f"refs/tags/{name}", f"refs/remotes/{name}", f"refs/remotes/{name}/HEAD"]
    for other in others:
        if other.encode() in packed or any(os.path.lexists(folder / other) for folder in {gitdir, common}):
            return None
    return name
