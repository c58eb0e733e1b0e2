"""grep's engine: ripgrep in a subprocess, so a search is linear in its input, bounded in time and killable.

Python's `re` backtracks (`(a+)+$` over a line of 31 `a`s and a `!` takes minutes) and holds the interpreter lock
while it does, freezing every chat. ripgrep's Rust regex engine never backtracks; it runs in its own session,
is killed with its whole process group on timeout or cancel, and prints at most `MAX_COLUMNS` of a line.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import resource
import shutil
import signal
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agents.core.errors import ToolError
from agents.sandbox.clean_env import child_env
from agents.sandbox.reaping import start_group

MAX_PATTERN_CHARS = 1000
MAX_COLUMNS = 10_000  # longer lines are printed cut to this many bytes (the match is still found)
MAX_FILE_SIZE = "5M"
TIMEOUT_SECONDS = 20.0
# explicit file arguments per rg process: the command line stays far below ARG_MAX, and the files an opener opened
# (one descriptor each) far below the process's limit of open files: 256 under the common soft limit of 1,024, up to
# 1,000 where the limit is higher (each run is a process to start: 5,000 files took 20 runs at 256)
_SOFT_FILE_LIMIT = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
FILES_PER_RUN = 1000 if _SOFT_FILE_LIMIT == resource.RLIM_INFINITY else min(1000, max(256, _SOFT_FILE_LIMIT // 20))
# how ripgrep names a descriptor it inherited: /proc/self/fd/N directly (/dev/fd is a link to it: one more step of
# path resolution for each file), /dev/fd/N where there is no /proc
_FD_FOLDER = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
Opener = Callable[[Sequence[Path]], "list[int | None]"]  # the files of one rg run -> a read-only fd each, or None
SYNTAX = "ripgrep's Rust regex syntax: no look-around and no backreferences"
_PREVIEW_TAIL = b" [... omitted end of long line]"


class GrepTimeout(ToolError):
    """The search ran past TIMEOUT_SECONDS and was killed."""


@dataclass(frozen=True)
class LineMatch:
    path: Path
    line: int
    column: int  # 1-based byte offset of the first match in the line
    text: bytes  # the line without its end, at most MAX_COLUMNS bytes


def ripgrep_path() -> str | None:
    return shutil.which("rg")


def _command(rg: str, pattern: str, ignore_case: bool, files: Sequence[Path]) -> list[str]:
    return [
        rg,
        "--no-config",
        "--threads",
        "1",
        "--color",
        "never",
        "--no-heading",
        "--with-filename",
        "--null",
        "--line-number",
        "--column",
        "--max-columns",
        str(MAX_COLUMNS),
        "--max-columns-preview",
        "--max-filesize",
        MAX_FILE_SIZE,
        "--regex-size-limit",
        "20M",
        "--dfa-size-limit",
        "20M",
        *(["--ignore-case"] if ignore_case else []),
        "--regexp",
        pattern,
        "--",
        *map(str, files),
    ]


def check_pattern(pattern: str) -> None:
    if not pattern:
        raise ToolError("the pattern is empty; give a regular expression to search for")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"the pattern is {len(pattern):,} characters long; the limit is {MAX_PATTERN_CHARS:,}")
    if "\x00" in pattern:
        raise ToolError("the pattern contains a NUL byte")


def _parse(record: bytes) -> LineMatch | None:
    """`path NUL line:column:text`; rg's other lines (e.g. 'binary file matches') have no NUL and are skipped."""
    path, sep, rest = record.partition(b"\x00")
    if not sep:
        return None
    line, _, rest = rest.partition(b":")
    column, _, text = rest.partition(b":")
    if not (line.isdigit() and column.isdigit()):
        return None
    text = text.removesuffix(_PREVIEW_TAIL)
    return LineMatch(Path(os.fsdecode(path)), int(line), int(column), text.rstrip(b"\r"))


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # its own session: the group id is its pid


