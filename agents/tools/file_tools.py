"""File tools the agents call: read, write, edit, glob, grep (through ripgrep) and list, all confined to one workspace.

Paths are relative to the workspace root. Every failure is a `ToolError` whose message is written for the model.
A path is checked by resolving it (`confine`) and then used only through that resolved path, opened folder by folder
without following any symlink (`open_resolved`): a worker's process that swaps a folder for a link out of the
workspace between the check and the use makes the call fail, never read or write outside.
The bot's own folders (`hidden`: its data folder and task worktrees, which hold every chat's files and lie inside its
own checkout, the workspace `self`, by default) are refused below a root and left out of every walk, and a root
that is one of them is refused whole (`_private`).
Blocking file I/O runs in a thread (`asyncio.to_thread`) so the event loop never stalls.

Why one module over 400 lines: the five tools share confinement, secret-file rules and wording for the model.
"""

from __future__ import annotations

import asyncio
import difflib
import errno
import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from agents.core.errors import ToolError
from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.safe_paths import NotRegularFile, UnsafePath, open_folder, open_regular
from agents.sandbox.safe_paths import write_file as write_without_links
from agents.tools import ripgrep
from agents.workspaces.file_walk import SKIP_DIRS, walk_tree  # one walker, one skip-list for the product
from agents.workspaces.folders import (
    PathOutsideWorkspace,
    WorkspaceNotFound,
    confine,
    is_git_metadata,
    is_secret_file,
)

__all__ = [
    "SKIP_DIRS",
    "PathOutsideWorkspace",
    "ToolError",
    "WorkspaceNotFound",
    "edit_file",
    "glob",
    "glob_to_regex",
    "grep",
    "read_file",
    "write_file",
]

BINARY_SNIFF_BYTES = 8192
GREP_MAX_FILE_BYTES = 5_000_000
GREP_MAX_LINE_CHARS = 300
GLOB_MAX_STARS = 8
_NEW_FILE_MODE = 0o644


def _base(root: Path) -> Path:
    return Path(root).resolve()


def _private(base: Path, hidden: Sequence[Path]) -> tuple[Path, ...]:
    """The bot's own folders of `hidden` (its data folder and task worktrees) lying strictly below `base`, resolved.
    By default both lie inside the bot's checkout (the workspace `self`) and hold the database, attachments and task
    worktrees of every chat: no file tool reads, lists or writes them there. A root that is one of them (a workspace
    linked to the data folder) is refused whole. A root inside one is not refused here: the workspaces folder may
    itself lie in the data folder (DATABASE_PATH=/srv/bot/agentlab.db beside WORKSPACE_PATH=/srv/bot/workspaces), and
    a task's own worktree lies in the worktrees folder; a workspace that reaches into them by a link is left out of
    the workspaces (`Workspaces.overlaps_private`)."""
    folders = tuple(Path(folder).resolve() for folder in hidden)
    if base in folders:
        raise ToolError(
            "that workspace is the bot's own data (its database, every chat's files and task worktrees): "
            "no tool reads or writes it"
        )
    return tuple(folder for folder in folders if folder.is_relative_to(base))


def _is_private(path: Path, hidden: Sequence[Path]) -> bool:
    return any(path.is_relative_to(folder) for folder in hidden)


def _confine(base: Path, path: str, hidden: Sequence[Path]) -> Path:
    """`confine`, the bot's own folders (`_private`) refused: the one check of every path a file tool is given."""
    target = confine(base, path)
    if _is_private(target, hidden):
        # the path is not echoed: it may name a chat (data/attachments/<chat id>/…)
        raise ToolError(
            "that path is in the bot's own data (its database, every chat's files and task worktrees): "
            "no tool reads or writes it"
        )
    return target


def _leads_into(path: Path, hidden: Sequence[Path]) -> bool:
    """Whether `path` (a walk's entry, its folders real) is one of the bot's own folders or a link into one."""
    if _is_private(path, hidden):
        return True
    try:
        return path.is_symlink() and _is_private(path.resolve(), hidden)
    except (OSError, RuntimeError):  # a link loop leads nowhere
        return False


def _prune_private(folder: Path, dirs: list[str], files: list[str], hidden: Sequence[Path]) -> None:
    """Leave the bot's own folders out of a walk's step (`dirs` not entered) with every link into them."""
    if hidden:
        dirs[:] = [name for name in dirs if not _leads_into(folder / name, hidden)]
        files[:] = [name for name in files if not _leads_into(folder / name, hidden)]


