"""Base-commit test runs kept in the store and reused by later tasks on the same base.

Every task compares its tests with the same tests at its base commit. Several tasks on one commit (a morning of
tasks on `main`) would each pay for that run; the outcome is kept instead, under a key naming everything able to
change it:
- the base commit and the test command (its framework, JUnit file and script steps, from the baseline code's own key);
- the workspace's `.agentlab.toml` (the base commit's is part of the commit; an untracked one is not), and the
  uncommitted files it keeps for the clean room (`[tests] keep`);
- the environment's identity: the interpreter (its real path, size and time), the packages installed in the Python
  environment (their `dist-info` names carry their versions), the workspace's lock files (content hashes), the
  state of each `node_modules` folder the tests borrow (the package manager's own record of what it installed),
  and the tools that run a JavaScript, Go or Rust suite.
Any change gives a new key, so the suite runs again; keeping the new outcome drops what that commit had under the
old key, and each workspace keeps at most `KEPT_PER_WORKSPACE` outcomes (the least recently used go first).

A base failure that passes after the worker is re-run once at the base (`confirm_fixed`) before it counts as fixed
by the task: a flaky failure kept from an earlier run must not be credited to every later task. The other way round
too (`confirm_failing`): a kept base failure that fails after the worker is re-run once at the base before it excuses
the failure as pre-existing; passing there, the kept result is contradicted: "flaky at the base", and the bot cannot
tell whether the task broke it (⚠, never ✔ with it listed as pre-existing).

Only runs in a clean room (agents/verify/clean_room.py: a fresh checkout of the commit, a network namespace of its
own, no task service in it) are kept: the format number in the baseline code's key changed when they became so.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agents.core.models import utcnow
from agents.store.base_runs import BaseRunRows
from agents.verify.suite_env import CONFIG_FILE, TestEnvironment
from agents.verify.suite_run import SUITE_ID, TestOutcome

if TYPE_CHECKING:
    from agents.store.connection import Connection
    from agents.verify.verdict import Verdict

log = logging.getLogger(__name__)

KEPT_PER_WORKSPACE = 20
LOCK_FILES = (
    "uv.lock",
    "poetry.lock",
    "Pipfile.lock",
    "pdm.lock",
    "requirements.txt",
    "requirements-dev.txt",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "bun.lock",
    "bun.lockb",
    "go.sum",
    "Cargo.lock",
)
# what a package manager writes into node_modules when it installs (npm, pnpm, yarn classic, yarn berry)
NODE_MODULES_RECORDS = (".package-lock.json", ".modules.yaml", ".yarn-integrity", ".yarn-state.yml")
TOOLS = {
    "npm": ("node", "npm"),
    "pnpm": ("node", "pnpm"),
    "yarn": ("node", "yarn"),
    "bun": ("bun",),
    "uv": ("uv",),
    "Poetry": ("poetry",),
    "tox": ("tox",),
    "nox": ("nox",),
    "Go": ("go",),
    "Cargo": ("cargo",),
    "make": ("make",),
}
_HASH_CHUNK = 1 << 20


class KeptOutcome(TestOutcome):
    """A base outcome reused from an earlier task's run (`kept_at`: when that run ended)."""

    kept_at: str


def _file_hash(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
        return digest.hexdigest()[:24]
    except OSError:
        return None


def _stamp(path: Path) -> str | None:
    """A file's real path, size and modification time: a replaced interpreter or tool gives another stamp."""
    try:
        real = Path(os.path.realpath(path))
        stat = real.stat()
    except OSError:
        return None
    return f"{real}:{stat.st_size}:{stat.st_mtime_ns}"


def _installed_packages(env_dir: Path) -> str | None:
    """A hash of the names of what is installed in a Python environment (`name-version.dist-info`, `.pth` files)."""
    names: list[str] = []
    for site in sorted(env_dir.glob("lib/python*/site-packages")):
        try:
            names += sorted(
                entry.name for entry in os.scandir(site) if entry.name.endswith((".dist-info", ".egg-info", ".pth"))
            )
        except OSError:
            continue
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:24] if names else None


