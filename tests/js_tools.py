"""Real JavaScript test frameworks for tests: mocha, jest, pnpm, ava, vitest (and typescript) at pinned versions,
installed from the npm registry once into `~/.cache/agentlab-tests/npm-<hash>` (by `make test` before pytest starts, else on first use) and reused
across runs; a test that needs them skips with a reason when npm or the registry cannot be reached. Parallel test
workers (pytest-xdist) install under a file lock, so one installs and the others wait; a failed install is tried once
per test run, not once per worker. A project gets them as a real `node_modules` folder (hard links): from the cache
itself, or, where the tests' temporary files are on another file system (a RAM one), from a copy made there once per
run (`tools_on`): hard links cannot cross file systems, and copying jest's seven thousand files for each test cost
about a second of CPU each time."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PINNED = ("jest@30.5.2", "mocha@11.8.0", "pnpm@10.34.8", "ava@6.4.1", "vitest@3.2.4", "typescript@5.9.3")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agentlab-tests"
TEST_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))  # one id shared by a run's xdist workers


def npm_tools() -> Path:
    """The folder whose `node_modules` holds PINNED (installed on first use)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("node and npm are not installed")
    folder = CACHE / f"npm-{hashlib.sha256(' '.join(PINNED).encode()).hexdigest()[:12]}"
    done, failed = folder / ".installed", folder / ".failed"
    if done.is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f"{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            return folder
        run, _, reason = failed.read_text().partition("\n") if failed.is_file() else ("", "", "")
        if run == TEST_RUN:  # another worker of this run tried just now
            pytest.skip(reason)
        (folder / "package.json").write_text(json.dumps({"private": True}))
        try:
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error", *PINNED],
                cwd=folder,
                check=True,
                capture_output=True,
                timeout=300,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as err:
            said = getattr(err, "stderr", b"") or b""
            reason = f"could not install {' '.join(PINNED)} from the npm registry: {said.decode()[-300:] or err}"
            failed.write_text(f"{TEST_RUN}\n{reason}")
            pytest.skip(reason)
        done.write_text("ok\n")
    return folder


def tools_on(tools: Path, folder: Path) -> Path:
    """`tools` where a hard link made in `folder`'s file system can reach them: `tools` itself when the two share a
    file system, else a copy in `folder`, made by the first caller (parallel workers wait for it under a lock)."""
    if tools.stat().st_dev == folder.stat().st_dev:
        return tools
    copy, done = folder / tools.name, folder / f"{tools.name}.copied"
    with (folder / f"{tools.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(copy, ignore_errors=True)
            subprocess.run(["cp", "-a", str(tools), str(copy)], check=True, capture_output=True)
            done.write_text("ok\n")
    return copy


def give_node_modules(project: Path, tools: Path, *packages: str) -> Path:
    """A real `node_modules` folder in `project` with the pinned tools (hard links; a copy across file systems):
    `packages` and what they need (from npm's lock file), or all of them. Each package is one folder of hard links,
    and the whole set is thirteen thousand files: a test links only what its framework needs."""
    target = project / "node_modules"
    source = tools / "node_modules"
    if not packages:
        _link_tree([source], target)
        return target
    names = needed(tools, packages)
    target.mkdir()
    by_parent: dict[Path, list[Path]] = {}
    for name in sorted(names):
        by_parent.setdefault((target / name).parent, []).append(source / name)
    for parent, folders in by_parent.items():
        parent.mkdir(parents=True, exist_ok=True)
        _link_tree(folders, parent, into=True)
    (target / ".bin").mkdir()
    linked = {tuple(Path(n).parts) for n in names}
    for entry in (source / ".bin").iterdir():  # `../mocha/bin/mocha.js`: kept where its package is
        link = os.readlink(entry)
        parts = Path(link).parts  # a package is one folder, or two for a scoped one (`@scope/name`)
        if tuple(parts[1:2]) in linked or tuple(parts[1:3]) in linked:
            (target / ".bin" / entry.name).symlink_to(link)
    return target


def needed(tools: Path, packages: tuple[str, ...]) -> set[str]:
    """The top-level packages `packages` need, themselves included (npm's lock file: dependencies, optional and peer
    dependencies that are installed, each resolved as node does, from the nearest `node_modules` up)."""
    lock = json.loads((tools / "package-lock.json").read_text())["packages"]
    found: set[str] = set()
    todo = [f"node_modules/{p}" for p in packages]
    seen: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen or path not in lock:
            continue
        seen.add(path)
        if path.count("node_modules/") == 1:
            found.add(path.removeprefix("node_modules/"))
        else:
            todo.append("node_modules/" + path.split("/node_modules/")[0].removeprefix("node_modules/"))
        entry = lock[path]
        for dep in {
            **entry.get("dependencies", {}),
            **entry.get("optionalDependencies", {}),
            **entry.get("peerDependencies", {}),
        }:
            base = path
            while True:
                candidate = f"{base}/node_modules/{dep}"
                if candidate in lock:
                    todo.append(candidate)
                    break
                if "/node_modules/" not in base:
                    if f"node_modules/{dep}" in lock:
                        todo.append(f"node_modules/{dep}")
                    break
                base = base.rsplit("/node_modules/", 1)[0]
    return {n for n in found if (tools / "node_modules" / n).is_dir()}


def _link_tree(folders: list[Path], target: Path, into: bool = False) -> None:
    """`cp -al` of `folders` to `target` (into it when `into`); a plain copy where hard links cannot be made."""
    try:
        subprocess.run(["cp", "-al", *map(str, folders), str(target)], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        for folder in folders:
            copy = target / folder.name if into else target
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(folder, copy, symlinks=True)


if __name__ == "__main__":  # `make test` installs them before pytest starts: the install is set-up, not test time
    try:
        print(f"JavaScript test frameworks ready in {npm_tools()}")
    except BaseException as skipped:  # pytest.skip raises; the tests that need them skip with this reason
        print(f"JavaScript test frameworks not installed: {skipped}")