def _rel(base: Path, target: Path) -> str:
    return target.relative_to(base).as_posix() if target != base else "."


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


def _strip_eol(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


def _nearby(base: Path, target: Path) -> str:
    """A hint for a missing path: the closest names in the nearest existing folder."""
    folder = target.parent
    while folder != base and not folder.is_dir():
        folder = folder.parent
    try:  # listed through a folder fd reached with no link followed: the folder may have become one since
        with open_folder(base, folder.relative_to(base)) as fd:
            names = sorted(e.name + ("/" if e.is_dir() else "") for e in os.scandir(fd))
    except (OSError, ValueError):
        return ""
    where = _rel(base, folder)
    if not names:
        return f" The folder {where!r} is empty."
    close = difflib.get_close_matches(target.name, [n.rstrip("/") for n in names], n=5, cutoff=0.5)
    shown = names[:30]
    more = f" (and {len(names) - len(shown)} more)" if len(names) > len(shown) else ""
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"{hint} {where!r} contains: {', '.join(shown)}{more}."


def _existing_file(base: Path, path: str, hidden: Sequence[Path]) -> Path:
    target = _confine(base, path, hidden)
    if target.is_dir():
        raise ToolError(
            f"{path!r} is a directory, not a file; use glob (e.g. '{path.rstrip('/')}/*') to see what it contains"
        )
    if not target.exists():
        raise ToolError(f"No such file: {path!r}.{_nearby(base, target)}")
    if not target.is_file():
        raise ToolError(f"{path!r} is not a regular file")
    return target


def _decode(data: bytes, path: str, *, cut: bool = False) -> str:
    """Strict UTF-8; `cut` tolerates a multi-byte character split at the very end of `data`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        if cut and err.start >= len(data) - 3 and "end of data" in err.reason:
            return data[: err.start].decode("utf-8")
        raise ToolError(
            f"{path!r} is not UTF-8 text (undecodable byte at offset {err.start}); read_file only shows text files"
        ) from None


def _refuse_binary(head: bytes, path: str, size: int) -> None:
    if b"\x00" in head:
        raise ToolError(f"{path!r} looks like a binary file ({size:,} bytes); read_file only shows text files")


def open_resolved(base: Path, target: Path, path: str) -> BinaryIO:
    """The regular file `target` (resolved by `confine`, so below `base` with no symlink on the way) opened for
    reading through the same names, each folder opened with O_NOFOLLOW from `base`: a link put on the way since the
    check (a race with a process of the worker) fails the call instead of being followed out of the workspace."""
    try:
        fd = open_regular(base, target.relative_to(base))
    except NotRegularFile:
        raise ToolError(f"{path!r} is not a regular file") from None
    except UnsafePath as err:
        raise ToolError(f"{path!r} changed while it was being opened ({err}); try again") from None
    except OSError as err:
        raise ToolError(f"cannot read {path!r}: {err.strerror or err}") from None
    return os.fdopen(fd, "rb")


# --- read ------------------------------------------------------------------------------------------------------------


def _read_sync(
    base: Path,
    path: str,
    start_line: int | None,
    end_line: int | None,
    max_bytes: int,
    secrets: SecretsFilter,
    hidden: Sequence[Path],
) -> str:
    target = _existing_file(base, path, hidden)
    with open_resolved(base, target, path) as fh:
        return _masked(base, path, target, _read_text(fh, path, start_line, end_line, max_bytes), secrets)


def _masked(base: Path, path: str, target: Path, text: str, secrets: SecretsFilter) -> str:
    """git metadata (`.git/config`) may hold a remote URL with a token in it: shown masked (URL credentials,
    `http.extraHeader`, an inline credential helper, token shapes, the filter's values)."""
    return secrets.mask(text) if is_git_metadata(path) or is_git_metadata(_rel(base, target)) else text


def _refuse_git_metadata(base: Path, path: str, target: Path) -> None:
    """Git metadata is the bot's: a worker writing into `.git` (hooks, config) or replacing a worktree's `.git` file
    could make the bot's own git calls run its programs or commit into a repository of its making."""
    if is_git_metadata(path) or is_git_metadata(_rel(base, target)):
        raise ToolError(
            f"{path!r} is git metadata (.git); agents may not write or edit it. The bot commits your "
            "changes itself when the task ends"
        )


def _read_text(fh: BinaryIO, path: str, start_line: int | None, end_line: int | None, max_bytes: int) -> str:
    size = os.fstat(fh.fileno()).st_size
    if start_line is not None and start_line < 1:
        raise ToolError(f"start_line must be 1 or more (lines are numbered from 1), got {start_line}")
    if end_line is not None and end_line < (start_line or 1):
        raise ToolError(f"end_line ({end_line}) is before start_line ({start_line or 1})")
    _refuse_binary(fh.read(BINARY_SNIFF_BYTES), path, size)
    fh.seek(0)
    if start_line is None and end_line is None:
        return _read_head(fh, path, size, max_bytes)
    return _read_range(fh, path, size, start_line or 1, end_line, max_bytes)


def _read_head(fh: BinaryIO, path: str, size: int, max_bytes: int) -> str:
    data = fh.read(max_bytes + 1)
    if not data:
        return f"({path} is empty)"
    truncated = len(data) > max_bytes
    partial_last = False
    if truncated:
        data = data[:max_bytes]
        newline = data.rfind(b"\n")
        if newline >= 0:
            data = data[: newline + 1]
        else:
            partial_last = True
    text = _decode(data, path, cut=partial_last)
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    out = _numbered([_strip_eol(line) for line in lines], 1)
    if truncated:
        shown = len(lines)
        cut = " (that line is cut short)" if partial_last else ""
        out += (
            f"\n[truncated: {path} is {size:,} bytes, more than the {max_bytes:,}-byte limit; "
            f"showed lines 1-{shown}{cut}."
            f" Call read_file with start_line={shown + (0 if partial_last else 1)} and end_line to read further,"
            " or grep for what you need.]"
        )
    return out


def _read_range(fh: BinaryIO, path: str, size: int, start: int, end: int | None, max_bytes: int) -> str:
    lines: list[str] = []
    used = 0
    total = 0
    stopped_at: int | None = None
    for lineno, raw in enumerate(fh, 1):
        total = lineno
        if lineno < start:
            continue
        if end is not None and lineno > end:
            break
        if used + len(raw) > max_bytes:
            if not lines:  # a single line longer than the cap: show its beginning
                lines.append(_strip_eol(_decode(raw[:max_bytes], path, cut=True).rstrip("\n")))
            stopped_at = lineno
            break
        used += len(raw)
        lines.append(_strip_eol(_decode(raw, path).rstrip("\n")))
    if not lines:
        if total == 0:
            return f"({path} is empty)"
        raise ToolError(f"start_line {start} is past the end of {path!r}, which has {total} lines")
    out = _numbered(lines, start)
    last = start + len(lines) - 1
    if stopped_at is not None:
        nxt = stopped_at if stopped_at != start else stopped_at + 1
        out += (
            f"\n[truncated at the {max_bytes:,}-byte limit: showed lines {start}-{last} of {path} ({size:,} bytes)."
            f" Call read_file with start_line={nxt} to continue.]"
        )
    elif end is not None and end > last:
        out += f"\n[{path} ends at line {last}]"
    return out


async def read_file(
    root: Path,
    path: str,
    start_line: int | None = None,
    end_line: int | None = None,
    max_bytes: int = 256_000,
    *,
    secrets: SecretsFilter,
    hidden: Sequence[Path] = (),
) -> str:
    """The file's lines numbered like `cat -n` (`     12\\tcode`); `start_line`/`end_line` are 1-based, inclusive.
    `secrets` masks what git metadata shows; `hidden`: the bot's own folders, refused (`_private`)."""
    base = _base(root)
    return await asyncio.to_thread(
        _read_sync, base, path, start_line, end_line, max_bytes, secrets, _private(base, hidden)
    )


# One read returns at most this much, with a note on how to read further (keeps a worker's context bounded).
READ_MAX_LINES = 2000
READ_MAX_BYTES = 100_000  # ~25k tokens


def _read_window_sync(
    base: Path, path: str, offset: int, limit: int, max_bytes: int, secrets: SecretsFilter, hidden: Sequence[Path]
) -> str:
    target = _existing_file(base, path, hidden)
    with open_resolved(base, target, path) as fh:
        return _masked(base, path, target, _read_window_text(fh, path, offset, limit, max_bytes), secrets)


def _read_window_text(fh: BinaryIO, path: str, offset: int, limit: int, max_bytes: int) -> str:
    size = os.fstat(fh.fileno()).st_size
    _refuse_binary(fh.read(BINARY_SNIFF_BYTES), path, size)
    fh.seek(0)
    out = _read_range(fh, path, size, offset, offset + limit - 1, max_bytes)
    if "[truncated at" in out:
        return out.replace("Call read_file with start_line=", "Call read_file with offset=")
    last = out.rsplit("\n", 1)[-1]  # numbered lines start with spaces; notes with ( or [
    if last == f"({path} is empty)" or last.startswith(f"[{path} ends at line "):
        return out
    end = offset + limit - 1
    fh.seek(0)
    total = sum(1 for _ in fh)
    if total > end:
        return out + (
            f"\n[showed lines {offset}-{end} of {total} in {path}. Call read_file with offset={end + 1} "
            f"(limit up to {READ_MAX_LINES}) to read further, or grep for what you need.]"
        )
    return out


async def read_window(
    root: Path,
    path: str,
    offset: int | None = None,
    limit: int | None = None,
    start_line: int | None = None,
    end_line: int | None = None,
    max_bytes: int = READ_MAX_BYTES,
    *,
    secrets: SecretsFilter,
    hidden: Sequence[Path] = (),
) -> str:
    """`read_file` as the agents call it: from line `offset` (1-based), at most `limit` lines, never more than
    READ_MAX_LINES lines or `max_bytes`; the older `start_line`/`end_line` arguments still work. `secrets` masks
    what git metadata shows; `hidden`: the bot's own folders, refused (`_private`)."""
    start = offset if offset is not None else start_line if start_line is not None else 1
    start = int(start)
    if start < 1:
        raise ToolError(f"offset must be 1 or more (lines are numbered from 1), got {start}")
    if limit is None and end_line is not None:
        if int(end_line) < start:
            raise ToolError(f"end_line ({end_line}) is before the first line to read ({start})")
        limit = int(end_line) - start + 1
    count = READ_MAX_LINES if limit is None else int(limit)
    if count < 1:
        raise ToolError(f"limit must be 1 or more, got {limit}")
    base = _base(root)
    return await asyncio.to_thread(
        _read_window_sync, base, path, start, min(count, READ_MAX_LINES), max_bytes, secrets, _private(base, hidden)
    )


# --- write / edit ----------------------------------------------------------------------------------------------------


def _atomic_write(base: Path, target: Path, data: bytes) -> None:
    """Write `target` (resolved by `confine`) via a fresh temporary file renamed over it, keeping an existing file's
    permissions; missing folders are made. Every folder from `base` down is opened with O_NOFOLLOW
    (`safe_paths.write_file`): a link put on the way since the check fails the write instead of leading it out."""
    try:
        mode = stat.S_IMODE(os.lstat(target).st_mode)
    except OSError:
        mode = _NEW_FILE_MODE
    write_without_links(base, target.relative_to(base), data, mode=mode)


def _write_sync(base: Path, path: str, content: str, hidden: Sequence[Path]) -> str:
    target = _confine(base, path, hidden)
    _refuse_git_metadata(base, path, target)
    if target == base or target.is_dir():
        raise ToolError(f"{path!r} is a directory; give a file path to write")
    existed = target.exists()
    data = content.encode("utf-8")
    try:
        _atomic_write(base, target, data)
    except UnsafePath as err:
        if str(err).endswith("is not a folder"):
            raise ToolError(f"cannot create {path!r}: a parent of it is a file, not a folder") from None
        raise ToolError(f"{path!r} changed while it was being written ({err}); try again") from None
    except (NotADirectoryError, FileExistsError):
        raise ToolError(f"cannot create {path!r}: a parent of it is a file, not a folder") from None
    except OSError as err:
        raise ToolError(f"cannot write {path!r}: {err.strerror or err}") from None
    return f"wrote {len(data)} bytes to {path} ({'overwritten' if existed else 'created'})"


async def write_file(root: Path, path: str, content: str, *, hidden: Sequence[Path] = ()) -> str:
    """Create or replace a whole file atomically; missing parent folders are created. `hidden`: see `_private`."""
    base = _base(root)
    return await asyncio.to_thread(_write_sync, base, path, content, _private(base, hidden))


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _occurrences(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _closest_line_hint(text: str, old: str) -> str:
    first = next((line.strip() for line in old.split("\n") if line.strip()), "")
    if not first:
        return ""
    lines = text.split("\n")
    if len(lines) > 50_000:
        return ""
    for n, line in enumerate(lines, 1):
        if line.strip() == first:
            return (
                f" Line {n} has the same text as your first line but different indentation or surroundings: "
                f"{line.rstrip()!r}."
            )
    stripped = [line.strip() for line in lines]
    close = difflib.get_close_matches(first, stripped, n=1, cutoff=0.6)
    if close:
        n = stripped.index(close[0]) + 1
        return f" The closest is line {n}: {lines[n - 1].rstrip()!r}."
    return ""


def _edit_sync(base: Path, path: str, old: str, new: str, hidden: Sequence[Path]) -> str:
    if not old:
        raise ToolError("old must not be empty; use write_file to create a file or replace it entirely")
    if old == new:
        raise ToolError("old and new are identical; nothing would change")
    target = _existing_file(base, path, hidden)
    _refuse_git_metadata(base, path, target)
    with open_resolved(base, target, path) as fh:
        raw = fh.read()
    _refuse_binary(raw[:BINARY_SNIFF_BYTES], path, len(raw))
    text = _decode(raw, path)
    hits = _occurrences(text, old)
    if not hits and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # The model saw the file without carriage returns; match it the way it is stored.
        old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        hits = _occurrences(text, old)
    if not hits:
        raise ToolError(
            f"old text not found in {path}: it must match the file exactly, including whitespace and indentation"
            " (read_file shows a tab after each line number that is not part of the file)."
            f"{_closest_line_hint(text, old)}"
        )
    if len(hits) > 1:
        where = ", ".join(str(_line_of(text, i)) for i in hits[:20])
        raise ToolError(
            f"old text occurs {len(hits)} times in {path} (at lines {where}); "
            "include more surrounding lines so it is unique"
        )
    at = hits[0]
    updated = text[:at] + new + text[at + len(old) :]
    try:
        _atomic_write(base, target, updated.encode("utf-8"))
    except OSError as err:  # UnsafePath too: a link put on the way since the check
        raise ToolError(f"cannot write {path!r}: {err.strerror or err}") from None
    first = _line_of(text, at)
    removed, added = old.count("\n") + 1, new.count("\n") + 1
    return f"edited {path}: replaced {removed} line(s) at line {first} with {added} line(s)"


async def edit_file(root: Path, path: str, old: str, new: str, *, hidden: Sequence[Path] = ()) -> str:
    """Replace the one exact occurrence of `old` with `new` (atomic); zero or several occurrences are an error.
    `hidden`: see `_private`."""
    base = _base(root)
    return await asyncio.to_thread(_edit_sync, base, path, old, new, _private(base, hidden))


# --- glob / grep / list ----------------------------------------------------------------------------------------------

_MAGIC = re.compile(r"[*?\[{]")


def _translate_segment(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            close = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "^") else i + 1)
            if close < 0:
                out.append(re.escape(ch))
            else:
                body = segment[i + 1 : close]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = close
        elif ch == "{":
            close = segment.find("}", i)
            if close < 0:
                out.append(re.escape(ch))
            else:
                options = segment[i + 1 : close].split(",")
                out.append("(?:" + "|".join(_translate_segment(o) for o in options) + ")")
                i = close
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob over `/`-separated relative paths: `*`, `?`, `[abc]`, `{a,b}`, and `**` for any depth."""
    if pattern.count("*") > GLOB_MAX_STARS:  # each star multiplies Python re's backtracking over a long name
        raise ToolError(f"the glob {pattern!r} has more than {GLOB_MAX_STARS} '*'; use a simpler pattern")
    segments = [s for s in pattern.strip().split("/") if s not in ("", ".")]
    parts: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_translate_segment(segment) + ("" if last else "/"))
    return re.compile("".join(parts), re.DOTALL)


def _check_pattern(pattern: str) -> None:
    text = pattern.strip()
    if not text:
        raise ToolError("the glob pattern is empty; try '**/*' or '**/*.py'")
    if text.startswith(("/", "~")):
        raise PathOutsideWorkspace(f"{pattern!r} is absolute; glob patterns are relative to the workspace")
    if ".." in text.split("/"):
        raise PathOutsideWorkspace(f"{pattern!r} uses '..'; glob patterns cannot leave the workspace")


def _literal_base(base: Path, pattern: str, hidden: Sequence[Path]) -> Path:
    """The folder below which a pattern can match: its leading segments without wildcards."""
    segments = [s for s in pattern.strip().split("/") if s not in ("", ".")]
    literal: list[str] = []
    for segment in segments[:-1]:
        if _MAGIC.search(segment):
            break
        literal.append(segment)
    return _confine(base, "/".join(literal), hidden) if literal else base


def _glob_sync(base: Path, pattern: str, limit: int, hidden: Sequence[Path]) -> str:
    _check_pattern(pattern)
    regex = glob_to_regex(pattern)
    start = _literal_base(base, pattern, hidden)
    matches: list[str] = []
    if start.is_dir():
        for folder, dirs, files in walk_tree(start, root=base):
            _prune_private(folder, dirs, files, hidden)
            for name in dirs:
                rel = _rel(base, folder / name)
                if regex.fullmatch(rel):
                    matches.append(rel + "/")
            for name in files:
                rel = _rel(base, folder / name)
                if regex.fullmatch(rel) and not is_secret_file(name):
                    matches.append(rel)
    if not matches:
        return f"no files match {pattern!r}"
    matches.sort()
    shown = matches[:limit]
    more = f"\n({len(matches) - limit} more; narrow the pattern)" if len(matches) > limit else ""
    return "\n".join(shown) + more


async def glob(root: Path, pattern: str, limit: int = 500, *, hidden: Sequence[Path] = ()) -> str:
    """Relative paths matching `pattern` (`**` for any depth; folders end in `/`), sorted, at most `limit`; the bot's
    own folders (`hidden`, see `_private`) left out."""
    base = _base(root)
    return await asyncio.to_thread(_glob_sync, base, pattern, limit, _private(base, hidden))


def _snippet(line: str, match_at: int) -> str:
    line = line.rstrip("\r")
    if len(line) <= GREP_MAX_LINE_CHARS:
        return line
    begin = max(0, match_at - GREP_MAX_LINE_CHARS // 3)
    end = begin + GREP_MAX_LINE_CHARS
    return ("…" if begin else "") + line[begin:end] + ("…" if end < len(line) else "")


def _grep_files(base: Path, start: Path, file_glob: str | None, hidden: Sequence[Path]) -> Iterator[Path]:
    if start.is_file():
        if not is_secret_file(start.name):
            yield start
        return
    name_regex = path_regex = None
    if file_glob:
        if "/" in file_glob.strip().strip("/"):
            path_regex = glob_to_regex(file_glob)
        else:
            name_regex = glob_to_regex(file_glob.strip().strip("/"))
    for path in _files_in_path_order(base, start, hidden):
        if name_regex is not None and not name_regex.fullmatch(path.name):
            continue
        if path.is_symlink() and (not _inside(base, path) or is_secret_file(path.resolve().name)):
            continue  # a link pointing out of the workspace or at a secret: never read through it
        if path_regex is not None:
            rel_root, rel_start = _rel(base, path), _rel(start, path)
            if not (path_regex.fullmatch(rel_root) or path_regex.fullmatch(rel_start)):
                continue
        yield path


def _files_in_path_order(base: Path, folder: Path, hidden: Sequence[Path]) -> list[Path]:
    """Files (and links to files) below `folder` as `walk_tree` finds them, secrets and the bot's own folders
    (`hidden`) left out, in path order."""
    found = []
    for here, dirs, files in walk_tree(folder, root=base):
        _prune_private(here, dirs, files, hidden)
        found += [here / name for name in files if not is_secret_file(name) and (here / name).is_file()]
    return sorted(found, key=lambda path: path.relative_to(folder).parts)


def _inside(base: Path, path: Path) -> bool:
    try:
        return path.resolve().is_relative_to(base)
    except (OSError, RuntimeError):
        return False


def _grep_targets(base: Path, path: str, file_glob: str | None, hidden: Sequence[Path]) -> list[Path]:
    """The files grep may read, in sorted path order: confined, no secrets, no SKIP_DIRS, no links out, nothing of
    the bot's own folders (`hidden`)."""
    start = _confine(base, path, hidden)
    if not start.exists():
        raise ToolError(f"No such file or folder: {path!r}.{_nearby(base, start)}")
    if start.is_file() and start.stat().st_size > GREP_MAX_FILE_BYTES:
        raise ToolError(f"{path!r} is larger than {GREP_MAX_FILE_BYTES:,} bytes; read_file a line range instead")
    return list(_grep_files(base, start, file_glob, hidden))


_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO put in a file's place must not hang the search; a regular file ignores it
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _grep_open(base: Path, paths: Sequence[Path], hidden: Sequence[Path] = ()) -> list[int | None]:
    """A read-only fd of each of `paths` (files `_grep_targets` chose, below `base`) for ripgrep, through its name
    with no link followed from `base` on (each folder opened once per call, O_NOFOLLOW); a link to a file is opened
    as what it resolves to, when that is below `base`, outside `hidden` and no secret. None where that fails: the
    file is left out, as ripgrep leaves out a file it cannot read. Names are cut as strings, not Paths: this runs for
    every file of a search (about 15 µs a file with pathlib, a third of a grep over 5,000 files)."""
    folders: dict[str, int] = {}
    root = str(base)

    def folder_fd(relative: str) -> int:
        """The fd of the folder `relative` to `base` ("" for `base` itself), each folder of the way opened once."""
        fd = folders.get(relative)
        if fd is None:
            if not relative:
                fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            else:
                parent, _, name = relative.rpartition("/")
                fd = os.open(name, _FOLDER_FLAGS, dir_fd=folder_fd(parent))
            folders[relative] = fd
        return fd

    def opened(path: str) -> int:
        """`path` (absolute, below `base`) opened with no link followed; OSError (ELOOP for a link) otherwise."""
        folder, _, name = path.rpartition("/")
        if folder == root:
            return os.open(name, _FILE_FLAGS, dir_fd=folder_fd(""))
        if not folder.startswith(root + "/"):
            raise OSError(errno.EXDEV, "outside the workspace")
        return os.open(name, _FILE_FLAGS, dir_fd=folder_fd(folder[len(root) + 1 :]))

    def one(path: Path) -> int | None:
        try:
            try:
                fd = opened(str(path))
            except OSError as err:
                if err.errno != errno.ELOOP:
                    raise
                target = path.resolve()  # a link to a file: what it points at, if it stays below `base`
                if not target.is_relative_to(base) or is_secret_file(target.name) or _is_private(target, hidden):
                    return None
                fd = opened(str(target))
        except (OSError, RuntimeError, ValueError):
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd

    try:
        return [one(path) for path in paths]
    finally:
        for fd in folders.values():
            os.close(fd)


def _grep_line(base: Path, found: ripgrep.LineMatch, secrets: SecretsFilter) -> str:
    text = found.text.decode("utf-8", errors="replace")
    at = len(found.text[: max(found.column - 1, 0)].decode("utf-8", errors="replace"))
    return secrets.mask(f"{_rel(base, found.path)}:{found.line}: {_snippet(text, at)}")


async def grep(
    root: Path,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    max_matches: int = 200,
    *,
    secrets: SecretsFilter,
    hidden: Sequence[Path] = (),
) -> str:
    """Search text files line by line (ripgrep's regex syntax); output `path:line: text` (each line through
    `secrets`), skipping binaries, SKIP_DIRS and the bot's own folders (`hidden`, see `_private`).

    The search runs in ripgrep (agents/tools/ripgrep.py): linear time, a timeout, never on the event loop.
    """
    ripgrep.check_pattern(pattern)
    base = _base(root)
    private = _private(base, hidden)
    files = await asyncio.to_thread(_grep_targets, base, path, glob, private)
    found, more = await ripgrep.collect(
        pattern, files, max_matches, ignore_case=ignore_case, opener=lambda paths: _grep_open(base, paths, private)
    )
    results = [_grep_line(base, match, secrets) for match in found]
    if not results:
        where = "" if path in (".", "") else f" in {path}"
        filt = f" (files matching {glob!r})" if glob else ""
        return f"no matches for {pattern!r}{where}{filt}"
    if more:
        results.append(f"(stopped after {max_matches} matches; narrow the pattern, path or glob to see the rest)")
    return "\n".join(results)
