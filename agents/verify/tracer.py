"""Which of the checkout's files and functions each test runs: a light tracer for the few tests already red at a
task's base commit, so a fix task is judged on the test it was meant to fix whatever way that test fails (a plain
`assert` in the test shows no frame of the code under test, yet the test runs it).

Python: a pytest plugin the bot writes into a folder of its own, put first on `PYTHONPATH` and named in
`PYTEST_PLUGINS` for that one run (nothing is installed into the workspace's environment; pytest loads the plugins
that variable names whatever its autoload setting). While each test runs (its setup, call and teardown: pytest names
it in `PYTEST_CURRENT_TEST`) it records the `(file, function)` of every Python function called from a file of the
checkout, and writes them as JSON when the process ends (one file per process: xdist workers each write theirs). The
profile is on only while a test runs: starting pytest and collecting the suite (importing the project) cost what they
cost untraced, a large part of a traced run otherwise (about half of a small suite's).

JavaScript: node's own V8 coverage (`NODE_V8_COVERAGE`, a folder each node process writes into when it ends). A
process that loaded exactly one of the run's test files (node --test runs each file in a process of its own) tells
which of the checkout's functions that file's tests called; a process running several test files (mocha, jest's
workers) tells nothing about one test, and is not used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlparse

from agents.sandbox.safe_paths import read_file

V8_COVERAGE = "NODE_V8_COVERAGE"
MAX_COVERAGE_FILES = 400  # node processes read (one per test file under node --test)
MAX_COVERAGE_BYTES = 32 << 20  # a process's coverage larger than this (a whole bundler loaded) is not read
MAX_TRACE_FILES = 64  # trace files read at most (one per test process: a suite runs a few)
_SKIPPED_PARTS = {"node_modules", ".venv", "venv", ".git"}

TRACE_OUT = "AGENTLAB_TRACE_OUT"  # the folder the tracer writes into
TRACE_ROOT = "AGENTLAB_TRACE_ROOT"  # the checkout whose files are recorded
MAX_PER_TEST = 2_000  # (file, function) pairs kept per test
SEPARATOR = "::"  # between a file and a function in a recorded entry

PLUGIN = "_agentlab_trace"  # the plugin's module name, in the tracer's own folder

# Runs inside the workspace's own interpreter (any Python 3, any pytest since 3): only the standard library and
# pytest, and cheap per call.
PLUGIN_SOURCE = r'''
"""agentlab: records which of the checkout's functions each pytest test calls (read by the bot after the run)."""
import atexit as _atexit
import json as _json
import os as _os
import sys as _sys
import threading as _threading

import pytest as _pytest

MAX_PER_TEST = __MAX_PER_TEST__
_environ = _os.environ
_out, _root = _environ.get("AGENTLAB_TRACE_OUT"), _environ.get("AGENTLAB_TRACE_ROOT")
_on = bool(_out and _root)
_roots = sorted({p.rstrip("/") + "/" for p in (_root or "/", _os.path.realpath(_root or "/"))}, key=len, reverse=True)
_skip = ("/site-packages/", "/node_modules/", "/.venv/", "/venv/", "/.tox/", "/.nox/")
_files = {}
_seen = {}


def _relative(filename):
    if any(part in filename for part in _skip):
        return None
    for prefix in _roots:
        if filename.startswith(prefix):
            return filename[len(prefix):]
    return None


def _profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    filename = code.co_filename
    rel = _files.get(filename, 0)
    if rel == 0:
        rel = _files[filename] = _relative(filename)
    if rel is None:
        return
    test = _environ.get("PYTEST_CURRENT_TEST")
    if not test:
        return
    found = _seen.get(test)
    if found is None:
        found = _seen[test] = set()
    if len(found) < MAX_PER_TEST:
        found.add(rel + "::" + code.co_name)


def _dump():
    _sys.setprofile(None)
    merged = {}
    for test, pairs in _seen.items():
        name = test.rsplit(" (", 1)[0]  # "tests/test_x.py::test_a (call)" -> the node id
        merged.setdefault(name, set()).update(pairs)
    try:
        _os.makedirs(_out, exist_ok=True)
        path = _os.path.join(_out, "trace-%d.json" % _os.getpid())
        with open(path, "w", encoding="utf-8") as handle:
            _json.dump({k: sorted(v) for k, v in merged.items()}, handle)
    except OSError:
        pass


@_pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _on:
        yield
        return
    before = _sys.getprofile()
    _sys.setprofile(_profile)
    try:
        yield
    finally:
        _sys.setprofile(before)


