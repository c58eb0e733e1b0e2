"""The masked copies of a repository's git metadata files that a sandbox shows in place of the originals.

A repository's git metadata can hold credentials: a remote URL with a token in `config`, a submodule's
`modules/<name>/config`, `config.worktree`, a file `config` includes, a reflog or FETCH_HEAD that recorded such a
URL, an `http.extraHeader`, an inline credential helper, and the bot's own secrets anywhere. The sandbox binds the
whole folder read-only, so each such file is shown as a copy with its secrets masked (credentials in URLs dropped,
everything else masked as the process's output filter masks it: agents/core/secrets_filter.py); `git remote -v`
inside still works and shows a plain URL.

Each of a task's commands, test runs and screenshots builds its sandbox, so `GitMetadataMasks` remembers what it
found per file: a file with the same inode, size and change times as when it was last read, under the same set of
secret values, is not read and masked again (a long-lived repository's reflogs are read once, not once per command).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import stat
from pathlib import Path

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.temp_folders import temp_folder

MASK_SCAN_MAX_BYTES = 8_000_000  # a git metadata file larger than this is not read for secrets (none is, in practice)
MAX_REMEMBERED = 20_000  # files remembered at most; past it the memory starts again
_SKIPPED_TOP = ("objects", "refs")  # compressed objects and loose refs (object names): none holds a credential

# what identifies a file's content without reading it: its path, device, inode, size and change times
_FileKey = tuple[str, int, int, int, int, int]


class GitMetadataMasks:
    """The masked copies of git metadata files for the sandboxes one owner builds (`TaskSandboxes`), with `secrets`,
    the process's output filter, remembered per file between calls."""

    def __init__(self, secrets: SecretsFilter) -> None:
        self.secrets = secrets
        self._values: frozenset[str] | None = None
        self._seen: dict[_FileKey, Path | None] = {}  # a file's identity → its masked copy (None: nothing to mask)

    def files(self, common: Path) -> list[tuple[Path, Path]]:
        """(masked copy, the file it stands for) for each regular text file under the git folder `common` that holds
        a secret; the object store and loose refs are not looked at."""
        values = self.secrets.fingerprint()
        if values != self._values or len(self._seen) > MAX_REMEMBERED:  # masked under other values: none stands
            self._values, self._seen = values, {}
        found: list[tuple[Path, Path]] = []
        for folder, dirs, names in os.walk(common):
            if Path(folder) == common:
                dirs[:] = [d for d in dirs if d not in _SKIPPED_TOP]
            for name in names:
                path = Path(folder) / name
                copy = self._masked(path)
                if copy is not None:
                    found.append((copy, path))
        return found

    def _masked(self, path: Path) -> Path | None:
        """The masked copy of `path`, or None when it holds nothing to mask (or is not a regular text file)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # a link, gone, unreadable
            return None
        with os.fdopen(fd, "rb") as handle:
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_size > MASK_SCAN_MAX_BYTES:
                    return None
                key = (str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
                if key in self._seen and ((copy := self._seen[key]) is None or copy.is_file()):
                    return copy
                data = handle.read(MASK_SCAN_MAX_BYTES + 1)
            except OSError:
                return None
        copy = None if b"\0" in data else self._copy(path, data)  # binary: the index, a packed file
        self._seen[key] = copy
        return copy

    def _copy(self, path: Path, data: bytes) -> Path | None:
        text = data.decode("utf-8", errors="replace")
        masked = self.secrets.without_url_credentials(text)
        if masked == text:
            return None
        target = _private_folder() / f"git-{abs(hash(str(path))):x}-{path.name}"
        target.write_text(masked, encoding="utf-8")
        return target


@functools.cache
def _private_folder() -> Path:
    """The process's own folder for the masked git metadata files, made once (removed at exit)."""
    folder = temp_folder("sandbox", "git")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
