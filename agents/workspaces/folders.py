"""Workspaces: the project folders under WORKSPACE_PATH (plus `self`), tolerant name resolution, and path confinement.

Every tool failure the model can cause is a `ToolError` (defined next to the toolbox) whose message is written for
the model to read and act on.
"""

from __future__ import annotations

import difflib
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from agents.core.errors import NotAllowed, ToolError

SELF_NAME = "self"

# Spoken / typed ways of naming the bot's own repository (compared after normalisation).
_SELF_ALIASES = (
    "self",
    "yourself",
    "your code",
    "your own code",
    "your repo",
    "your repository",
    "your source",
    "your source code",
    "the bot",
    "bot",
    "agentlab",
    "agent lab",
    "you",
)
_NOISE_PREFIXES = ("the ", "my ", "our ")
_NOISE_SUFFIXES = ("project", "repository", "repo", "folder", "directory", "workspace", "codebase")
_SEPARATORS = re.compile(r"[\s\-_.]+")
FUZZY_CUTOFF = 0.75
_MIN_PREFIX_LEN = 2
_MIN_CONTAINS_LEN = 3


class WorkspaceNotFound(ToolError):
    """No workspace, or more than one equally good workspace, matches a name."""


class PathOutsideWorkspace(ToolError):
    """A path would leave the task's workspace (absolute, `..`, or a symlink pointing out)."""


class OwnersOnly(NotAllowed):
    """A member reached for the bot's own checkout (`self`, by whatever name or path)."""


@dataclass(frozen=True)
class Workspace:
    """A named folder an agent may work in; `path` is resolved (absolute, symlinks followed). `is_self`: the folder
    is the bot's own checkout (BOT_REPOSITORY) or holds it, or its git repository is the bot's, whatever its name:
    `self`, or a folder `agentlab` under WORKSPACE_PATH, or a link to it; only owners reach it (`check_reach`)."""

    name: str
    path: Path
    is_self: bool = False


def _full_key(name: str) -> str:
    """Casefold and drop separators: 'Group-Therapy' -> 'grouptherapy'."""
    return _SEPARATORS.sub("", name.casefold().strip())


def _reduced_key(name: str) -> str:
    """Like `_full_key`, but also drop transcription noise ('the ', trailing 'project', 'repo', ...)."""
    text = " ".join(_SEPARATORS.sub(" ", name.casefold()).split())
    changed = True
    while changed:
        changed = False
        for prefix in _NOISE_PREFIXES:
            if text.startswith(prefix) and len(text) > len(prefix):
                text, changed = text[len(prefix) :].strip(), True
        for suffix in _NOISE_SUFFIXES:
            if text.endswith(suffix) and len(text) > len(suffix):
                text, changed = text[: -len(suffix)].strip(), True
    return text.replace(" ", "") or _full_key(name)


_SELF_KEYS = frozenset({_full_key(a) for a in _SELF_ALIASES} | {_reduced_key(a) for a in _SELF_ALIASES})


