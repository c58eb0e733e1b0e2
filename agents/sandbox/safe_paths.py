"""Paths a repository cannot redirect: real folders inside a checkout, the host's own Python
installations, and files the bot writes into a worktree without following any symlink.

A repository (or a worker) controls every name inside its checkout, symlinks included. So the bot trusts only the
checkout root it resolved itself; below it, every component is opened relative to its parent's directory fd with
`O_NOFOLLOW` (`openat`), and a symlink anywhere on the way is refused with `UnsafePath`, never followed.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LIB_PYTHON = re.compile(r"python(\d+\.\d+)t?")


class UnsafePath(OSError):
    """A path inside a checkout goes through a symlink (or a non-folder): the bot will not use or write it."""


def _parts(relative: str | Path) -> list[str]:
    parts = [p for p in Path(relative).parts if p not in ("", ".")]
    if Path(relative).is_absolute() or ".." in parts or not parts:
        raise UnsafePath(f"{relative!s} is not a path inside the checkout")
    return parts


def real_folder(root: Path, relative: str | Path) -> Path | None:
    """`root/relative` when every component below `root` is a real folder (no symlink), else None."""
    try:
        parts = _parts(relative)
    except UnsafePath:
        return None
    current = Path(root)
    for part in parts:
        current = current / part
        try:
            info = os.lstat(current)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
    return current


@contextmanager
def open_folder(root: Path, relative: str | Path = ".", *, create: bool = False) -> Iterator[int]:
    """A directory fd of `root/relative`, walked component by component with O_NOFOLLOW (made with mode 0o755 when
    missing and `create`). Raises UnsafePath naming the first symlink or non-folder on the way."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        walked = Path()
        for part in [p for p in Path(relative).parts if p not in ("", ".")]:
            if part == ".." or Path(part).is_absolute():
                raise UnsafePath(f"{relative!s} is not a path inside {root}")
            walked = walked / part
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            child = _open_folder_in(fd, part, walked.as_posix())
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _open_folder_in(dir_fd: int, name: str, shown: str) -> int:
    """A directory fd of the folder `name` in `dir_fd`, opened with O_NOFOLLOW; UnsafePath naming `shown` for a
    symbolic link or a non-folder there."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        if _is_link(dir_fd, name):
            raise UnsafePath(f"{shown} is a symbolic link") from None
        if err.errno == 20:  # ENOTDIR
            raise UnsafePath(f"{shown} is not a folder") from None
        raise


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


class NotRegularFile(UnsafePath):
    """The name holds something other than a regular file (a folder, a FIFO, a device)."""


def open_regular(root: Path, relative: str | Path) -> int:
    """A read-only fd of the regular file `root/relative`, opened without following any symlink: the folders are
    walked with O_NOFOLLOW and the file itself is opened with it, never blocking on a FIFO (O_NONBLOCK). A symlink
    anywhere below `root` raises UnsafePath; a file that is not a regular one, NotRegularFile."""
    parts = _parts(relative)
    with open_folder(root, Path(*parts[:-1]) if len(parts) > 1 else ".") as folder:
        return _open_regular_in(folder, parts[-1], Path(relative).as_posix())


def _open_regular_in(folder: int, name: str, shown: str) -> int:
    """A read-only fd of the regular file `name` in the folder fd `folder`, not followed if a link, never blocking on
    a FIFO; UnsafePath for a link, NotRegularFile for anything but a regular file (both naming `shown`)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        if _is_link(folder, name):
            raise UnsafePath(f"{shown} is a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFile(f"{shown} is not a regular file")
    return fd


WALK_DEPTH = 512  # folders held open at once by `walk_entries` (one per level): deeper ones are not entered


def walk_entries(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Everything below `root`, depth first: (its path relative to `root`, its lstat), never through a link.

    Walked by directory descriptors: a folder is listed through its own descriptor and entered from its parent's
    with O_NOFOLLOW, so a folder swapped for a symlink between the listing and the entering is not entered (a walk by
    path strings followed it out of `root`). Folders more than WALK_DEPTH deep are listed but not entered, as a walk
    by path stops at the length limit of a path."""
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    yield from _depth_first(top, _entered)


def unlock_folders(root: Path) -> None:
    """Give `root` and every folder below it mode 0o700 (its owner may list, enter and delete in it), each folder
    reached from its parent's descriptor with no link followed and changed by a descriptor of its own (O_PATH, which
    needs no permission on the folder itself): a file, a link, and whatever a link points at are never changed. For a
    folder a sandboxed run wrote, before it is deleted (folders more than WALK_DEPTH deep are left as they are)."""
    top = _unlocked(None, str(root))
    if top is not None:
        for _ in _depth_first(top, _unlocked):
            pass


def _depth_first(top: int, enter: Callable[[int | None, str], int | None]) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below the folder open as `top` (closed at the end), depth first: (path relative to it, lstat). A
    folder listed is entered by `enter(its parent's descriptor, its name)`, which opens it for listing or says None
    (gone, a link now); at most WALK_DEPTH folders are held open at once, one per level."""
    stack: list[tuple[int, str, Iterator[tuple[str, os.stat_result]]]] = [(top, "", _listing(top))]
    try:
        while stack:
            fd, prefix, listing = stack[-1]
            found = next(listing, None)
            if found is None:
                os.close(fd)
                stack.pop()
                continue
            name, info = found
            yield prefix + name, info
            if stat.S_ISDIR(info.st_mode) and len(stack) < WALK_DEPTH and (child := enter(fd, name)) is not None:
                stack.append((child, f"{prefix}{name}/", _listing(child)))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _entered(parent: int | None, name: str) -> int | None:
    """The folder `name` of the folder open as `parent`, opened with no link followed (None: gone, or a link now)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError:
        return None


def _unlocked(parent: int | None, name: str) -> int | None:
    """The folder `name` (of the folder open as `parent`) made 0o700 and opened for listing; None when it is not a
    real folder (a link is never followed) or cannot be opened."""
    try:
        handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError:
        return None
    try:
        os.chmod(f"/proc/self/fd/{handle}", 0o700)  # the folder this descriptor holds, whatever its name is now
        return os.open(f"/proc/self/fd/{handle}", _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return None
    finally:
        os.close(handle)


def _listing(fd: int) -> Iterator[tuple[str, os.stat_result]]:
    """The names in the folder open as `fd`, each with its lstat (those gone meanwhile left out)."""
    found: list[tuple[str, os.stat_result]] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    found.append((entry.name, entry.stat(follow_symlinks=False)))
    except OSError:
        pass
    return iter(found)


def unlink_file(root: Path, relative: str) -> None:
    """Delete the file (or link) `root/relative` by its folder's descriptor, that folder reached with no link
    followed (`open_folder`): a folder on the way swapped for a link raises UnsafePath, and nothing is deleted."""
    parent, _, name = relative.rpartition("/")
    with open_folder(root, parent or ".") as folder:
        os.unlink(name, dir_fd=folder)


class TooLarge(ValueError):
    """A file larger than its reader takes (`read_file`'s `max_bytes`)."""


def read_file(root: Path, relative: str | Path, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file `root/relative`, read without following any symlink (`open_regular`); with
    `max_bytes`, TooLarge for a larger one, found out before more than that is read (a file the sandbox wrote may be
    as large as the task's disk allows, and a reader holds it whole)."""
    with os.fdopen(open_regular(root, relative), "rb") as source:
        if max_bytes is None:
            return source.read()
        data = source.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(f"{Path(relative).as_posix()} is larger than {max_bytes} bytes")
    return data


class FolderReader:
    """Reads many files below one root as `read_file` does (no symlink followed on the way or at the file), each
    folder opened once and its descriptor held until `close`: a repository's files share their folders, and walking
    each file's folders again from the root was a third of reading them.

    A folder is opened from its parent's descriptor with O_NOFOLLOW, as `open_folder` walks: one swapped for a link
    afterwards is not followed (the descriptor held is the folder that was there)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._folders: dict[str, int] = {}

    def __enter__(self) -> FolderReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        folders, self._folders = self._folders, {}
        for fd in folders.values():
            os.close(fd)

    def _folder(self, relative: str) -> int:
        fd = self._folders.get(relative)
        if fd is not None:
            return fd
        parent, _, name = relative.rpartition("/")
        if not relative:
            fd = os.open(self._root, _DIR_FLAGS)
        else:
            if name in ("", ".", ".."):
                raise UnsafePath(f"{relative} is not a path inside {self._root}")
            fd = _open_folder_in(self._folder(parent), name, relative)
        self._folders[relative] = fd
        return fd

    def read(self, relative: str) -> bytes:
        """The bytes of the regular file `root/relative` (a slash path); UnsafePath for a link on the way or at it,
        NotRegularFile for a folder, FIFO or device."""
        if relative.startswith("/"):
            raise UnsafePath(f"{relative} is not a path inside {self._root}")
        parent, _, name = relative.rpartition("/")
        if name in ("", ".", ".."):
            raise UnsafePath(f"{relative} is not a path inside {self._root}")
        with os.fdopen(_open_regular_in(self._folder(parent), name, relative), "rb") as source:
            return source.read()


def write_file(root: Path, relative: str | Path, data: bytes, *, replace: bool = True, mode: int = 0o644) -> None:
    """Write `data` to `root/relative` without following any symlink: the folders are walked with O_NOFOLLOW (made
    when missing), the bytes go to a fresh temporary file (O_EXCL) renamed over the name. An existing symlink or
    non-file at the name raises UnsafePath; with `replace=False` an existing regular file is left as it is."""
    parts = _parts(relative)
    with open_folder(root, Path(*parts[:-1]) if len(parts) > 1 else ".", create=True) as folder:
        name = parts[-1]
        try:
            info = os.lstat(name, dir_fd=folder)
        except FileNotFoundError:
            info = None
        if info is not None and not stat.S_ISREG(info.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
            raise UnsafePath(f"{Path(relative).as_posix()} is {kind}")
        if info is not None and not replace:
            return
        temporary = f".{name}.{os.getpid()}.agentlab-part"
        fd = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder
        )
        try:
            os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=folder)
            except OSError:
                pass
            raise


def append_lines(root: Path, relative: str | Path, text: str) -> None:
    """Append `text` to `root/relative` (created when missing) without following any symlink on the way."""
    parts = _parts(relative)
    with open_folder(root, Path(*parts[:-1]) if len(parts) > 1 else ".", create=True) as folder:
        try:
            fd = os.open(
                parts[-1], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder
            )
        except OSError as err:
            if _is_link(folder, parts[-1]):
                raise UnsafePath(f"{Path(relative).as_posix()} is a symbolic link") from None
            raise err
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            if not stat.S_ISREG(os.fstat(out.fileno()).st_mode):
                raise UnsafePath(f"{Path(relative).as_posix()} is not a regular file")
            out.write(text)


def make_symlink(root: Path, relative: str | Path, target: Path) -> None:
    """Create the symlink `root/relative` -> `target`; the folders on the way are walked with O_NOFOLLOW."""
    parts = _parts(relative)
    with open_folder(root, Path(*parts[:-1]) if len(parts) > 1 else ".") as folder:
        os.symlink(target, parts[-1], target_is_directory=True, dir_fd=folder)


# ----------------------------------------------------------------------------------------------------------------------
# the host's Python installations


def venv_version(venv: Path) -> str | None:
    """The `X.Y` of a virtualenv, from its real `lib/pythonX.Y` folder (never from `pyvenv.cfg`'s `home`)."""
    lib = real_folder(venv, "lib")
    if lib is None:
        return None
    try:
        names = sorted(entry.name for entry in os.scandir(lib) if entry.is_dir(follow_symlinks=False))
    except OSError:
        return None
    versions = [m.group(1) for name in names if (m := _LIB_PYTHON.fullmatch(name))]
    return versions[0] if len(versions) == 1 else None


def trusted_python_prefixes() -> list[Path]:
    """Installations of Python the host itself provides: the bot's own base interpreter, the system's (/usr,
    /usr/local), and the other versions beside the bot's own when it runs from a pyenv/uv-style `versions` root."""
    own = [Path(sys.base_prefix), Path(sys.base_exec_prefix)]
    found = [*own, Path("/usr"), Path("/usr/local")]
    for prefix in own:
        if prefix.parent.name in ("versions", "python"):  # ~/.pyenv/versions/3.12.4, ~/.local/share/uv/python/...
            try:
                found += sorted(p for p in prefix.parent.iterdir() if p.is_dir() and not p.is_symlink())
            except OSError:
                pass
    return list(dict.fromkeys(p.resolve() for p in found if p.is_dir()))


def trusted_base(version: str) -> Path | None:
    """The first host installation of Python `version` (X.Y): its `lib/pythonX.Y` and `bin/pythonX.Y` both exist."""
    for prefix in trusted_python_prefixes():
        if (prefix / "lib" / f"python{version}").is_dir() and (prefix / "bin" / f"python{version}").exists():
            return prefix
    return None


def checkout_venv(checkout: Path, name: str) -> tuple[Path | None, Path | None, str | None]:
    """(venv, base installation, why not) of the virtualenv folder `name` of a checkout. The venv is used only when
    it is a real folder of the checkout (no symlink) with a `bin/python`, made from a Python the host provides
    (matched by version, see `trusted_base`). When it is not used, `why not` says so in one phrase."""
    checkout = Path(checkout)
    if not os.path.lexists(checkout / name):
        return None, None, None
    venv = real_folder(checkout, name)
    if venv is None:
        return None, None, f"{name} is a symbolic link or not a folder"
    if not (venv / "bin" / "python").exists() and not (venv / "bin" / "python").is_symlink():
        return None, None, f"{name} has no bin/python"
    version = venv_version(venv)
    base = trusted_base(version) if version else None
    if base is None:
        return None, None, f"{name} was not made from a Python installed on this machine"
    return venv, base, None
