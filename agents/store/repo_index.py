"""The repository map's code index: its own tables (files, symbols, imports, terms) on the store's connection.

Rows are plain tuples and dicts, so the store need not import agents/repo_map.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from agents.core.models import utcnow

if TYPE_CHECKING:
    from agents.store.connection import Connection


class RepoIndex:
    """Reads and writes of one store's repo-map tables; `Store.repo_index` hands one out."""

    def __init__(self, store: Connection) -> None:
        self._store = store

    async def _write_batch(self, statements: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """Run several executemany statements as one transaction (one index refresh)."""
        async with self._store.transaction() as db:
            for sql, rows in statements:
                if rows:
                    await db.executemany(sql, rows)

    async def file_states(self, workspace: str) -> dict[str, tuple[int, int]]:
        """path → (mtime_ns, size) of every indexed file of the workspace."""
        rows = await self._store.rows("SELECT path, mtime_ns, size FROM repo_files WHERE workspace = ?", (workspace,))
        return {row[0]: (row[1], row[2]) for row in rows}

    async def save(
        self,
        workspace: str,
        root: str,
        git_head: str | None,
        *,
        files: list[tuple[str, int, int, str | None, str | None, str, str, str, str]],
        symbols: list[tuple[str, str, str, int, str, str | None]],
        imports: list[tuple[str, str]],
        drop: list[str],
        touched: Sequence[tuple[str, int, int]] = (),
    ) -> None:
        """One refresh in one transaction: forget the `drop` paths, then store the (re)parsed files.

        files: (path, mtime_ns, size, language, git_head, summary, content_hash, refs JSON, words JSON) · symbols:
        (path, name, kind, line, signature, parent) · imports: (path, target) · touched: (path, mtime_ns, size) of
        files whose content is unchanged.
        """
        gone = [(workspace, path) for path in drop]
        await self._write_batch(
            [
                ("DELETE FROM repo_files WHERE workspace = ? AND path = ?", gone),
                ("DELETE FROM repo_symbols WHERE workspace = ? AND path = ?", gone),
                ("DELETE FROM repo_imports WHERE workspace = ? AND path = ?", gone),
                (
                    "UPDATE repo_files SET mtime_ns = ?, size = ? WHERE workspace = ? AND path = ?",
                    [(mtime_ns, size, workspace, path) for path, mtime_ns, size in touched],
                ),
                (
                    "INSERT OR REPLACE INTO repo_files (workspace, path, mtime_ns, size, language, git_head, summary, "
                    "content_hash, refs, words) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(workspace, *row) for row in files],
                ),
                (
                    "INSERT INTO repo_symbols (workspace, path, name, kind, line, signature, parent) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(workspace, *row) for row in symbols],
                ),
                (
                    "INSERT INTO repo_imports (workspace, path, target) VALUES (?, ?, ?)",
                    [(workspace, *row) for row in imports],
                ),
                (
                    "INSERT INTO repo_indexes (workspace, root, git_head, refreshed_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(workspace) DO UPDATE SET root = excluded.root, git_head = excluded.git_head, "
                    "refreshed_at = excluded.refreshed_at",
                    [(workspace, root, git_head, utcnow().astimezone(UTC).isoformat())],
                ),
            ]
        )

    async def file_hashes(self, workspace: str) -> dict[str, str]:
        """path → content hash of every indexed file of the workspace."""
        rows = await self._store.rows("SELECT path, content_hash FROM repo_files WHERE workspace = ?", (workspace,))
        return {row[0]: row[1] for row in rows}

    async def copy(self, source: str, target: str) -> None:
        """Make the index of `target` a copy of the index of `source` (a task's worktree starts from its
        workspace's)."""
        await self._write_batch(
            [
                *[
                    (f"DELETE FROM {table} WHERE workspace = ?", [(target,)])
                    for table in ("repo_files", "repo_symbols", "repo_imports", "repo_indexes")
                ],
                (
                    "INSERT INTO repo_files (workspace, path, mtime_ns, size, language, git_head, summary, "
                    "content_hash, refs, words) SELECT ?, path, mtime_ns, size, language, git_head, summary, "
                    "content_hash, refs, words FROM repo_files WHERE workspace = ?",
                    [(target, source)],
                ),
                (
                    "INSERT INTO repo_symbols (workspace, path, name, kind, line, signature, parent) "
                    "SELECT ?, path, name, kind, line, signature, parent FROM repo_symbols WHERE workspace = ?",
                    [(target, source)],
                ),
                (
                    "INSERT INTO repo_imports (workspace, path, target) SELECT ?, path, target FROM repo_imports "
                    "WHERE workspace = ?",
                    [(target, source)],
                ),
            ]
        )

    async def file_terms(self, workspace: str, word_keys: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(path, refs JSON, words JSON) of every indexed text file. With `word_keys`, a file's words only when they
        contain one of those strings ('' otherwise): on a big repository most files' words are not wanted, and
        reading them all would hold megabytes of text (sympy: 12 MB) for the length of a map's drawing."""
        if word_keys is None:
            words, params = "words", [workspace]
        elif not word_keys:
            words, params = "''", [workspace]
        else:
            wanted = " OR ".join("instr(words, ?) > 0" for _ in word_keys)
            words, params = f"CASE WHEN {wanted} THEN words ELSE '' END", [*word_keys, workspace]
        rows = await self._store.rows(
            f"SELECT path, refs, {words} FROM repo_files WHERE workspace = ? AND language IS NOT 'binary'", params
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def all_symbols(self, workspace: str) -> list[tuple[str, str, str, int, str, str | None]]:
        """Every symbol of the workspace: (path, name, kind, line, signature, parent), by path and line."""
        # SQLite makes a string per row: a path, kind or class shared by many symbols is kept once, and so is a name
        # or signature defined in several places (sympy: 21k names and 25k signatures in 36k symbols)
        one = _Shared()
        return await self._store.converted_rows(
            "SELECT path, name, kind, line, signature, parent FROM repo_symbols "
            "WHERE workspace = ? ORDER BY path, line",
            (workspace,),
            lambda row: (one(row[0]), one(row[1]), one(row[2]), row[3], one(row[4]), one(row[5])),
        )

    async def all_imports(self, workspace: str) -> list[tuple[str, str]]:
        """(path, target) of every import of the workspace."""
        one = _Shared()  # a path once per file, a target once (sympy: 8k distinct targets in 46k imports)
        return await self._store.converted_rows(
            "SELECT path, target FROM repo_imports WHERE workspace = ?",
            (workspace,),
            lambda row: (one(row[0]), one(row[1])),
        )

    async def info(self, workspace: str) -> dict[str, Any] | None:
        """root, git_head and refreshed_at of the workspace's last refresh, or None if never indexed."""
        rows = await self._store.rows("SELECT * FROM repo_indexes WHERE workspace = ?", (workspace,))
        return dict(rows[0]) if rows else None

    async def file_list(self, workspace: str) -> list[dict[str, Any]]:
        """The indexed text files: path, size, language, summary, mtime_ns."""
        rows = await self._store.rows(
            "SELECT path, size, language, summary, mtime_ns FROM repo_files "
            "WHERE workspace = ? AND language IS NOT 'binary'",
            (workspace,),
        )
        return [dict(row) for row in rows]

    async def file_count(self, workspace: str) -> int:
        rows = await self._store.rows(
            "SELECT count(*) FROM repo_files WHERE workspace = ? AND language IS NOT 'binary'", (workspace,)
        )
        return int(rows[0][0])

    async def search_symbols(
        self, workspace: str, query: str, parent: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Symbols named `query` (case-insensitive): exact matches (same case first), then prefix, then substring."""
        like = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where, params = ["workspace = ?", "name LIKE ? ESCAPE '\\'"], [workspace, f"%{like}%"]
        if parent:
            where.append("(parent = ? COLLATE NOCASE OR parent LIKE ? ESCAPE '\\')")
            params += [parent, "%." + parent.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")]
        rows = await self._store.rows(
            "SELECT path, name, kind, line, signature, parent, "
            "CASE WHEN name = ? COLLATE BINARY THEN 0 WHEN name = ? THEN 1 WHEN name LIKE ? ESCAPE '\\' THEN 2 "
            "ELSE 3 END AS rank "
            f"FROM repo_symbols WHERE {' AND '.join(where)} ORDER BY rank, length(name), path, line LIMIT ?",
            (query, query, f"{like}%", *params, limit),
        )
        return [dict(row) for row in rows]

    async def delete(self, workspace: str) -> None:
        """Forget everything indexed for the workspace."""
        await self._write_batch(
            [
                (f"DELETE FROM {table} WHERE workspace = ?", [(workspace,)])
                for table in ("repo_files", "repo_symbols", "repo_imports", "repo_indexes")
            ]
        )


class _Shared(dict[Any, Any]):
    """Equal values read back as one object (a big repository's index has ~40k symbol rows naming ~2k paths)."""

    def __call__(self, value: Any) -> Any:
        return self.setdefault(value, value)