class Workspaces:
    """The workspaces available to agents: sub-folders of `root` (hidden ones skipped) plus `self` (the bot's
    repository).

    The folder list is current on every call, so new projects show up without a restart: it is rescanned whenever
    the root folder's modification time moved (a folder or link added, removed or renamed in it), else the last scan
    is reused (one stat instead of a scan and a path resolution per project on every turn of every chat).
    A folder named `self` (in any case or spelling whose key is `self`) is hidden when a bot repository is configured
    (the name is reserved). So is any folder that is one of the bot's `private` folders (its data folder and task
    worktrees, `PathSettings.private_dirs`: every chat's database and checkouts) or a link into one
    (`overlaps_private`).
    """

    def __init__(self, root: Path, bot_repository: Path | None = None, private: Sequence[Path] = ()) -> None:
        self.root = Path(root).expanduser()
        self.bot_repository = Path(bot_repository).expanduser() if bot_repository is not None else None
        self.private = tuple(Path(folder).expanduser().resolve() for folder in private)
        self._scanned: tuple[int, list[Workspace]] | None = None  # (root's mtime_ns, its projects) from the last scan

    def all(self) -> list[Workspace]:
        found = list(self._projects())
        if self.bot_repository is not None and self.bot_repository.is_dir():
            found.append(Workspace(SELF_NAME, self.bot_repository.resolve(), is_self=True))
        return sorted(found, key=lambda w: (w.name.casefold(), w.name))

    def reaches_bot(self, path: Path) -> bool:
        """Whether the folder `path` (resolved) shows the bot's checkout: it is the checkout or holds it, or git run
        in it works on the bot's repository (a folder with no repository of its own inside the checkout, or a linked
        worktree of the bot's repository: a task's branch and worktree there would be the bot's code). A folder
        inside the checkout with a repository of its own shows only itself: WORKSPACE_PATH may live in the bot's
        folder."""
        if self.bot_repository is None:
            return False
        try:
            bot = self.bot_repository.resolve()
        except (OSError, RuntimeError):
            return False
        if path == bot or bot.is_relative_to(path):
            return True
        ours = repository_of(bot)
        return ours is not None and repository_of(path) == ours

    def overlaps_private(self, path: Path) -> bool:
        """Whether the folder `path` (resolved) is one of the bot's private folders, or lies in one outside the
        workspaces folder (a link to its attachments). One inside the workspaces folder is a workspace even where that
        folder lies in the data folder (DATABASE_PATH=/srv/bot/agentlab.db, WORKSPACE_PATH=/srv/bot/workspaces); one
        that holds a private folder (the bot's checkout, its `data/` inside) keeps it: the file tools hide it there."""
        root = self.root.resolve()
        return any(
            path == folder or (path.is_relative_to(folder) and not path.is_relative_to(root)) for folder in self.private
        )

    def clashes_with(self, name: str) -> str | None:
        """The workspace a new folder `name` would be taken for, or made ambiguous with, by the tolerant matching of
        `resolve` (`group_therapy` beside `group-therapy`; `the-bot` or `your-code` for `self`); None when none."""
        full, reduced = _full_key(name), _reduced_key(name)
        for workspace in self.all():
            if full == _full_key(workspace.name) or reduced == _reduced_key(workspace.name):
                return workspace.name
        if self.bot_repository is not None and (full in _SELF_KEYS or reduced in _SELF_KEYS):
            return SELF_NAME
        return None

    def is_self(self, name: str) -> bool:
        """Whether `name` means the bot's own code (a workspace gone since: only when it is named `self`)."""
        try:
            return self.resolve(name).is_self
        except WorkspaceNotFound:
            return name == SELF_NAME

    def reach(self, name: str, owner: bool) -> Workspace:
        """The workspace `name` means, for a user who is (`owner`) or is not an owner: the one role check for `self`
        of every read-only look-up (a member's `read_file` of the bot's `mcp.json` is refused like a task on it)."""
        return check_reach(self.resolve(name), owner)

    def _projects(self) -> list[Workspace]:
        try:
            mtime = os.stat(self.root).st_mtime_ns
        except OSError:
            self._scanned = None
            return []
        if self._scanned is not None and self._scanned[0] == mtime:
            return self._scanned[1]
        projects = self._scan()
        # a change within the file system's timestamp granularity of this scan could leave the mtime unmoved: such a
        # scan is not kept, the next call scans again
        self._scanned = (mtime, projects) if time.time_ns() - mtime > 100_000_000 else None
        return projects

    def _scan(self) -> list[Workspace]:
        found: list[Workspace] = []
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            entries = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if self.bot_repository is not None and _full_key(entry.name) == SELF_NAME:
                continue  # `Self`, `SELF`, `s-elf`: spellings that name the bot's repository
            try:
                if not entry.is_dir():  # follows symlinks: a linked project folder counts
                    continue
            except OSError:
                continue
            path = Path(entry.path).resolve()
            if self.overlaps_private(path):
                continue  # the bot's data or task worktrees, or a link into them: no one's workspace
            found.append(Workspace(entry.name, path, is_self=self.reaches_bot(path)))
        return found

    def resolve(self, name: str) -> Workspace:
        """Find the workspace a (possibly spoken, misspelled) name means, or raise WorkspaceNotFound. Whether it is
        the bot's own code is asked again of the file system: the list is kept until WORKSPACE_PATH itself changes,
        and a folder's `.git` removed since (a change inside the folder) makes git there work on the bot's
        repository."""
        found = self._match(name)
        if found.is_self or not self.reaches_bot(found.path):
            return found
        return replace(found, is_self=True)

    def stored(self, name: str) -> Workspace:
        """The workspace of a name the bot stored (a conversation's binding, a task's workspace): exactly the folder of
        that name, or `self` only when the name is `self`. Never `resolve`'s tolerant matching: with the folder
        deleted, `notes` would become `notes-archive` and `bot` the bot's own code. Gone: WorkspaceNotFound."""
        found = next((w for w in self.all() if w.name == name), None)
        if found is None:
            raise WorkspaceNotFound(f"the workspace {name} is gone (its folder was removed or renamed)")
        if found.is_self or not self.reaches_bot(found.path):
            return found
        return replace(found, is_self=True)

    def confined(self, own: str, name: str | None) -> Workspace:
        """For a request confined to the workspace `own` (one from outside the chat): the workspace `name` means
        (none named: `own`) when it is `own`'s folder. Any other is refused without saying which workspaces exist
        (a name not found would list them)."""
        try:
            confined = self.resolve(own)
        except WorkspaceNotFound:
            raise ToolError(f"the workspace {own} is gone") from None  # its error would list the others
        if name is None or not name.strip():
            return confined
        try:
            named: Workspace | None = self.resolve(name)
        except WorkspaceNotFound:
            named = None
        if named is None or named.path != confined.path:
            raise ToolError(
                f"this request came from outside the chat and works in the workspace {confined.name} only; anything "
                "else is for the user to ask in their private chat"
            )
        return confined

    def _match(self, name: str) -> Workspace:
        available = self.all()
        cleaned = name.strip().strip("'\"`").strip().rstrip("/\\")
        if not cleaned:
            raise self._not_found("an empty workspace name", available)
        if "/" in cleaned or "\\" in cleaned or ".." in cleaned or "\x00" in cleaned:
            raise self._not_found(
                f"{name!r} looks like a path; a workspace is named by its folder name only", available
            )
        by_name = {w.name: w for w in available}
        full, reduced = _full_key(cleaned), _reduced_key(cleaned)

        # 1. exact match: literal name, then normalised, then with transcription noise removed.
        if cleaned in by_name:
            return by_name[cleaned]
        for key_fn, key in ((_full_key, full), (_reduced_key, reduced)):
            hits = [w for w in available if key_fn(w.name) == key]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                raise self._ambiguous(name, hits, available)

        # 2. the bot's own repository.
        if full in _SELF_KEYS or reduced in _SELF_KEYS:
            if SELF_NAME in by_name:
                return by_name[SELF_NAME]
            raise self._not_found(
                f"{name!r} (the bot's own repository is not available: BOT_REPOSITORY is unset or not a folder)",
                available,
            )

        # 3. unique prefix, then unique containment.
        folders = [w for w in available if not w.is_self]
        if len(reduced) >= _MIN_PREFIX_LEN:
            hits = [
                w for w in folders if _full_key(w.name).startswith(reduced) or _reduced_key(w.name).startswith(reduced)
            ]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                raise self._ambiguous(name, hits, available)
        if len(reduced) >= _MIN_CONTAINS_LEN:
            hits = [
                w
                for w in folders
                if reduced in _full_key(w.name)
                or (len(_reduced_key(w.name)) >= _MIN_CONTAINS_LEN and _reduced_key(w.name) in reduced)
            ]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                raise self._ambiguous(name, hits, available)

        # 4. fuzzy similarity; an exact tie between the best two is ambiguous.
        scored = sorted(
            ((self._similarity(full, reduced, w), w) for w in folders),
            key=lambda pair: (-pair[0], pair[1].name),
        )
        scored = [(score, w) for score, w in scored if score >= FUZZY_CUTOFF]
        if scored:
            best_score = scored[0][0]
            best = [w for score, w in scored if score == best_score]
            if len(best) == 1:
                return best[0]
            raise self._ambiguous(name, best, available)
        raise self._not_found(repr(name), available, closest=self._closest(full, reduced, folders))

    @staticmethod
    def _similarity(full: str, reduced: str, workspace: Workspace) -> float:
        theirs = {_full_key(workspace.name), _reduced_key(workspace.name)}
        return max(difflib.SequenceMatcher(None, mine, other).ratio() for mine in {full, reduced} for other in theirs)

    def _closest(self, full: str, reduced: str, folders: list[Workspace]) -> list[str]:
        scored = sorted(((self._similarity(full, reduced, w), w.name) for w in folders), key=lambda p: (-p[0], p[1]))
        return [n for score, n in scored[:3] if score >= 0.4]

    @staticmethod
    def _not_found(what: str, available: list[Workspace], closest: list[str] | None = None) -> WorkspaceNotFound:
        names = ", ".join(w.name for w in available) or "(none: WORKSPACE_PATH has no project folders)"
        hint = f" Closest: {', '.join(closest)}." if closest else ""
        return WorkspaceNotFound(f"No workspace matches {what}.{hint} Available workspaces: {names}.")

    @staticmethod
    def _ambiguous(name: str, hits: list[Workspace], available: list[Workspace]) -> WorkspaceNotFound:
        matches = ", ".join(sorted(w.name for w in hits))
        names = ", ".join(w.name for w in available)
        return WorkspaceNotFound(
            f"{name!r} is ambiguous: it matches {matches}. Use the exact name. Available workspaces: {names}."
        )


