"""Per-test outcomes from what a framework reported: JUnit XML (pytest, or a file `.agentlab.toml` names), the JSON
records of our own node --test and mocha reporters, jest/vitest JSON, and ava's TAP.

Every reader returns `(cases, failures)`: test id -> passed / failed / skipped, and failing id -> its own failure
text (message, then traceback), untrimmed. Ids are relative to the checkout (`root`) and keep the suite/describe
names (`test/app.test.js::Router > get > returns 404`), so a run in a baseline copy elsewhere compares with the
task's run; a name repeated in one run is told apart by its order (`... [2]`).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from agents.sandbox.safe_paths import TooLarge, read_file

Cases = dict[str, str]
# a report larger than this is not read (the tests wrote it, as large as the task's disk allows; a real suite's is a few
# MB): the run then has no report, and the bot cannot judge it
MAX_REPORT_BYTES = 24 << 20
Failures = dict[str, str]
SEPARATOR = " > "  # between suite/describe names in an id
_TAP_LINE = re.compile(r"^(not ok|ok)\s+\d+\s*(?:-\s*)?(.*?)(?:\s+#\s*(SKIP|TODO)\b.*)?$", re.IGNORECASE)


class _Collector:
    """Cases and failures in report order, with repeated ids numbered and checkout paths made relative."""

    def __init__(self, root: Path) -> None:
        self.roots = sorted({f"{root}/", f"{Path(root).resolve()}/"}, key=len, reverse=True)
        self.cases: Cases = {}
        self.failures: Failures = {}
        self.seen: dict[str, int] = {}

    def relative(self, text: str) -> str:
        for prefix in self.roots:
            text = text.replace(prefix, "")
        return text

    def add(self, test_id: str, state: str, failure: str = "") -> None:
        test_id = self.relative(test_id)
        count = self.seen.get(test_id, 0) + 1
        self.seen[test_id] = count
        if count > 1:
            test_id = f"{test_id} [{count}]"
        self.cases[test_id] = state
        if state == "failed":
            self.failures[test_id] = self.relative(_own_frames(failure)).strip()


_RUNTIME_FRAME = re.compile(r"^\s*at .*(/node_modules/|\(node:|\bnode:internal|<anonymous>\)?$)")


def _own_frames(text: str) -> str:
    """A JavaScript stack without the framework's and node's own frames (`at ... node_modules/jest-circus/...`)."""
    return "\n".join(line for line in text.splitlines() if not _RUNTIME_FRAME.match(line))


def failure_text(message: str, stack: str) -> str:
    """The failure's message, then its traceback (once, when the traceback already starts with the message)."""
    message, stack = (message or "").strip(), (stack or "").strip()
    if not stack:
        return message
    if not message or message.splitlines()[0] in stack:
        return stack
    return f"{message}\n{stack}"


# ----------------------------------------------------------------------------------------------------------------------
# JUnit XML


def read_junit(path: Path, root: Path, inside: Path | None = None) -> tuple[Cases, Failures]:
    """JUnit XML (absent or unreadable: none). Ids are pytest node ids (`tests/test_x.py::TestA::test_b`) where
    the classname names a Python file under `root`; otherwise the test's file (relative), the names of the
    enclosing test suites and its classname when they add something, and its name. `inside`: the folder below which
    no link on the way to the report is followed (the report's own folder when None)."""
    folder = Path(inside) if inside is not None else Path(path).parent
    try:
        # the tests wrote it, in the sandbox: read as a regular file only, never through a link, and never waiting on
        # a FIFO they put in its place (a read by name would block a thread of the bot for good)
        top = ET.fromstring(read_file(folder, Path(path).relative_to(folder), MAX_REPORT_BYTES))
    except (OSError, ValueError, ET.ParseError):  # TooLarge is a ValueError: no report, so the run cannot be judged
        return {}, {}
    found = _Collector(root)
    _walk_junit(top, [], None, found, Path(root))
    return found.cases, found.failures


def _walk_junit(element: ET.Element, suites: list[str], file: str | None, found: _Collector, root: Path) -> None:
    for child in element:
        if child.tag == "testsuite":
            name = child.get("name") or ""
            _walk_junit(child, [*suites, name] if name else suites, child.get("file") or file, found, root)
        elif child.tag == "testcase":
            test_id = _junit_id(root, child, suites, child.get("file") or file, found)
            problem = child.find("failure")
            if problem is None:
                problem = child.find("error")
            if problem is not None:
                text = failure_text(problem.get("message") or "", problem.text or "")
                found.add(test_id, "failed", text)
            elif child.find("skipped") is not None:
                found.add(test_id, "skipped")
            else:
                found.add(test_id, "passed")


_GENERIC_SUITES = {"pytest", "root suite", "mocha tests", "jest tests", "vitest tests", ""}


