"""Repository map: an incremental per-workspace index of files and symbols, and a token-bounded map of it for workers.

Files come from the one walker (agents/workspaces/file_walk.py: git's view of the work tree), outlines from outline.py,
the order from ranking.py (personalized PageRank over definitions and references).

The index lives in the store. `RepoMap.refresh` re-parses only files that are new or whose content changed (a file
whose mtime changed but whose bytes hash the same is only touched) and drops the rows of deleted files; a task's
worktree index starts as a copy of its workspace's (`seed_from`). `RepoMap.render` picks definitions, best first,
until the map fills the token budget (tokens estimated as characters / 4), and writes them grouped by file.

Why one module of ~500 lines: the index's refresh, the background build a first task waits on (with a budget that
keeps time to draw), and the render share one lock per workspace and the store's rows; split apart, each part would
need the others' internals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from agents.core.errors import ToolError
from agents.core.text import estimate_tokens
from agents.core.user_turns import UserTurns
from agents.git.ref_files import head_from_files
from agents.repo_map.gc_pause import gc_paused
from agents.repo_map.outline import (
    BINARY_EXTENSIONS,
    MAX_FILE_BYTES,
    FileOutline,
    SameContent,
    file_extension,
)
from agents.repo_map.parse_pool import lower_priority, parse_batches
from agents.repo_map.ranking import FileTerms, Ranking, rank_files, word_keys
from agents.repo_map.symbols import Symbol
from agents.store.database import Store
from agents.tools.toolbox import Tool, prop
from agents.workspaces.file_walk import list_files, read_only_git

log = logging.getLogger(__name__)

RECENT_FILES = 20
# A first guess of a map's drawing time per indexed file (reading the index, ranking, layout), until renders here
# have measured it: ~0.5 ms on sympy's 1,557 files on a 2-core machine while a build runs beside it.
RENDER_SECONDS_PER_FILE = 0.0005
RENDER_FIXED_SECONDS = 0.2  # and what a map costs whatever its size (git's recent changes, thread hops, a wait on
# the build's writes to the store)
WAIT_POLL_S = 0.05  # how often a task waiting on a build re-checks how much is indexed
# The drawing time is an estimate: a partial map is planned to be done this share of the wait budget early, so a
# drawing a little slower than estimated (a busy machine) still ends within the budget.
WAIT_MARGIN_SHARE = 0.1
GC_PAUSE_MIN_FILES = 300  # a refresh parsing this many files stores them with the cyclic collector paused


@dataclass(frozen=True)
class RefreshStats:
    files_seen: int
    parsed: int
    removed: int
    seconds: float


@dataclass
class _FileRow:
    path: str
    size: int
    language: str | None
    summary: str
    mtime_ns: int


# --- scanning --------------------------------------------------------------------------------------------------------


def stat_files(root: Path, paths: list[str]) -> dict[str, tuple[int, int]]:
    """Relative path → (mtime_ns, size) of the regular files among `paths` (no symlinks, binary extensions, > 1 MB).

    No symlink anywhere on the way either: git lists a tracked file from its index even where a worker has since
    replaced a folder above it with a link out of the worktree."""
    found: dict[str, tuple[int, int]] = {}
    real: dict[str, bool] = {"": True}  # folder → whether it and every folder above it are real folders

    def real_folder(folder: str) -> bool:
        if folder not in real:
            parent = folder.rpartition("/")[0]
            try:
                real[folder] = real_folder(parent) and stat.S_ISDIR(os.lstat(root / folder).st_mode)
            except OSError:
                real[folder] = False
        return real[folder]

    for path in paths:
        if file_extension(path.rsplit("/", 1)[-1]) in BINARY_EXTENSIONS or not real_folder(path.rpartition("/")[0]):
            continue
        try:
            info = os.lstat(root / path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
            found[path] = (info.st_mtime_ns, info.st_size)
    return found


async def scan_files(root: Path) -> dict[str, tuple[int, int]]:
    """The candidate files of `root` (git's view, see agents/workspaces/file_walk.py) with their (mtime_ns, size)."""
    paths = await list_files(root)
    return await asyncio.to_thread(stat_files, root, paths)


# --- git -------------------------------------------------------------------------------------------------------------


async def git_head(root: Path) -> str | None:
    """The commit checked out in `root`, or None (not a git repository, or no commit yet). Read from the git files
    where HEAD is plainly a branch or a commit (no git process), asked of git otherwise."""
    if (head := head_from_files(Path(root))) is not None:  # a few small files: no thread needed
        return head
    out = await read_only_git(root, "rev-parse", "--verify", "-q", "HEAD")
    return (out or "").strip() or None


async def _recently_changed(root: Path, rows: dict[str, _FileRow]) -> list[str] | None:
    """Uncommitted changes, then files of the last commits (those among `rows` when any are given, at most
    RECENT_FILES then); None without git."""
    diff, log_out = await asyncio.gather(
        read_only_git(root, "diff", "--name-only", "--relative", "HEAD"),
        read_only_git(root, "log", f"-n{RECENT_FILES}", "--name-only", "--relative", "--pretty=format:"),
    )
    if diff is None and log_out is None:
        return None
    names = list(dict.fromkeys(line.strip() for line in f"{diff or ''}\n{log_out or ''}".splitlines()))
    names = [n for n in names if n and (not rows or n in rows)]
    return names[:RECENT_FILES] if rows else names


def _rank(
    rows: dict[str, _FileRow],
    symbol_rows: list[tuple[str, str, str, int, str, str | None]],
    terms: list[tuple[str, str, str]],
    imports: list[tuple[str, str]],
    request_text: str,
    recent: list[str],
) -> tuple[dict[str, list[Symbol]], Ranking]:
    """The index's symbols by file, and the ranking for the request (in a worker thread: all CPU).

    `symbol_rows` and `terms` are consumed (emptied once turned into symbols and FileTerms, which rank_files
    empties in turn as it reads them), and so are `imports` (rank_files empties them once read): on a big repository
    they are tens of megabytes a drawing need not hold."""
    symbols: dict[str, list[Symbol]] = {}
    for path, name, kind, line, signature, parent in symbol_rows:
        if path in rows:
            symbols.setdefault(path, []).append(Symbol(name, kind, line, signature, parent))
    symbol_rows.clear()
    file_terms = [FileTerms(path, refs, words) for path, refs, words in terms]
    terms.clear()
    return symbols, rank_files(sorted(rows), symbols, file_terms, imports, request_text, recent[:RECENT_FILES])


# --- the map ---------------------------------------------------------------------------------------------------------


def _symbol_lines(symbols: list[Symbol]) -> list[str]:
    lines = []
    for symbol in sorted(symbols, key=lambda s: s.line):
        depth = 1
        if symbol.parent and not symbol.signature.startswith(f"{symbol.parent}."):  # nested, not `res.send = …`
            depth += symbol.parent.count(".") + 1
        lines.append(f"{'  ' * depth}{symbol.line}: {symbol.signature}")
    return lines


def _truncation_note(files_left: int, budget_tokens: int) -> str:
    return f"… {files_left} more files not shown (map truncated at {budget_tokens} tokens)"


def _draw(
    name: str,
    rows: dict[str, _FileRow],
    files: list[str],
    chosen: dict[str, list[Symbol]],
    symbol_counts: dict[str, int],
    budget_tokens: int,
    title: bool,
) -> list[str]:
    """The map's lines for the chosen files (in rank order) and definitions, with the truncation note."""
    name = name.partition("@")[0]  # a task's copy of an index ("calc@task-7") is titled by its workspace
    lines = [f"Repository map of {name}: {len(files)} files, most relevant first; symbols as `line: signature`."]
    lines = lines if title else []
    shown = 0
    for path in files:
        if path not in chosen:
            continue
        row = rows[path]
        lines.append(path + (f" — {row.summary}" if row.summary else ""))
        lines += _symbol_lines(chosen[path])
        hidden = symbol_counts.get(path, 0) - len(chosen[path])
        if chosen[path] and hidden > 0:
            lines.append(f"  … {hidden} more symbols")
        shown += 1
    if shown < len(files):
        lines.append(_truncation_note(len(files) - shown, budget_tokens))
    return lines


def _layout(
    name: str,
    rows: dict[str, _FileRow],
    files: list[str],
    entries: list[tuple[str, Symbol | None]],
    symbol_counts: dict[str, int],
    budget_tokens: int,
) -> str:
    """As many of the ranked entries (files and definitions, best first) as fit in the budget, drawn by file.

    The title and the truncation note give way first when even one file does not fit with them.
    """
    budget_chars = budget_tokens * 4
    if not files:
        text = f"Repository map of {name}: no source files found."
        return text if estimate_tokens(text) <= budget_tokens else ""
    entries = entries[: budget_chars // 6 + 1]  # no line is shorter than ~6 characters

    def drawn(count: int, title: bool) -> list[str]:
        chosen: dict[str, list[Symbol]] = {}
        for path, symbol in entries[:count]:
            chosen.setdefault(path, [])
            if symbol is not None:
                chosen[path].append(symbol)
        return _draw(name, rows, files, chosen, symbol_counts, budget_tokens, title)

    def fits(lines: list[str]) -> bool:
        return sum(len(line) + 1 for line in lines) - 1 <= budget_chars

    for title in (True, False):
        low, high = 0, len(entries)  # the most entries whose drawing fits
        while low < high:
            middle = (low + high + 1) // 2
            if fits(drawn(middle, title)):
                low = middle
            else:
                high = middle - 1
        if low:
            return "\n".join(drawn(low, title))
    lines = drawn(1, False)[:1]  # the best file's name alone, without its note, if even that fits
    return "\n".join(lines) if fits(lines) else ""


def _file_rows(
    outlines: list[FileOutline], head: str | None
) -> list[tuple[str, int, int, str | None, str | None, str, str, str, str]]:
    """The store's rows for parsed files."""
    return [
        (o.path, o.mtime_ns, o.size, o.language, head, o.summary, o.content_hash, o.references, o.words)
        for o in outlines
    ]


class RepoMap:
    """The code index of every workspace, kept in the store, and the maps written from it."""

    def __init__(self, store: Store, turns: UserTurns | None = None) -> None:
        self.store = store
        self.turns = turns  # a build stores nothing while a user's turn is in flight (the answer comes first)
        self._locks: dict[str, asyncio.Lock] = {}
        self._building: dict[str, asyncio.Task[bool]] = {}  # background refreshes, by index name
        self._indexed: dict[str, int] = {}  # files in each index as its refresh stores them (for wait budgets)
        self._waiting: dict[str, int] = {}  # tasks waiting on the background build of each index
        self.render_seconds_per_file = RENDER_SECONDS_PER_FILE  # learnt from each render (a moving average)
        self._renders = 0  # maps being drawn: a build stores nothing meanwhile (the map is what a user waits on)
        self._no_render = asyncio.Event()
        self._no_render.set()

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    # ---- background builds ------------------------------------------------------------------------------------------
    def index_in_background(self, name: str, root: Path | str) -> asyncio.Task[bool]:
        """Refresh the index of `name` in the background (joining a refresh of it already running); the task says
        whether it completed. A cold build stores files as they are parsed, so a map can be drawn meanwhile."""
        task = self._building.get(name)
        if task is None or task.done():
            task = asyncio.create_task(self._build(name, root), name=f"index-{name}")
            self._building[name] = task
        return task

    def building(self, name: str) -> asyncio.Task[bool] | None:
        """The latest background refresh of `name` (running or finished), or None if there was none."""
        return self._building.get(name)

    async def _build(self, name: str, root: Path | str) -> bool:
        try:
            await self.refresh(name, root, urgent=False)
            return True
        except Exception as err:  # an index is a convenience; never let it break anything
            log.warning("could not index workspace %s: %s", name, err)
            return False

    async def close(self) -> None:
        """Stop the background builds (what they stored so far stays: the next refresh goes on from there)."""
        for task in self._building.values():
            task.cancel()
        await asyncio.gather(*self._building.values(), return_exceptions=True)
        self._building.clear()

    def render_estimate(self, name: str) -> float:
        """Seconds a map of `name` should take to draw now, from the files its index holds."""
        return RENDER_FIXED_SECONDS + self._indexed.get(name, 0) * self.render_seconds_per_file

    async def _wait_leaving_time_to_render(self, name: str, root: Path | str, seconds: float) -> bool:
        """Wait on the refresh of `name` until it is done or until only the time to draw a map of what it holds so
        far (and a margin) is left of `seconds` (the estimate grows as the build stores files); whether it
        completed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, seconds) * (1 - WAIT_MARGIN_SHARE)
        task = self.index_in_background(name, root)
        self._waiting[name] = self._waiting.get(name, 0) + 1  # its parse processes, if not started yet, are urgent
        try:
            while not task.done():
                left = deadline - loop.time() - self.render_estimate(name)
                if left <= 0:
                    break
                await asyncio.wait({task}, timeout=min(left, WAIT_POLL_S))
        finally:
            self._waiting[name] -= 1
        return task.done() and not task.cancelled() and task.result()

    async def task_map(
        self,
        workspace: str,
        workspace_root: Path | str,
        request_text: str,
        budget_tokens: int,
        wait_seconds: float,
        *,
        task_index: str | None = None,
        task_root: Path | str | None = None,
    ) -> str:
        """The map for a task's first turn, within about `wait_seconds` on a workspace whose index is being built.

        The budget covers the wait and the drawing: the wait ends when the index is complete or when only the
        estimated time to draw a map of what it holds is left (`render_estimate`). Complete in time: the map of the
        task's own index (`task_index`, a copy of the workspace's refreshed on the task's worktree `task_root`), or
        of the workspace's. Still being built: a map of the files the workspace's index holds so far, with a line
        saying so ('' when it holds none yet); the build goes on in the background and the worker's look-ups
        (`find_symbols_by_name` refreshes first) see the rest.
        """
        if await self._wait_leaving_time_to_render(workspace, workspace_root, wait_seconds):
            if task_index is not None and task_root is not None:
                return await self.render(task_index, task_root, request_text, budget_tokens, seed_from=workspace)
            return await self.render(workspace, workspace_root, request_text, budget_tokens, refresh=False)
        indexed = await self.store.repo_index.file_count(workspace)
        if not indexed:
            return ""
        note = (
            f"(The index of this repository is still being built: this map shows the {indexed} files indexed so "
            "far; find_symbols_by_name sees the rest once it is done.)"
        )
        text = await self.render(
            workspace, workspace_root, request_text, budget_tokens - estimate_tokens(note) - 1, refresh=False
        )
        return f"{text}\n{note}" if text else ""

    async def refresh(
        self, name: str, root: Path | str, *, seed_from: str | None = None, urgent: bool = True
    ) -> RefreshStats:
        """Bring the index of workspace `name` (folder `root`) up to date: parse new and changed files only.

        `seed_from`: when `name` has no index yet, start from a copy of that workspace's index (a task's worktree
        holds mostly the same files as its workspace: only what differs is parsed). `urgent`: the caller waits on
        it (a map, a worker's look-up); a background build (`index_in_background`) is not, unless a task waits on
        it when its parse processes start: those then run at the bot's own priority (parse_pool.py).
        """
        started = time.monotonic()
        base = Path(root).resolve()
        if not base.is_dir():
            raise ToolError(f"the workspace folder {str(root)!r} does not exist")
        async with self._lock(name):
            if seed_from and await self.store.repo_index.info(name) is None:
                async with self._lock(seed_from):
                    await self.store.repo_index.copy(seed_from, name)
            known = await self.store.repo_index.file_states(name)
            seen = await scan_files(base)
            hashes = await self.store.repo_index.file_hashes(name)
            # an empty hash: indexed before references were kept (store migration 4): parse it again
            changed = sorted(p for p, state in seen.items() if known.get(p) != state or not hashes.get(p))
            removed = [p for p in known if p not in seen]
            head = await git_head(base)
            parsed = unchanged = 0
            first = True
            self._indexed[name] = len(known)
            pause = gc_paused() if len(changed) >= GC_PAUSE_MIN_FILES else contextlib.nullcontext()
            with pause:  # a cold build unpickles and stores ~100k objects: no collector walks over them meanwhile
                waited = urgent or self._waiting.get(name, 0) > 0
                async for batch in parse_batches(base, changed, seen, hashes, urgent=waited):  # stored as parsed
                    outlines: list[FileOutline] = []
                    touched: list[SameContent] = []
                    vanished: list[str] = []
                    for path, outline in batch:
                        if isinstance(outline, SameContent):
                            touched.append(outline)
                        elif outline is not None:
                            outlines.append(outline)
                        elif path in known:
                            vanished.append(path)  # vanished since the scan
                    await self._no_render.wait()  # a map being drawn has the process first (reads, GIL)
                    if self.turns is not None:
                        await self.turns.quiet()
                    drop = (removed if first else []) + vanished
                    await self._save(name, base, head, outlines, touched, drop, known)
                    first = False
                    parsed += len(outlines)
                    unchanged += len(touched)
                    removed += vanished
                    self._indexed[name] += sum(o.path not in known for o in outlines) - len(vanished)
            if first:  # nothing to parse: the removals (and the refresh time) still go in
                await self._save(name, base, head, [], [], removed, known)
            self._indexed[name] = len(seen)
        stats = RefreshStats(len(seen), parsed, len(removed), time.monotonic() - started)
        log.log(
            logging.INFO if stats.parsed or stats.removed else logging.DEBUG,
            "repo map %s: %d files, %d parsed, %d unchanged content, %d removed in %.2fs",
            name,
            stats.files_seen,
            stats.parsed,
            unchanged,
            stats.removed,
            stats.seconds,
        )
        return stats

    async def _save(
        self,
        name: str,
        base: Path,
        head: str | None,
        outlines: list[FileOutline],
        touched: list[SameContent],
        drop: list[str],
        known: dict[str, tuple[int, int]],
    ) -> None:
        await self.store.repo_index.save(
            name,
            str(base),
            head,
            files=_file_rows(outlines, head),
            symbols=[(o.path, s.name, s.kind, s.line, s.signature, s.parent) for o in outlines for s in o.symbols],
            imports=[(o.path, target) for o in outlines for target in o.imports],
            drop=list(dict.fromkeys(drop + [o.path for o in outlines if o.path in known])),
            touched=[(t.path, t.mtime_ns, t.size) for t in touched],
        )

    async def render(
        self,
        name: str,
        root: Path | str,
        request_text: str,
        budget_tokens: int,
        *,
        refresh: bool = True,
        seed_from: str | None = None,
    ) -> str:
        """The map of workspace `name` for `request_text`, most relevant definitions first, within `budget_tokens`."""
        if refresh:
            await self.refresh(name, root, seed_from=seed_from)
        self._renders += 1
        self._no_render.clear()
        lower_priority()  # the drawing is what is waited on now: the parse processes of a build running yield to it
        try:
            return await self._draw(name, root, request_text, budget_tokens)
        finally:
            self._renders -= 1
            if not self._renders:
                self._no_render.set()

    async def _draw(self, name: str, root: Path | str, request_text: str, budget_tokens: int) -> str:
        started = time.monotonic()
        # git's recent changes run while the index is read (both wait on other processes or threads)
        recent_task = asyncio.create_task(_recently_changed(Path(root).resolve(), {}))
        try:
            symbol_rows = await self.store.repo_index.all_symbols(name)
            terms = await self.store.repo_index.file_terms(name, word_keys(request_text))
            imports = await self.store.repo_index.all_imports(name)
            # The smallest read last: aiosqlite's thread keeps its latest answer (the rows as SQLite gave them)
            # until its next request, and the ranking that follows makes none (sympy's imports: ~9 MB held).
            rows = {r["path"]: _FileRow(**r) for r in await self.store.repo_index.file_list(name)}
        finally:
            recent_names = await recent_task
        recent = [path for path in recent_names if path in rows] if recent_names is not None else None
        if recent is None:  # not a git repository: the newest files
            recent = [r.path for r in sorted(rows.values(), key=lambda r: (-r.mtime_ns, r.path))[:RECENT_FILES]]
        symbols, ranking = await asyncio.to_thread(_rank, rows, symbol_rows, terms, imports, request_text, recent)
        counts = {path: len(file_symbols) for path, file_symbols in symbols.items()}
        text = await asyncio.to_thread(
            _layout, name, rows, ranking.files, ranking.entries, counts, max(0, budget_tokens)
        )
        if len(rows) >= 100:  # big enough to say how long a file takes
            rate = max(0.0, time.monotonic() - started - RENDER_FIXED_SECONDS) / len(rows)
            self.render_seconds_per_file = (self.render_seconds_per_file + rate) / 2
        return text

    async def find_symbols_by_name(self, name: str, query: str, limit: int = 50) -> str:
        """Symbols whose name equals (first), starts with, then contains `query`, case-insensitive.

        One line each: `path:line kind signature`. `Class.method` narrows to methods of that class.
        """
        query = query.strip()
        if not query:
            raise ToolError("the symbol name is empty; give a function, class or method name (or its beginning)")
        parent: str | None = None
        if "." in query.strip("."):
            parent, _, query = query.strip(".").rpartition(".")
        rows = await self.store.repo_index.search_symbols(name, query, parent, max(1, limit) + 1)
        if not rows:
            files = await self.store.repo_index.file_count(name)
            return (
                f"no symbols named like {query!r} in the index of {name} ({files} files); "
                "try grep for text, or a shorter name"
            )
        lines = []
        for row in rows[:limit]:
            where = f"  (in {row['parent']})" if row["parent"] else ""
            lines.append(f"{row['path']}:{row['line']} {row['kind']} {row['signature']}{where}")
        if len(rows) > limit:
            lines.append(f"(more than {limit} matches; give a longer name)")
        return "\n".join(lines)


def repo_map_tools(repo_map: RepoMap, name: str, root: Path | str) -> list[Tool]:
    """Workers' look-up tool over the index of one workspace (refreshed before each search); text search is grep."""

    async def find_symbols_by_name(query: str, limit: int = 50) -> str:
        await repo_map.refresh(name, root)
        return await repo_map.find_symbols_by_name(name, query, limit=min(max(int(limit), 1), 200))

    return [
        Tool(
            "find_symbols_by_name",
            "Find functions, classes and methods by name (exact matches first, then names starting with or "
            "containing it; case-insensitive; 'Class.method' narrows to one class). Returns `path:line kind "
            "signature` lines; read the code with read_file from that line.",
            {
                "query": prop("string", "a symbol name or its beginning, e.g. 'parse_config' or 'Store.add'"),
                "limit": prop("integer", "most lines to return (default 50)"),
            },
            find_symbols_by_name,
            ["query"],
            read_only=True,
        ),
    ]
