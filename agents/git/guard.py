"""The owner's repository is not the worker's to change: a snapshot of its shared state, checked and restored.

A task's worktree shares refs, hooks and config with the owner's checkout, so a command the worker runs could move the
owner's `main` (`git update-ref`), delete branches, plant hooks or rewrite `.git/config`. `RepositoryGuard` takes a
snapshot when the task starts (every ref but the task branch; the config, hooks, `info/`, alternates and per-worktree
config files of the shared git directory; the worktree's own HEAD and `.git` file) and, after every worker step and
at the end, puts back whatever moved, recording a warning for the task's summary. The bot's own changes (its
commits, other tasks' branches, merges) happen under `locks.bot_writes`, which takes every guard's snapshot again.

Whose change it was is told by what could have made it. The owner keeps working in their checkout while tasks run (a
commit on `main`, a new branch): a ref that moved while no task's process could have moved it is the owner's, taken
into every guard's snapshot and never undone. A task's processes could where they run unconfined (SANDBOX=off; the
sandbox shows the git metadata read-only) and one ran since the last check or runs now (`Activity`). Where several
tasks share the repository, each that could have made the change gets the warning, saying that the bot cannot tell
which: a race's summary must never call the attempt that moved `main` clean because another attempt's guard saw
the move first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agents.git.command import GitOutput, git_text, run_git
from agents.git.locks import repo_lock, unwatch, watch, watchers
from agents.git.ref_files import RefSources, ref_sources
from agents.git.repository import git_common_dir
from agents.git.worktrees import TaskWorktree, check_worktree_link, dot_git_text
from agents.sandbox.safe_paths import write_file

log = logging.getLogger(__name__)

Pause = Callable[[], contextlib.AbstractAsyncContextManager[None]]  # a task's processes stopped for a body
# (commands the task has started so far, whether a process of it runs now); None: none of them can change the shared
# git directory (the sandbox shows it read-only)
Activity = Callable[[], tuple[int, bool] | None]

# Paths (relative to the shared git directory) whose content is guarded: single files, and folders guarded whole.
GUARDED_FILES = ("config", "objects/info/alternates", "commondir")
GUARDED_FOLDERS = ("hooks", "info")
_MAX_GUARDED_BYTES = 4 * 1024 * 1024  # a guarded file bigger than this is compared by size and mtime only


@dataclass(frozen=True)
class _FileState:
    data: bytes
    mode: int


@dataclass
class _Snapshot:
    refs: dict[str, tuple[str, str]] = field(default_factory=dict)  # refname → (sha, symref target or "")
    files: dict[str, _FileState] = field(default_factory=dict)  # path under the common dir → content


class RepositoryGuard:
    """Watches one task's repository; `check()` restores and returns the warnings of that check."""

    def __init__(
        self,
        tree: TaskWorktree,
        common_dir: Path,
        admin_dir: Path,
        link_text: str,
        pause: Pause | None = None,
        activity: Activity | None = None,
        label: str = "",
    ) -> None:
        self.tree, self.common_dir, self.admin_dir = tree, common_dir, admin_dir
        self.pause = pause  # the task's processes stopped for a body (the bot writing to the repository meanwhile)
        self.activity = activity  # None: the task is taken to have run something at every check
        self.label = label or tree.branch  # how another task's warning names this one ("#3")
        self._started_then = 0  # the task's commands started when the repository was last as the snapshot holds it
        self.task_ref = f"refs/heads/{tree.branch}"
        self.link_text = link_text  # the worktree's `.git` file as git wrote it
        self.snapshot = _Snapshot()
        self.warnings: list[str] = []  # every warning so far, for the summary
        self._ref_sources: RefSources | None = None  # what `ref_sources` read when the snapshot's refs were read
        self._reported = 0
        # the shared git directory guarded (its device and inode): another at its path (the workspace renamed and
        # cloned afresh, swapped for a link) is not the task's repository, and nothing of it is ever "restored"
        self._identity = _identity(common_dir)
        self.replaced = False

    @classmethod
    async def start(
        cls, tree: TaskWorktree, pause: Pause | None = None, activity: Activity | None = None, label: str = ""
    ) -> RepositoryGuard:
        common = await git_common_dir(tree.repo)
        admin = await check_worktree_link(tree)
        guard = cls(tree, common, admin, (tree.path / ".git").read_text("utf-8"), pause, activity, label)
        async with repo_lock(tree.repo):
            await guard.resnapshot()
            watch(tree.repo, guard)
        return guard

    def unreported(self) -> list[str]:
        """The warnings not handed out by an earlier call (each goes into the task's events once)."""
        new, self._reported = self.warnings[self._reported :], len(self.warnings)
        return new

    def close(self) -> None:
        unwatch(self.tree.repo, self)

    async def check(self) -> list[str]:
        """Compare with the snapshot, restore what moved; the new warnings (also kept in `warnings`)."""
        before = len(self.warnings)
        async with repo_lock(self.tree.repo):
            await self.verify()
        return self.warnings[before:]

    # ---- the watcher protocol of agents.git.locks (called with the repository lock held) ---------------------
    async def resnapshot(self) -> None:
        if not self._still_the_repository():
            return
        before = ref_sources(self.common_dir, self.tree.repo)
        if self._same_refs_as_snapshot(before):
            # the bot's change moved no ref but the task's own (its commit; a worktree removed; nothing to commit):
            # the refs read last time stand
            self.snapshot = _Snapshot(refs=self.snapshot.refs, files=self._files())
            self._ref_sources = before
            return
        refs = await self._refs()
        self.snapshot = _Snapshot(refs=refs, files=self._files())
        # kept only when nothing moved while git read the refs: then these sources are exactly what it read
        self._ref_sources = (
            before if before is not None and before == ref_sources(self.common_dir, self.tree.repo) else None
        )
        self._settled()

    def paused(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self.pause() if self.pause is not None else contextlib.nullcontext()

    def _still_the_repository(self) -> bool:
        """Whether the shared git directory at its path is still the one snapshotted; once it is not, the guard stops
        (said once in the task's warnings): undoing the differences between two repositories would rewind the
        owner's branches and delete their refs in a repository the task never had."""
        if not self.replaced and _identity(self.common_dir) != self._identity:
            self.replaced = True
            log.warning("%s: %s is another repository now: no longer guarded", self.label, self.common_dir)
            self.warnings.append(
                "the workspace's repository was moved or replaced while the task ran: the bot no longer guarded it, "
                "and changed nothing in the repository now at its path"
            )
        return not self.replaced

    async def verify(self) -> None:
        if not self._still_the_repository():
            return
        self._restore_link()
        await self._restore_head()
        refs = await self._moved_refs()
        files = self._files()
        fellows = [w for w in watchers(self.tree.repo) if isinstance(w, RepositoryGuard) and not w.replaced] or [self]
        if refs is not None or files != self.snapshot.files:
            suspects = [guard for guard in fellows if guard.could_have_changed()]
            if not suspects:  # no task's process could have: the owner's change, kept by every guard
                log.info("%s: the repository's refs or git files changed while no task could: the owner's", self.label)
                for guard in fellows:
                    await guard.resnapshot()
                return
            said = await self._restore_refs(refs) + self._restore_files(files)
            for guard in suspects:
                guard.blame(said, [other.label for other in suspects if other is not guard])
        for guard in fellows:
            guard._settled()

    # ---- whose change ------------------------------------------------------------------------------------------------
    def could_have_changed(self) -> bool:
        """Whether this task's processes could have made a change found now: unconfined, and one ran since the
        repository was last as the snapshot holds it, or one runs now."""
        if self.activity is None:
            return True
        found = self.activity()
        return found is not None and (found[1] or found[0] != self._started_then)

    def blame(self, said: list[str], others: list[str]) -> None:
        """Record what was undone as this task's, naming the other tasks that could as well have done it."""
        also = f" (this task's worker or that of {', '.join(others)}, running on this repository at the same time)"
        for text in said:
            self.warnings.append(text.replace("the worker ", "a worker ", 1) + also if others else text)

    def _settled(self) -> None:
        """The repository is as the snapshot holds it: the task's commands so far are accounted for, unless one still
        runs (it may change the repository after this look; keeping the earlier count counts it at the next)."""
        found = self.activity() if self.activity is not None else None
        if found is not None and not found[1]:
            self._started_then = found[0]

    # ---- refs --------------------------------------------------------------------------------------------------------
    async def _refs(self) -> dict[str, tuple[str, str]]:
        text = await git_text("for-each-ref", "--format=%(refname)%00%(objectname)%00%(symref)", cwd=self.tree.repo)
        refs: dict[str, tuple[str, str]] = {}
        for line in text.splitlines():
            name, _, rest = line.partition("\0")
            sha, _, symref = rest.partition("\0")
            if name and name != self.task_ref:
                refs[name] = (sha, symref)
        return refs

    def _same_refs_as_snapshot(self, sources: RefSources | None) -> bool:
        """Whether `sources` (what `ref_sources` reads now) hold the snapshot's refs, told without git: every file git
        reads the refs from holds the bytes it held when the snapshot's refs were read, but for the task's own
        branch (a loose ref the snapshot leaves out, and the folders above it) where no loose ref is symbolic (one
        could name the task's branch)."""
        if sources is None or self._ref_sources is None:
            return False
        if sources == self._ref_sources:
            return True
        then, now = dict(self._ref_sources), dict(sources)
        moved = {name for name in then.keys() | now.keys() if then.get(name) != now.get(name)}
        parts = self.task_ref.split("/")
        own = {self.task_ref} | {"/".join(parts[:i]) + "/" for i in range(2, len(parts))}
        if not moved <= own:
            return False
        return not any(
            name.startswith("refs/") and data.startswith(b"ref:") for name, data in [*then.items(), *now.items()]
        )

    async def _moved_refs(self) -> dict[str, tuple[str, str]] | None:
        """The refs now where any differs from the snapshot's; None where none does."""
        sources = ref_sources(self.common_dir, self.tree.repo)
        if self._same_refs_as_snapshot(sources):
            self._ref_sources = sources
            return None
        now = await self._refs()
        return now if now != self.snapshot.refs else None

    async def _restore_refs(self, now: dict[str, tuple[str, str]] | None) -> list[str]:
        """Put back every ref that differs from the snapshot (`now`: the refs as `_moved_refs` found them); what was
        done, a sentence each."""
        said: list[str] = []
        before = self.snapshot.refs
        if now is None:
            return said
        for name in sorted(set(now) | set(before)):
            if now.get(name) == before.get(name):
                continue
            if name not in before:
                result = await run_git("update-ref", "--no-deref", "-d", name, cwd=self.tree.repo)
                said.append(self._outcome(f"the worker created `{name}`; it was deleted again", result))
                continue
            sha, symref = before[name]
            if symref:
                result = await run_git("symbolic-ref", name, symref, cwd=self.tree.repo)
            else:
                result = await run_git("update-ref", "--no-deref", name, sha, cwd=self.tree.repo)
            if name not in now:
                said.append(self._outcome(f"the worker deleted `{name}`; it was restored at {sha[:10]}", result))
            else:
                text = f"the worker moved `{name}` to {now[name][0][:10]}; it was put back at {sha[:10]}"
                said.append(self._outcome(text, result))
        return said

    # ---- files of the shared git directory ---------------------------------------------------------------------------
    def _files(self) -> dict[str, _FileState]:
        found: dict[str, _FileState] = {}
        candidates = [self.common_dir / name for name in GUARDED_FILES]
        for folder in GUARDED_FOLDERS:
            for dirpath, _dirs, names in os.walk(self.common_dir / folder, followlinks=False):
                candidates += [Path(dirpath) / name for name in names]
        candidates += sorted((self.common_dir / "worktrees").glob("*/config.worktree"))
        for path in candidates:
            state = _read(path)
            if state is not None:
                found[path.relative_to(self.common_dir).as_posix()] = state
        return found

    def _restore_files(self, now: dict[str, _FileState]) -> list[str]:
        """Put back every guarded file that differs from the snapshot (`now`: as `_files` found them); what was done."""
        said: list[str] = []
        before = self.snapshot.files
        for name in sorted(set(now) | set(before)):
            if now.get(name) == before.get(name):
                continue
            path = self.common_dir / name
            try:
                if name not in before:
                    _remove(path)
                    said.append(f"the worker added `.git/{name}`; it was removed")
                else:
                    _write(path, before[name])
                    verb = "removed" if name not in now else "changed"
                    said.append(f"the worker {verb} `.git/{name}`; it was restored")
            except OSError as err:
                said.append(f"the worker changed `.git/{name}` and it could not be restored: {err}")
        # a folder the worker put in place of a guarded file or folder is covered above only by its files
        for name in GUARDED_FOLDERS:
            folder = self.common_dir / name
            if folder.is_symlink():
                with contextlib.suppress(OSError):
                    folder.unlink()
                    folder.mkdir()
                said.append(f"the worker replaced `.git/{name}` with a link; it was removed")
        return said

    # ---- the worktree: its `.git` file and its HEAD ------------------------------------------------------------------
    def _restore_link(self) -> None:
        dot_git = self.tree.path / ".git"
        if not self.tree.path.is_dir():
            return
        if dot_git_text(dot_git) == self.link_text:  # a plain file, read by one descriptor (never a FIFO's wait)
            return
        try:
            _remove(dot_git)
            write_file(self.tree.path, ".git", self.link_text.encode("utf-8"))  # never through a link
            self.warnings.append("the worker replaced the worktree's `.git` file; it was restored")
        except OSError as err:
            self.warnings.append(f"the worker replaced the worktree's `.git` file and it could not be restored: {err}")

    async def _restore_head(self) -> None:
        head = self.admin_dir / "HEAD"
        if not self.admin_dir.is_dir():  # the worktree was removed
            return
        expected = f"ref: {self.task_ref}\n"
        try:
            current = head.read_text("utf-8")
        except OSError:
            current = ""
        if current == expected:
            return
        try:
            write_file(self.admin_dir, "HEAD", expected.encode("utf-8"))  # never through a link
            self.warnings.append(f"the worker switched its worktree off `{self.tree.branch}`; it was switched back")
        except OSError as err:
            self.warnings.append(f"the worker switched its worktree off its branch and it could not be undone: {err}")

    def _outcome(self, text: str, result: GitOutput) -> str:
        if result.exit_code != 0:
            text += f" (failed: {result.stderr.strip()[:200]})"
        log.warning("task branch %s: %s", self.tree.branch, text)
        return text


def _read(path: Path) -> _FileState | None:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return _FileState(b"symlink:" + os.readlink(path).encode(), info.st_mode)
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > _MAX_GUARDED_BYTES:
            return _FileState(f"size:{info.st_size} mtime:{info.st_mtime_ns}".encode(), info.st_mode)
        return _FileState(path.read_bytes(), info.st_mode)
    except OSError:
        return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _write(path: Path, state: _FileState) -> None:
    if state.data.startswith(b"symlink:"):
        _remove(path)
        path.symlink_to(state.data.removeprefix(b"symlink:").decode())
        return
    if path.is_dir() or path.is_symlink():
        _remove(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path.parent, path.name, state.data, mode=stat.S_IMODE(state.mode))  # a fresh file, never via a link


def _identity(path: Path) -> tuple[int, int] | None:
    """A folder's device and inode (None: gone)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino
