"""Symbol hints for the orchestrator: where the code words of a message are defined, from the repo map index.

Code words include acronym-led names (`HTTPAdapter`), dotted `Class.method` / `res.sendFile` (looked up as a
member of its owner, never as a path) and `#private` names; a name defined with the same case hides look-alikes
in another case (`sendFile` does not list the private `sendfile`).

So "where is `add` defined?" is answered without a tool round trip. Indexes are refreshed in the background
(never on the critical path of a turn), at most once a minute per workspace.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path
from typing import Any

from agents.core.user_turns import UserTurns
from agents.repo_map.maps import RepoMap
from agents.store.database import Store
from agents.workspaces.folders import Workspaces

log = logging.getLogger(__name__)

REFRESH_EVERY = 60.0
MAX_WORDS = 6
MAX_LINES = 15
_NAME = r"#?[A-Za-z_$][A-Za-z0-9_$]*"
_WORD = re.compile(rf"(?<![\w.#$])({_NAME}(?:\.{_NAME})*)(\(\))?")
_BACKTICKED = re.compile(rf"`({_NAME}(?:\.{_NAME})*)(?:\(\))?`")
_ASKED = re.compile(
    rf"(?:where(?:'s| is| are)|find|locate)\s+(?:the\s+)?(?:function\s+|class\s+|method\s+)?"
    rf"`?({_NAME}(?:\.{_NAME})*)",
    re.IGNORECASE,
)
_ASKED_AFTER = re.compile(rf"({_NAME}(?:\.{_NAME})*)`?\s+(?:is\s+)?(?:defined|declared|implemented)", re.IGNORECASE)
_CAMEL = re.compile(r"[a-z0-9][A-Z]")
_ACRONYM_LED = re.compile(r"[A-Z]{2,}[a-z]\w*")  # HTTPAdapter, JSONProvider
_PASCAL = re.compile(r"[A-Z][a-z]+[A-Z]\w*")
_FILE_EXTENSIONS = frozenset(
    {
        "py",
        "pyi",
        "js",
        "mjs",
        "cjs",
        "jsx",
        "ts",
        "tsx",
        "md",
        "txt",
        "json",
        "toml",
        "yml",
        "yaml",
        "cfg",
        "ini",
        "html",
        "css",
        "rs",
        "go",
        "java",
        "rb",
        "sh",
    }
)
_NOT_NAMES = frozenset({"the", "is", "it", "this"})


def _looks_like_code(word: str, called: bool) -> bool:
    last = word.rsplit(".", 1)[-1]
    if "." in word:  # `res.sendFile`, `Class.method`; not a file name such as calc.py
        return last.lower() not in _FILE_EXTENSIONS and not word.replace(".", "").isdigit()
    inner = word.lstrip("#").strip("_")
    return bool(
        called
        or word.startswith("#")
        or "_" in inner
        or _CAMEL.search(word)
        or _ACRONYM_LED.fullmatch(word)
        or _PASCAL.fullmatch(word)
    )


def code_words(text: str) -> list[str]:
    """Words of a message that look like code names: `backticked`, snake_case, camelCase, acronym-led (HTTPAdapter),
    dotted (`Class.method`, `res.sendFile`), `#private`, call(), or asked about."""
    found: list[str] = [m.group(1) for m in _BACKTICKED.finditer(text)]
    found += [m.group(1) for m in _WORD.finditer(text) if _looks_like_code(m.group(1), bool(m.group(2)))]
    found += [m.group(1) for m in _ASKED.finditer(text)] + [m.group(1) for m in _ASKED_AFTER.finditer(text)]
    words = [w.rstrip(".") for w in found]
    unique = list(
        dict.fromkeys(
            w
            for w in words
            if len(w.lstrip("#")) >= 2
            and w.lower() not in _NOT_NAMES
            and not (("." in w) and w.rsplit(".", 1)[-1].lower() in _FILE_EXTENSIONS)
        )
    )
    return unique[:MAX_WORDS]


def exact_first(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The rows named exactly `name` (same case) if there are any, else those named like it in any case."""
    same_case = [row for row in rows if row["name"] == name]
    return same_case or [row for row in rows if row["name"].lower() == name.lower()]


class SymbolHints:
    def __init__(self, repo_map: RepoMap, store: Store, workspaces: Workspaces, turns: UserTurns | None = None) -> None:
        self.repo_map, self.store, self.workspaces = repo_map, store, workspaces
        self.turns = turns  # a refresh asked for by a turn starts once no turn is in flight
        self._refreshed: dict[str, float] = {}
        self._running: dict[str, asyncio.Task[None]] = {}

    def refresh_in_background(self) -> None:
        """Start refreshing stale workspace indexes; returns at once."""
        now = time.monotonic()
        for ws in self.workspaces.all():
            if ws.name in self._running or now - self._refreshed.get(ws.name, -REFRESH_EVERY) < REFRESH_EVERY:
                continue
            self._running[ws.name] = asyncio.create_task(self._refresh(ws.name, ws.path), name=f"index-{ws.name}")

    async def _refresh(self, name: str, path: Path) -> None:
        try:
            if self.turns is not None:  # the turn that asked for it has its answer first, and a quiet moment
                await self.turns.settled(0)
            await self.repo_map.index_in_background(name, path)  # shared with a task waiting on the same index
        finally:
            self._refreshed[name] = time.monotonic()
            self._running.pop(name, None)

    async def wait_idle(self) -> None:
        if self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._running.values()):
            task.cancel()
        await self.wait_idle()

    async def hints(self, text: str, *, owner: bool = True, only: str | None = None) -> list[str]:
        """`workspace: path:line kind signature` for each exact definition of a code word in the message; for a
        member (`owner` false), none from the bot's own code, which only owners reach; with `only`, from that
        workspace alone."""
        self.refresh_in_background()
        words = code_words(text)
        lines: list[str] = []
        for ws in self.workspaces.all() if words else []:
            if (ws.is_self and not owner) or (only is not None and ws.name != only):
                continue
            for word in words:
                scope, _, name = word.rpartition(".")
                rows = await self.store.repo_index.search_symbols(ws.name, name, scope, 8) if scope else []
                if not rows:  # no definition under that owner (`res` is a variable): the name alone
                    rows = await self.store.repo_index.search_symbols(ws.name, name, None, 8)
                for row in exact_first(rows, name):
                    lines.append(f"{ws.name}: {row['path']}:{row['line']} {row['kind']} {row['signature']}")
        return lines[:MAX_LINES]