def repository_top(path: Path) -> Path | None:
    """The folder whose repository git run in `path` finds: the nearest one from `path` up with a `.git` entry
    (a folder or a worktree's file); None when there is none. Read from the file system, with no git process."""
    for folder in (path, *path.parents):
        try:
            if os.path.lexists(folder / ".git"):
                return folder
        except OSError:
            return None
    return None


def repository_of(path: Path) -> Path | None:
    """The git folder shared by every work tree of the repository git run in `path` works on (a linked worktree's
    `.git` file names a folder under it, whose `commondir` leads back to it); None when there is none. Read from the
    file system, with no git process; a `.git` file it cannot follow stands for itself."""
    top = repository_top(path)
    if top is None:
        return None
    dot_git = top / ".git"
    try:
        if dot_git.is_file():
            with dot_git.open(errors="replace") as file:  # git's own `.git` file is one short line
                head = file.read(4096).strip()
            if not head.startswith("gitdir:"):
                return dot_git
            git_dir = (top / head.removeprefix("gitdir:").strip()).resolve()
        else:
            git_dir = dot_git.resolve()
        # a `.git` folder (or a link to one, such as a linked worktree's own folder) may hold a `commondir` too: git
        # then works on the repository it names
        common = git_dir / "commondir"
        if common.is_file():
            with common.open(errors="replace") as file:
                return (git_dir / file.read(4096).strip()).resolve()
        return git_dir
    except (OSError, RuntimeError):
        return dot_git


