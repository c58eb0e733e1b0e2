"""Symbol hints for the orchestrator: where the code words of a message are defined, from the repo map index.

So "where is `add` defined?" is answered without a tool round trip. Indexes are refreshed in the background
(never on the critical path of a turn), at most once a minute per workspace.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

from agents.repo_map import RepoMap
from agents.store import Store
from agents.workspaces import Workspaces

log = logging.getLogger(__name__)

REFRESH_EVERY = 60.0
MAX_WORDS = 6
MAX_LINES = 15
_WORD = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\b(\(\))?")
_BACKTICKED = re.compile(r"`([A-Za-z_][A-Za-z0-9_.]*)(?:\(\))?`")
_ASKED = re.compile(r"(?:where(?:'s| is| are)|find|locate)\s+(?:the\s+)?(?:function\s+|class\s+|method\s+)?"
                    r"([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_ASKED_AFTER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s+(?:is\s+)?(?:defined|declared|implemented)", re.IGNORECASE)


def code_words(text: str) -> list[str]:
    """Words of a message that look like code names: `backticked`, snake_case, camelCase, call(), or asked about."""
    found: list[str] = [m.group(1).rsplit(".", 1)[-1] for m in _BACKTICKED.finditer(text)]
    for match in _WORD.finditer(text):
        word = match.group(1)
        inner = word.strip("_")
        if match.group(2) or "_" in inner or re.search(r"[a-z][A-Z]", word) or re.fullmatch(r"[A-Z][a-z]+[A-Z]\w*", word):
            found.append(word)
    found += [m.group(1) for m in _ASKED.finditer(text)] + [m.group(1) for m in _ASKED_AFTER.finditer(text)]
    unique = list(dict.fromkeys(w for w in found if len(w) >= 2 and w.lower() not in {"the", "is", "it", "this"}))
    return unique[:MAX_WORDS]


class SymbolHints:
    def __init__(self, repo_map: RepoMap, store: Store, workspaces: Workspaces) -> None:
        self.repo_map, self.store, self.workspaces = repo_map, store, workspaces
        self._refreshed: dict[str, float] = {}
        self._running: dict[str, asyncio.Task[None]] = {}

    def refresh_in_background(self) -> None:
        """Start refreshing stale workspace indexes; returns at once."""
        now = time.monotonic()
        for ws in self.workspaces.all():
            if ws.name in self._running or now - self._refreshed.get(ws.name, -REFRESH_EVERY) < REFRESH_EVERY:
                continue
            self._running[ws.name] = asyncio.create_task(self._refresh(ws.name, ws.path), name=f"index-{ws.name}")

    async def _refresh(self, name: str, path) -> None:
        try:
            await self.repo_map.refresh(name, path)
        except Exception as err:  # an index is a convenience; never let it break anything
            log.warning("could not index workspace %s: %s", name, err)
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

    async def hints(self, text: str) -> list[str]:
        """`workspace: path:line kind signature` for each exact definition of a code word in the message."""
        self.refresh_in_background()
        words = code_words(text)
        lines: list[str] = []
        for ws in self.workspaces.all() if words else []:
            for word in words:
                for row in await self.store.search_repo_symbols(ws.name, word, None, 8):
                    if row["name"].lower() == word.lower():
                        lines.append(f"{ws.name}: {row['path']}:{row['line']} {row['kind']} {row['signature']}")
        return lines[:MAX_LINES]
