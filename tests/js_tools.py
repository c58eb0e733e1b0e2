"""Real JavaScript test runners for tests: mocha, jest, pnpm, ava, vitest (and typescript) at pinned versions,
installed from the npm registry once into `~/.cache/agentlab-tests/npm-<hash>` (by `make test` before pytest starts, else on first use) and reused
across runs; a test that needs them skips with a reason when npm or the registry cannot be reached. Parallel test
workers (pytest-xdist) install under a file lock, so one installs and the others wait; a failed install is tried once
per test run, not once per worker. A project gets them as a real `node_modules` folder (hard links)."""

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


def give_node_modules(project: Path, tools: Path) -> Path:
    """A real `node_modules` folder in `project` with the pinned tools (hard links; a copy across file systems)."""
    target = project / "node_modules"
    try:
        subprocess.run(["cp", "-al", str(tools / "node_modules"), str(target)], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(tools / "node_modules", target, symlinks=True)
    return target


if __name__ == "__main__":  # `make test` installs them before pytest starts: the install is set-up, not test time
    try:
        print(f"JavaScript test runners ready in {npm_tools()}")
    except BaseException as skipped:  # pytest.skip raises; the tests that need them skip with this reason
        print(f"JavaScript test runners not installed: {skipped}")