async def _run_one(
    rg: str, pattern: str, ignore_case: bool, files: Sequence[Path], opener: Opener | None
) -> AsyncGenerator[LineMatch, None]:
    opened: dict[Path, Path] = {}  # /proc/self/fd/N as rg names it -> the file it stands for
    try:
        if opener is not None:
            opened = await _open_all(opener, files)
            if not opened:
                return
        matches = _matches(rg, pattern, ignore_case, list(opened) or files, [int(p.name) for p in opened])
        try:
            async for found in matches:
                yield dataclasses.replace(found, path=opened[found.path]) if opened else found
        finally:
            await matches.aclose()  # kills a still-running rg before its files are closed
    finally:
        _close_all(opened)


async def _open_all(opener: Opener, files: Sequence[Path]) -> dict[Path, Path]:
    """`files` opened by `opener` in a thread (file I/O stays off the event loop): /proc/self/fd/N -> the file. A
    cancellation while they are being opened still closes them once they are."""

    def open_all() -> dict[Path, Path]:
        fds = opener(files)
        return {Path(f"{_FD_FOLDER}/{fd}"): path for path, fd in zip(files, fds, strict=True) if fd is not None}

    opening = asyncio.ensure_future(asyncio.to_thread(open_all))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(lambda done: _close_all(done.result()) if not done.exception() else None)
        raise


def _close_all(opened: dict[Path, Path]) -> None:
    for name in opened:
        os.close(int(name.name))


async def _matches(
    rg: str, pattern: str, ignore_case: bool, files: Sequence[Path], fds: list[int]
) -> AsyncGenerator[LineMatch, None]:
    process = await start_group(
        _command(rg, pattern, ignore_case, files),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=MAX_COLUMNS * 4 + 8192,
        pass_fds=fds,
        env=child_env(),  # the bot's own secrets stay with the bot
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        while record := await process.stdout.readline():
            if (found := _parse(record.rstrip(b"\n"))) is not None:
                yield found
        errors = (await process.stderr.read(4000)).decode("utf-8", "replace")
        code = await process.wait()
        if code == 2 and "regex" in errors.lower():  # a parse error or a size limit; unreadable files are skipped
            detail = " ".join(errors.split())
            raise ToolError(f"invalid regular expression {pattern!r}: {detail[:300]} (grep uses {SYNTAX})")
    finally:
        if process.returncode is None:
            _kill(process)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await process.wait()  # SIGKILLed: reaped at once


async def search(
    pattern: str, files: Sequence[Path], *, ignore_case: bool = False, opener: Opener | None = None
) -> AsyncGenerator[LineMatch, None]:
    """Matching lines of `files` in the given order. The caller's loop may stop early: rg is then killed.

    With `opener`, rg never opens a path itself: the files of each run are opened by `opener` (a read-only fd each,
    or None to leave the file out) and rg reads them as `/proc/self/fd/N`, so a path that changed since the caller
    checked it (a folder swapped for a symlink) is never followed by rg. (It costs: rg reads a file by its descriptor
    about half as fast as by its path, measured over 5,000 small files.)"""
    rg = ripgrep_path()
    if rg is None:
        raise ToolError(
            "grep is unavailable: ripgrep (`rg`) is not installed on the bot's machine "
            "(Debian/Ubuntu: apt-get install ripgrep); use glob and read_file instead"
        )
    check_pattern(pattern)
    for begin in range(0, len(files), FILES_PER_RUN):
        async for found in _run_one(rg, pattern, ignore_case, files[begin : begin + FILES_PER_RUN], opener):
            yield found


async def collect(
    pattern: str,
    files: Sequence[Path],
    limit: int,
    *,
    ignore_case: bool = False,
    timeout: float = TIMEOUT_SECONDS,
    opener: Opener | None = None,
) -> tuple[list[LineMatch], bool]:
    """Up to `limit` matches and whether there were more; GrepTimeout (rg killed) after `timeout` seconds."""
    found: list[LineMatch] = []
    more = False

    async def gather() -> None:
        nonlocal more
        matches = search(pattern, files, ignore_case=ignore_case, opener=opener)
        try:
            async for match in matches:
                if len(found) >= limit:
                    more = True
                    break
                found.append(match)
        finally:
            await matches.aclose()  # kills a still-running rg

    try:
        async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it can swallow a cancellation
            await gather()
    except TimeoutError:
        raise GrepTimeout(
            f"the search took longer than {timeout:.0f} s and was stopped; narrow the path or glob, "
            "or simplify the pattern"
        ) from None
    return found, more