def _junit_id(root: Path, case: ET.Element, suites: list[str], file: str | None, found: _Collector) -> str:
    classname, name = case.get("classname") or "", case.get("name") or ""
    parts = [p for p in classname.split(".") if p]
    for cut in range(len(parts), 0, -1):  # pytest: the classname is the module path, then classes
        candidate = "/".join(parts[:cut]) + ".py"
        if (root / candidate).is_file():
            return "::".join([candidate, *parts[cut:], name])
    file = found.relative(file) if file else None
    titles = [found.relative(s) for s in suites if s.strip().lower() not in _GENERIC_SUITES]
    titles = [t for t in titles if t != file]  # a suite named after its file (vitest, jest-junit) is the file
    extra = found.relative(classname)
    says_more = extra and extra not in ("test", file) and extra not in titles and extra not in name
    if file:
        return f"{file}::{SEPARATOR.join([*titles, *([extra] if says_more else []), name])}"
    path = SEPARATOR.join([*titles, name])
    return f"{extra}::{path}" if says_more else path  # a classname (Java-like `com.x.FooTest`) as the location


# ----------------------------------------------------------------------------------------------------------------------
# our reporters (node --test, mocha): JSON records {file, titles, state, message, stack}


def report_text(path: Path) -> str | None:
    """The text of a report the tests wrote in the sandbox (None when there is none to read): read as a regular file
    only, never through a link and never waiting on a FIFO they put in its place (a read by name would show the bot
    a file outside the report's folder, or block a thread of the bot for good)."""
    try:
        return read_file(Path(path).parent, Path(path).name, MAX_REPORT_BYTES).decode("utf-8", errors="replace")
    except (OSError, TooLarge):  # too large: no report, so the run cannot be judged (never read whole)
        return None


def read_records(path: Path, root: Path) -> tuple[Cases, Failures]:
    """Records written by agents/verify/reporters/ (a JSON array, or one JSON object per line)."""
    text = (report_text(path) or "").strip()
    if not text:
        return {}, {}
    try:
        records = json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines() if line]
    except ValueError:
        return {}, {}
    found = _Collector(root)
    for record in records:
        if not isinstance(record, dict):
            continue
        titles = [str(t) for t in record.get("titles") or []]
        file = str(record.get("file") or "")
        if file and titles == [file]:  # a file that failed as a whole (node --test: it would not load)
            titles = []
        test_id = found.relative(file) + "::" + SEPARATOR.join(titles) if file else SEPARATOR.join(titles)
        state = str(record["state"]) if record.get("state") in ("passed", "failed", "skipped") else "failed"
        found.add(test_id.rstrip(":"), state, failure_text(record.get("message", ""), record.get("stack", "")))
    return found.cases, found.failures


# ----------------------------------------------------------------------------------------------------------------------
# jest / vitest JSON (`--json --outputFile`, `--reporter=json --outputFile`)


def read_jest_json(path: Path, root: Path) -> tuple[Cases, Failures]:
    try:
        data = json.loads(report_text(path) or "")
    except ValueError:
        return {}, {}
    found = _Collector(root)
    for suite in data.get("testResults") or [] if isinstance(data, dict) else []:
        file = found.relative(str(suite.get("name") or suite.get("testFilePath") or ""))
        assertions = suite.get("assertionResults") or suite.get("testResults") or []
        for test in assertions:
            titles = [*(test.get("ancestorTitles") or []), test.get("title") or ""]
            status = test.get("status")
            state = "passed" if status == "passed" else "failed" if status == "failed" else "skipped"
            messages = test.get("failureMessages") or []
            found.add(f"{file}::{SEPARATOR.join(str(t) for t in titles if t)}", state, "\n".join(map(str, messages)))
        if suite.get("status") == "failed" and not any(t.get("status") == "failed" for t in assertions):
            # the file would not load, or failed outside its tests (a beforeAll/afterAll hook): it fails as a whole,
            # whatever its tests say
            found.add(file, "failed", str(suite.get("message") or suite.get("failureMessage") or ""))
    return found.cases, found.failures


# ----------------------------------------------------------------------------------------------------------------------
# TAP (ava --tap)


def read_tap(output: str, root: Path) -> tuple[Cases, Failures]:
    """`ok N - title` / `not ok N - title` lines, with the YAML block after a failure as its text."""
    found = _Collector(root)
    lines = output.splitlines()
    i = 0
    while i < len(lines):
        match = _TAP_LINE.match(lines[i].strip())
        i += 1
        if not match:
            continue
        ok, title, directive = match.group(1).lower() == "ok", match.group(2).strip(), match.group(3)
        block: list[str] = []
        if i < len(lines) and lines[i].strip() == "---":
            i += 1
            while i < len(lines) and lines[i].strip() != "...":
                block.append(lines[i].strip())
                i += 1
            i += 1
        state = "skipped" if directive else "passed" if ok else "failed"
        found.add(title, state, "\n".join(block))
    return found.cases, found.failures