def check_reach(workspace: Workspace, owner: bool) -> Workspace:
    """`workspace`, unless it is the bot's own checkout and the user is not an owner: then `OwnersOnly`."""
    if workspace.is_self and not owner:
        raise OwnersOnly(f"{workspace.name!r} is the bot's own code: only an owner can read or change it")
    return workspace


_SECRET_NAMES = frozenset({".env", ".envrc", ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass"})
_SHAREABLE_ENV = frozenset({".env.example", ".env.sample", ".env.template", ".env.dist"})
_SECRET_PATTERNS = re.compile(
    r"""(?x)
    .*\.(pem|key)              # certificates and private keys
    | id_[A-Za-z0-9_-]+         # SSH private keys (id_rsa, id_ed25519_sk…; not id_rsa.pub, not id_utils.py)
    | credentials.*\.json      # cloud service-account and OAuth credentials
    """,
    re.IGNORECASE,
)


def is_secret_file(name: str) -> bool:
    """Credential files never shown to a model nor written by one: `.env`, `.env.local`… (not `.env.example`),
    `.envrc`, `.netrc`, `.npmrc`, `.pypirc`, `.git-credentials`, `*.pem`, `*.key`, SSH keys, `credentials*.json`."""
    return (
        name in _SECRET_NAMES
        or (name.startswith(".env.") and name not in _SHAREABLE_ENV)
        or _SECRET_PATTERNS.fullmatch(name) is not None
    )


def names_a_credential(relative: str | Path) -> bool:
    """Whether a relative path is a credential file or lies in a folder named like one (`is_secret_file` of any of its
    parts): what a repository's own file may never hand to the tests."""
    return any(is_secret_file(part) for part in PurePosixPath(str(relative).rstrip("/")).parts)


def is_git_metadata(relative: str | Path) -> bool:
    """True for the `.git` entry of a checkout or anything below a `.git` folder (any case)."""
    return any(part.lower() == ".git" for part in PurePosixPath(str(relative).replace("\\", "/")).parts)


def confine(root: Path, relative: str | None) -> Path:
    """Resolve `relative` inside `root` (following symlinks) or raise PathOutsideWorkspace.

    Returns an absolute, resolved path that is `root` itself or lies below it.
    """
    base = Path(root).resolve()
    text = str(relative).strip() if relative is not None else ""
    if "\x00" in text:
        raise PathOutsideWorkspace(f"{text!r} contains a NUL byte; use a plain path relative to the workspace")
    if not text:
        return base
    if PurePosixPath(text).is_absolute() or Path(text).is_absolute() or text == "~" or text.startswith("~/"):
        hint = ""
        candidate = Path(os.path.normpath(text))
        if candidate.is_absolute():
            try:
                hint = f" (e.g. {candidate.resolve().relative_to(base).as_posix() or '.'!r})"
            except (ValueError, OSError, RuntimeError):
                hint = ""
        raise PathOutsideWorkspace(f"{text!r} is an absolute path; use paths relative to the workspace{hint}")
    try:
        target = (base / text).resolve(strict=False)
        # realpath stops at a symlink loop and joins the rest lexically ("loop/../link_out" → "<root>/link_out"
        # unresolved): resolve again until nothing changes, so a link after a loop cannot lead outside.
        for _ in range(8):
            again = target.resolve(strict=False)
            if again == target:
                break
            target = again
        else:
            raise RuntimeError("the path does not settle (symlink loop)")
    except (OSError, RuntimeError) as err:  # RuntimeError: symlink loop on 3.11
        raise PathOutsideWorkspace(
            f"{text!r} cannot be resolved ({err}); use a plain path relative to the workspace"
        ) from None
    if target == base or target.is_relative_to(base):
        if is_secret_file(target.name):
            raise PathOutsideWorkspace(
                f"{text!r} holds secrets (an environment, credential or key file); agents may not read or write it"
            )
        return target
    if (base / text).is_symlink() or any(p.is_symlink() for p in _existing_parents(base, text)):
        raise PathOutsideWorkspace(
            f"{text!r} is a symlink that points outside the workspace; only files inside it can be used"
        )
    raise PathOutsideWorkspace(f"{text!r} is outside the workspace; use paths relative to it")


def _existing_parents(base: Path, text: str) -> list[Path]:
    """The lexical prefixes of `base/text` below `base` (used only to word the error message)."""
    parts = PurePosixPath(text).parts
    return [base.joinpath(*parts[:i]) for i in range(1, len(parts) + 1) if ".." not in parts[:i]]