if _on:
    _threading.setprofile(_profile)  # a thread a test starts: its calls are the test's too
    _atexit.register(_dump)
'''


def install_tracer(folder: Path) -> Path:
    """Write the tracer plugin into `folder/site` (to go first on PYTHONPATH, named in PYTEST_PLUGINS by
    `traced_env`); returns that folder."""
    site = Path(folder) / "site"
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE.replace("__MAX_PER_TEST__", str(MAX_PER_TEST)), encoding="utf-8")
    return site


def traced_env(env: dict[str, str], site: Path, out: Path, checkout: Path) -> None:
    """`env` of a pytest run, traced: the plugin's folder first on PYTHONPATH and the plugin added to any the run
    names already; `out`: where it writes; `checkout`: whose functions it records."""
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    env["PYTEST_PLUGINS"] = ",".join(p for p in (env.get("PYTEST_PLUGINS", ""), PLUGIN) if p)
    env.update({TRACE_OUT: str(out), TRACE_ROOT: str(checkout)})


def read_traces(folder: Path) -> dict[str, list[str]]:
    """Test id -> the `file::function` entries it ran, merged over every process's file in `folder`."""
    merged: dict[str, set[str]] = {}
    for path in sorted(Path(folder).glob("trace-*.json"))[:MAX_TRACE_FILES]:
        try:  # written in the sandbox: a regular file only, no link followed, no FIFO waited on, none too large
            data = json.loads(read_file(path.parent, path.name, MAX_COVERAGE_BYTES).decode("utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        for test, entries in data.items():
            if isinstance(test, str) and isinstance(entries, list):
                merged.setdefault(test, set()).update(e for e in entries if isinstance(e, str))
    return {test: sorted(entries) for test, entries in merged.items()}


def files_run(entries: list[str]) -> list[str]:
    """The files of `file::function` entries, in order, once each."""
    return list(dict.fromkeys(e.split(SEPARATOR, 1)[0] for e in entries))


def functions_run(entries: list[str]) -> list[tuple[str, str]]:
    """(file, function) of each entry."""
    return [(e.split(SEPARATOR, 1)[0], e.split(SEPARATOR, 1)[1]) for e in entries if SEPARATOR in e]


def read_v8_coverage(folder: Path, root: Path, test_files: Iterable[str]) -> dict[str, list[str]]:
    """Test file (relative to `root`) -> the `file::function` entries of the checkout's functions called in the one
    process that loaded it (and no other test file); files loaded by several processes merge theirs."""
    wanted = set(test_files)
    roots = sorted({f"{Path(root)}/", f"{Path(root).resolve()}/"}, key=len, reverse=True)
    found: dict[str, set[str]] = {}
    for path in sorted(Path(folder).glob("coverage-*.json"))[:MAX_COVERAGE_FILES]:
        try:
            if path.lstat().st_size > MAX_COVERAGE_BYTES:
                continue
            # the tests wrote it, in the sandbox: a regular file only, never through a link, and never waiting on a
            # FIFO put in its place (a read by name would hold a thread of the bot for good)
            data = json.loads(read_file(Path(folder), path.name).decode("utf-8"))
        except (OSError, ValueError):
            continue
        scripts = data.get("result") if isinstance(data, dict) else None
        if not isinstance(scripts, list):
            continue
        called: set[str] = set()
        loaded: set[str] = set()
        for script in scripts:
            rel = _relative_url(script.get("url") if isinstance(script, dict) else None, roots)
            if rel is None:
                continue
            if rel in wanted:
                loaded.add(rel)
            for function in script.get("functions") or []:
                ranges = function.get("ranges") or [] if isinstance(function, dict) else []
                if not ranges or not ranges[0].get("count"):
                    continue
                name = function.get("functionName") or ""
                if not name and ranges[0].get("startOffset") == 0:
                    continue  # the module's own top level: loaded, not called
                called.add(f"{rel}{SEPARATOR}{name or '(anonymous)'}")
        if len(loaded) == 1:
            found.setdefault(loaded.pop(), set()).update(called)
    return {file: sorted(entries)[:MAX_PER_TEST] for file, entries in found.items()}


def _relative_url(url: object, roots: list[str]) -> str | None:
    if not isinstance(url, str) or not url.startswith("file://"):
        return None
    path = unquote(urlparse(url).path)
    for prefix in roots:
        if path.startswith(prefix):
            rel = path[len(prefix) :]
            return None if _SKIPPED_PARTS & set(rel.split("/")) else rel
    return None