def _node_modules_state(folder: Path) -> str | None:
    """The package manager's record of what it installed; without one, the folder's entries and their times."""
    for record in NODE_MODULES_RECORDS:
        if (found := _file_hash(folder / record)) is not None:
            return f"{record}:{found}"
    try:
        entries = sorted((entry.name, entry.stat(follow_symlinks=False).st_mtime_ns) for entry in os.scandir(folder))
    except OSError:
        return None
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:24]


def environment_identity(env: TestEnvironment, workspace: Path) -> dict[str, str]:
    """Everything outside the base commit able to change what its tests show (blocking: file reads and hashes)."""
    workspace = Path(workspace)
    identity: dict[str, str] = {"bot python": sys.version}
    if (config := _file_hash(workspace / CONFIG_FILE)) is not None:
        identity[CONFIG_FILE] = config
    for name in LOCK_FILES:
        if (found := _file_hash(workspace / name)) is not None:
            identity[name] = found
    for rel in env.keep:  # the uncommitted files `.agentlab.toml` keeps for the clean room
        kept = workspace / rel
        found = _file_hash(kept) if not kept.is_dir() else _node_modules_state(kept)
        identity[f"kept {rel}"] = found or "absent"
    if env.python_env is not None:
        if (python := _stamp(env.python_env / "bin" / "python")) is not None:
            identity["python"] = python
        if (packages := _installed_packages(env.python_env)) is not None:
            identity["python packages"] = packages
    if env.python_base is not None:
        identity["python base"] = str(env.python_base)
    home = env.workspace or workspace
    for rel in env.borrowed:
        if Path(rel).name == "node_modules" and (state := _node_modules_state(home / rel)) is not None:
            identity[rel] = state
    if (home / "node_modules").is_dir() and "node_modules" not in identity:
        if (state := _node_modules_state(home / "node_modules")) is not None:
            identity["node_modules"] = state
    for tool in TOOLS.get(env.kind, ("node",) if env.script else ()):
        if (where := shutil.which(tool)) is not None and (stamp := _stamp(Path(where))) is not None:
            identity[tool] = stamp
    return identity


