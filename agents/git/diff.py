"""A task's diff for the chat, capped: a stat, then the patch cut at a size a phone (and Telegram) takes.

Binary files and huge files are named, never inlined; the patch streams from git into a file (`write_diff` never holds
more than one chunk in memory, and stops git once the cap is reached); the header says what was left out. A file is
binary by its bytes (a NUL near the start, as git itself decides), never because an attribute says so: the branch's
own `.gitattributes` (`*.py -diff`, `binary`) could otherwise hide a text change from the review.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from agents.core.text import human_size, some_of
from agents.git.command import git_text, run_git, split_nul, stream_git
from agents.git.commits import blob_sizes, file_size, pending_changes, stage_paths
from agents.git.worktrees import TaskWorktree, check_worktree_link, worktree_present
from agents.sandbox.temp_folders import temp_prefix

DIFF_MAX_BYTES = 1_000_000  # the whole document; Telegram takes up to 50 MB from a bot, a phone much less
HUGE_FILE_BYTES = 512 * 1024  # a file with a side this big is named, not inlined
STAT_MAX_FILES = 200
HEADER_MAX_BYTES = 32 * 1024
LISTED_MAX = 50  # names listed per kind of left-out file


@dataclass
class DiffReport:
    """What `write_diff` wrote and what it left out."""

    binary: list[str] = field(default_factory=list)
    huge: list[tuple[str, int]] = field(default_factory=list)
    truncated: bool = False
    written: int = 0

    def note(self) -> str:
        """One sentence for a caption: what is not in the document ('' when it is whole)."""
        parts = []
        if self.huge:
            parts.append(f"{len(self.huge)} huge file(s) named, not shown")
        if self.binary:
            parts.append(f"{len(self.binary)} binary file(s) named, not shown")
        if self.truncated:
            parts.append(f"the patch is cut at {human_size(DIFF_MAX_BYTES)}")
        return "; ".join(parts)


async def write_diff(worktree: TaskWorktree, out: BinaryIO, max_bytes: int = DIFF_MAX_BYTES) -> DiffReport:
    """Write the task's diff vs its base into `out`: header, stat, patch (committed, then uncommitted changes).

    While the worktree exists its uncommitted changes (untracked files too) follow the committed ones; afterwards the
    branch's diff.
    """
    present = worktree_present(worktree)
    if present:
        await check_worktree_link(worktree)
    cwd = worktree.path if present else worktree.repo
    span = f"{worktree.base_commit}..{'HEAD' if present else worktree.branch}"
    report = DiffReport()
    changed = await _classify(cwd, [span], report)
    passes = _passes(report, changed)
    stats = [
        await git_text(
            "diff",
            "--stat=120,90",
            f"--stat-count={STAT_MAX_FILES}",
            "--no-renames",
            "--text",  # what is left is text by its bytes (`_classify`), whatever an attribute says
            span,
            "--",
            *pathspecs,
            cwd=cwd,
        )
        for pathspecs in passes
    ]
    stat = "\n".join(text.rstrip() for text in stats if text.strip())
    body_limit = max_bytes - HEADER_MAX_BYTES  # the header goes in front, written once the body is known
    with tempfile.TemporaryFile() as body:
        used, cut = await _stream_passes(["diff", "--no-renames", "--text", span], passes, cwd, body, 0, body_limit)
        if present and not cut:
            used, cut = await _uncommitted(worktree.path, body, used, body_limit, report)
        report.truncated = cut
        header = _header(worktree, report, stat, used).encode("utf-8")[:HEADER_MAX_BYTES]
        out.write(header)
        body.seek(0)
        while chunk := body.read(65_536):
            out.write(chunk)
        report.written = len(header) + used
    if report.truncated:
        out.write(b"\n# [truncated: the patch was cut here; see the stat above for every file]\n")
    return report


async def _classify(
    cwd: Path, span: list[str], report: DiffReport, extra_env: dict[str, str] | None = None
) -> list[str]:
    """Add the binary files (numstat `-`, and a side with a NUL byte near its start: an attribute alone makes no file
    binary) and the huge files (either side over HUGE_FILE_BYTES) of `span`; the paths it changes."""
    numstat = split_nul(await git_text("diff", "--numstat", "-z", "--no-renames", *span, cwd=cwd, extra_env=extra_env))
    binary = {item.split("\t", 2)[2] for item in numstat if item.startswith("-\t-\t")}
    fields = split_nul(
        await git_text("diff", "--raw", "-z", "--no-renames", "--no-abbrev", *span, cwd=cwd, extra_env=extra_env)
    )
    sides: dict[str, tuple[str, str]] = {}
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].split()
        if len(meta) >= 4:
            sides[fields[i + 1]] = (meta[2], meta[3])
    blobs = sorted({blob for pair in sides.values() for blob in pair if set(blob) != {"0"}})
    sizes = await blob_sizes(cwd, blobs)
    for path, (old, new) in sorted(sides.items()):
        size = max(sizes.get(old, 0), sizes.get(new, 0))
        if size > HUGE_FILE_BYTES:
            if path not in {p for p, _ in report.huge}:
                report.huge.append((path, size))
        elif path in binary and path not in report.binary and await _holds_binary(cwd, (old, new), extra_env):
            report.binary.append(path)
    return list(sides)


BINARY_PROBE_BYTES = 8000  # how far git itself looks for a NUL to call a file binary


async def _holds_binary(cwd: Path, blobs: tuple[str, str], extra_env: dict[str, str] | None) -> bool:
    """Whether either side of a change holds a NUL in its first BINARY_PROBE_BYTES (git's own test; both sides are at
    most HUGE_FILE_BYTES here). A side that cannot be read counts as binary: named, not shown."""
    for blob in blobs:
        if set(blob) == {"0"}:  # the side that does not exist (an added or deleted file)
            continue
        read = await run_git("cat-file", "blob", blob, cwd=cwd, extra_env=extra_env)
        if read.exit_code != 0 or "\0" in read.stdout[:BINARY_PROBE_BYTES]:
            return True
    return False


def _passes(report: DiffReport, changed: list[str]) -> list[list[str]]:
    """The pathspecs of each `git diff` run that together show every change but the files named, not inlined.

    A pathspec excluding a path excludes everything under it too, so a file named not inlined that is also a folder
    on the other side (the branch deleted `src/` and added a big file `src`) would hide every change inside that
    folder: such a folder gets a run of its own (`src/` matches what is inside, never the file `src`)."""
    left_out = [*report.binary, *(p for p, _ in report.huge)]
    folders = {path[:i] for path in changed for i, char in enumerate(path) if char == "/"}
    runs = [[".", *(f":(exclude,literal){path}" for path in left_out)]]
    for folder in sorted(path for path in left_out if path in folders):
        inside = [f":(exclude,literal){path}" for path in left_out if path.startswith(folder + "/")]
        runs.append([f":(literal){folder}/", *inside])
    return runs


async def _stream_passes(
    command: list[str],
    passes: list[list[str]],
    cwd: Path,
    body: BinaryIO,
    used: int,
    limit: int,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, bool]:
    """`git <command> -- <pathspecs>` for each of `passes`, streamed into `body` after its `used` bytes, up to
    `limit` in all; (bytes used, whether the patch was cut)."""
    for pathspecs in passes:
        written, cut = await stream_git(
            *command, "--", *pathspecs, cwd=cwd, out=body, limit=max(0, limit - used), extra_env=extra_env
        )
        used += written
        if cut:
            return used, True
    return used, False


async def _uncommitted(path: Path, body: BinaryIO, used: int, limit: int, report: DiffReport) -> tuple[int, bool]:
    """HEAD vs the working tree (untracked files too) in a throwaway index; files over the commit limit are skipped
    before `git add`, so a huge file never reaches the object store through a Diff."""
    with tempfile.TemporaryDirectory(prefix=temp_prefix("index", "diff")) as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        await git_text("read-tree", "HEAD", cwd=path, extra_env=env)
        staged = []
        for name, code in await pending_changes(path, env):
            size = file_size(path / name)
            if "D" not in code and size > HUGE_FILE_BYTES:
                report.huge.append((name, size))
            else:
                staged.append(name)
        await stage_paths(path, staged, env)  # never `git add`: see stage_paths
        changed = await _classify(path, ["--cached", "HEAD"], report, env)
        if await _nothing_staged(path, env):
            return used, False
        marker = b"# uncommitted changes (not in a commit yet)\n"
        body.write(marker)
        command = ["diff", "--cached", "--no-renames", "--text", "HEAD"]
        return await _stream_passes(command, _passes(report, changed), path, body, used + len(marker), limit, env)


async def _nothing_staged(path: Path, env: dict[str, str]) -> bool:
    return (await run_git("diff", "--cached", "--quiet", "HEAD", cwd=path, extra_env=env)).exit_code == 0


def _header(worktree: TaskWorktree, report: DiffReport, stat: str, body_bytes: int) -> str:
    lines = [f"# Task branch {worktree.branch} vs its base {worktree.base_commit[:10]}"]
    if report.huge:
        lines.append(f"# Huge files, not shown (over {human_size(HUGE_FILE_BYTES)}):")
        lines += [f"#   {path} ({human_size(size)})" for path, size in report.huge[:LISTED_MAX]]
    if report.binary:
        lines.append("# Binary files, not shown:")
        lines += [f"#   {path}" for path in report.binary[:LISTED_MAX]]
    if report.truncated:
        lines.append(f"# The patch below is cut after {human_size(body_bytes)}; the stat lists every file.")
    lines += [f"# {line}" if line else "#" for line in stat.rstrip().splitlines()]
    return "\n".join(lines) + "\n\n"


def masked_additions(diff: str, mask: str) -> list[str]:
    """Where the added lines of a diff the output filter went over hold its `mask`: `path:line` (the branch's side).

    A line shaped like a credential (`authorization = …`, `extraheader = …`) is masked to its end, so a worker can
    hide code behind one; Merge brings it as written. The Diff names these lines so the owner reads them in the
    branch before merging."""
    found: list[str] = []
    path, line, in_hunk = "", 0, False
    for text in diff.splitlines():
        if text.startswith("diff --git "):
            path, in_hunk = "", False
        elif not in_hunk and text.startswith("+++ "):
            path = text[4:].removeprefix("b/")
        elif text.startswith("@@ "):
            new_side = text.split(" ", 3)[2]  # "+start,count"
            line, in_hunk = int(new_side[1:].split(",", 1)[0] or 0), True
        elif in_hunk and text.startswith("+"):
            if mask in text:
                found.append(f"{path}:{line}")
            line += 1
        elif in_hunk and not text.startswith("-") and not text.startswith("\\"):
            line += 1
    return found


def masked_note(places: list[str]) -> str:
    """The Diff's warning of `masked_additions` ('' when there are none)."""
    if not places:
        return ""
    shown = some_of(places, LISTED_MAX)
    return (
        f"{len(places)} added line(s) hold text the bot masked as a secret: Merge brings them as written, so read "
        f"them in the branch before merging ({shown})"
    )