def full_key(command_key: str, identity: dict[str, str]) -> str:
    text = command_key + "\0" + json.dumps(identity, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class KeptBaseRuns:
    """Base outcomes kept in the store, per workspace (`BaselineRuns` asks it before running, and tells it after)."""

    def __init__(self, store: Connection, limit: int = KEPT_PER_WORKSPACE) -> None:
        self.rows = BaseRunRows(store)
        self.limit = limit

    @staticmethod
    def workspace_of(repo: Path) -> str:
        return str(Path(repo).resolve())

    async def key(self, command_key: str, repo: Path, env: TestEnvironment) -> tuple[str, dict[str, str]]:
        """The full key: the baseline code's own key (commit, command, steps) and the environment's identity."""
        identity = await asyncio.to_thread(environment_identity, env, repo)
        return full_key(command_key, identity), identity

    async def find(self, repo: Path, key: str) -> KeptOutcome | None:
        try:
            text = await self.rows.find(self.workspace_of(repo), key)
        except Exception as err:  # noqa: BLE001  (the store cannot say: the suite runs, as with no kept outcome)
            log.warning("kept base runs unreadable: %s", err)
            return None
        if text is None:
            return None
        try:
            data = json.loads(text)
            return KeptOutcome.model_validate(data["outcome"] | {"kept_at": data["at"]})
        except (ValueError, KeyError, TypeError):  # written by another version: run again
            await self.rows.forget(self.workspace_of(repo), key)
            return None

    async def keep(
        self, repo: Path, key: str, commit: str, env: TestEnvironment, identity: dict[str, str], outcome: TestOutcome
    ) -> None:
        text = json.dumps({"at": utcnow().strftime("%Y-%m-%d %H:%M"), "outcome": outcome.model_dump(mode="json")})
        try:
            shown = json.dumps(identity, sort_keys=True)
            await self.rows.keep(self.workspace_of(repo), key, commit, env.command, shown, text, self.limit)
        except Exception as err:  # noqa: BLE001  (not kept: the next task runs the base again, nothing worse)
            log.warning("base run at %s not kept: %s", commit[:8], err)


async def confirm_fixed(
    verdict: Verdict,
    env: TestEnvironment,
    rerun_at_base: Callable[[list[str] | None], Awaitable[TestOutcome]],
    seen: dict[str, bool],
) -> None:
    """Re-run the tests the verdict counts as fixed (failing at the base, passing now) once at the base commit
    (`rerun_at_base(ids)`: only those ids where the framework can name them, else the whole suite); those passing there
    too were flaky at the base, not fixed by the task: taken out of `fixed` and said in a note. `seen`: test id →
    passed on its re-run at the base, for the task's later checks (each test is re-run there once per task)."""
    new = [name for name in verdict.fixed if name not in seen]
    if new:
        ids = [name for name in new if name != SUITE_ID]
        try:
            again = await rerun_at_base(ids if env.rerunnable and len(ids) == len(new) else None)
        except Exception as err:  # noqa: BLE001  (no second look: the first run's word stands, as before)
            log.warning("re-run at the base commit failed: %s", err)
            return
        seen.update({name: again.cases.get(name) == "passed" for name in new})
    flaky = [name for name in verdict.fixed if seen.get(name)]
    if not flaky:
        return
    verdict.fixed = [name for name in verdict.fixed if name not in flaky]
    shown = ", ".join(f"`{name}`" for name in flaky[:8]) + (f" and {len(flaky) - 8} more" if len(flaky) > 8 else "")
    verdict.notes.append(
        f"{len(flaky)} test(s) failing in the base commit's run passed when re-run there (flaky at the base), "
        f"so they are not counted as fixed by the task: {shown}"
    )


async def confirm_failing(
    verdict: Verdict,
    env: TestEnvironment,
    rerun_at_base: Callable[[list[str] | None], Awaitable[TestOutcome]],
    seen: dict[str, bool],
) -> None:
    """Re-run once at the base the tests a kept base outcome says failed there and that fail now too (pre-existing):
    those passing there contradict the kept result. They are flaky at the base, not pre-existing: taken out of
    `still_failing` into `flaky_at_base`, and the verdict cannot tell (⚠) unless it is ✗ anyway. `seen` as in
    `confirm_fixed` (shared: each test is re-run at the base once per task)."""
    new = [name for name in verdict.pre_existing if name not in seen and name != SUITE_ID]
    if new:
        by_ids = (env.rerunnable or bool(env.script)) and all("::" in name for name in new)
        try:
            again = await rerun_at_base(new if by_ids else None)
        except Exception as err:  # noqa: BLE001  (no second look: the kept result stands, as before)
            log.warning("re-run at the base commit failed: %s", err)
            return
        seen.update({name: again.cases.get(name) == "passed" for name in new})
    contradicted = [name for name in verdict.pre_existing if seen.get(name)]
    if not contradicted:
        return
    verdict.still_failing = [name for name in verdict.still_failing if name not in contradicted]
    verdict.flaky_at_base += contradicted
    shown = ", ".join(f"`{name}`" for name in contradicted[:8])
    more = f" and {len(contradicted) - 8} more" if len(contradicted) > 8 else ""
    verdict.unverified = verdict.unverified or (
        f"{len(contradicted)} test(s) failing now failed in the kept base run but passed when re-run at the base "
        f"(flaky at the base), so the bot cannot tell whether the task broke them: {shown}{more}"
    )
