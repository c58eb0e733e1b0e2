"""A task's target tests: which tests already failing at the base commit the task was meant to fix (the
instructions name the test, its file or the code it fails in, or ask for the failing tests as a whole; or the worker
changed a file its failure runs through). A target still failing is the worker's, like a test it broke; any other
base failure is pre-existing.

For a fix task, what a red test runs counts too, not only how it fails (a plain `assert` in the test shows no frame
of the code it runs): `ran_reason` reads a traced re-run (agents/verify/tracer.py) and says why the test is the
task's ("it runs `utils.py`, which the instructions name"); `not_ran_reason` says why it is not."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePosixPath

from agents.verify.tracer import files_run, functions_run

_SOURCE = r"[\w@+-][\w./@+-]*\.[A-Za-z]\w{0,4}"  # a file path with an extension: calc.py, src/lib/x.test.ts
_FRAMES = (
    re.compile(r'File "(?P<file>[^"]+)", line \d+, in (?P<func>[\w.<>]+)'),  # a Python traceback
    # pytest: `calc.py:2: in add`, `/tmp/x/calc.py:2: ValueError`, `test_calc.py:5:`
    re.compile(rf"^(?P<file>/?{_SOURCE}):\d+:(?: in (?P<func>[\w.<>]+)|[ \t]|$)", re.M),
    re.compile(r"^[ \t>]*(?:async )?def (?P<func>\w+)\(", re.M),  # pytest's long frames show each function's source
    re.compile(rf"\bat (?:(?P<func>[\w.$<>]+) )?\(?(?:file://)?(?P<file>/?{_SOURCE}):\d+:\d+\)?"),  # a JS stack
)
_FILE_TOKEN = re.compile(rf"(?<![\w/.-]){_SOURCE}(?![\w-])")
_TEST_AFFIXES = re.compile(r"^(?:test_)|(?:[._-](?:test|spec)s?)$|(?:_test)$")
# a task meant to fix something: then the tests of a file it names are its own (not for "rename the variables")
_FIX_WORDS = re.compile(r"\b(?:fix\w*|bugs?|broken|repair\w*|failing|fails?|wrong|regression|crash\w*)\b", re.I)
# instructions about the red tests as a whole, naming none: "fix the failing tests", "make the test suite pass"
_ALL_RED = re.compile(
    r"\b(?:(?:failing|broken|red)\s+(?:unit\s+)?tests"
    r"|(?:make|get)\s+(?:the\s+|all\s+(?:the\s+)?)?(?:unit\s+)?(?:tests|test\s+suite|suite)\s+(?:to\s+)?(?:pass|green)"
    r"|fix\s+(?:the\s+|all\s+(?:the\s+)?)?(?:unit\s+)?(?:tests|test\s+suite))\b",
    re.I,
)
# about one red test without naming it ("fix the failing test"): that test, where only one is red
_ONE_RED = re.compile(
    r"\b(?:(?:failing|broken|red)\s+(?:unit\s+)?test|(?:make|get)\s+(?:the\s+)?test\s+(?:to\s+)?(?:pass|green))\b", re.I
)
ALL_RED_REASON = "the instructions ask for the failing tests to pass, and it is one of them"


def named_in(test_id: str, instructions: str) -> bool:
    """Whether the instructions name this test: its id, its function (`test_add`), or the function it tests
    called as code (`add()` for `test_add`)."""
    if not instructions or test_id.startswith("("):  # `(whole suite)` names no test
        return False
    function = re.sub(r"\[.*\]$", "", re.split(r"::| > ", test_id)[-1]).strip()
    if test_id in instructions or (function and re.search(rf"\b{re.escape(function)}\b", instructions)):
        return True
    subject = function.removeprefix("test_")
    return (
        subject != function and len(subject) >= 2 and re.search(rf"\b{re.escape(subject)}\(", instructions) is not None
    )


def test_file_of(test_id: str) -> str | None:
    """The file part of a test id (`tests/test_calc.py` of `tests/test_calc.py::test_add`), when it has one."""
    head = re.split(r"::| > ", test_id, maxsplit=1)[0].strip()
    return head if re.fullmatch(_SOURCE, head) else None


def subject_of(path: str) -> str:
    """The module a test file tests, by the usual names: `calc` for test_calc.py, calc_test.go, calc.test.js."""
    name = PurePosixPath(path).name
    stem = name.split(".", 1)[0] if ".test." in name or ".spec." in name else PurePosixPath(path).stem
    return _TEST_AFFIXES.sub("", stem)


def frames(text: str) -> list[tuple[str, str | None]]:
    """(file, function) of every traceback frame in a failure's text: Python, pytest and JS stack lines."""
    found: list[tuple[str, str | None]] = []
    for pattern in _FRAMES:
        for match in pattern.finditer(text):
            func = match.groupdict().get("func")
            found.append((match.groupdict().get("file") or "", func))
    return found


def mentions_file(instructions: str, path: str) -> bool:
    """Whether the instructions name `path` or its file name (`calc.py`, not inside `test_calc.py`)."""
    names = {path.lstrip("./"), PurePosixPath(path).name}
    return any(
        re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w-])", instructions) for name in names if "." in name and name
    )


def mentions_code(instructions: str, function: str) -> bool:
    """Whether the instructions name a function as code: `add()` / `add(` or `` `add` ``."""
    name = function.rsplit(".", 1)[-1]
    if len(name) < 2 or not re.fullmatch(r"[A-Za-z_$][\w$]*", name) or name.startswith("test"):
        return False
    return re.search(rf"(?<![\w.]){re.escape(name)}\(|`{re.escape(name)}(?:\(\))?`", instructions) is not None


def _same_file(frame_file: str, changed: str) -> bool:
    """A traceback's path (absolute, from another folder, or relative) and a path relative to the repository."""
    frame_file, changed = frame_file.removeprefix("./"), changed.removeprefix("./")
    return frame_file == changed or frame_file.endswith("/" + changed)


def target_reason(test_id: str, instructions: str, failure_texts: Iterable[str], changed: Iterable[str]) -> str | None:
    """Why a test failing at the base is the task's own to fix (one phrase), or None when it is not."""
    if named_in(test_id, instructions):
        return "the instructions name it"
    test_file = test_file_of(test_id)
    if test_file and mentions_file(instructions, test_file):
        return f"the instructions name its file `{test_file}`"
    if test_file and _FIX_WORDS.search(instructions):
        subject = subject_of(test_file)
        for token in _FILE_TOKEN.findall(instructions):
            if token != PurePosixPath(test_file).name and subject and subject_of(token) == subject == _stem(token):
                return f"the task is to fix `{token}`, the code it tests"
    seen = [frame for text in failure_texts for frame in frames(text)]
    for file, func in seen:
        if file and mentions_file(instructions, file):
            return f"its failure runs through `{PurePosixPath(file).name}`, which the instructions name"
        if func and mentions_code(instructions, func):
            return f"its failure runs through `{func}`, which the instructions name"
    changed = list(changed)
    for file, _ in seen:
        for path in changed:
            if file and _same_file(file, path):
                return f"its failure runs through `{path}`, which the task changed"
    return None


def _stem(path: str) -> str:
    return PurePosixPath(path).stem


def asks_for_the_red_tests(instructions: str, red: int) -> bool:
    """Whether the instructions are about the tests red at the base as a whole, naming none of them ("fix the failing
    tests", "make the test suite pass"; "fix the failing test" where `red`, how many are red, is one): each is then
    the task's, whatever it runs."""
    return bool(instructions) and (
        _ALL_RED.search(instructions) is not None or (red == 1 and _ONE_RED.search(instructions) is not None)
    )


def is_fix_task(instructions: str) -> bool:
    """Whether the instructions ask to fix something (then what a red test runs decides whether it is the task's)."""
    return bool(instructions) and _FIX_WORDS.search(instructions) is not None


def ran_reason(instructions: str, entries: list[str], changed: Iterable[str]) -> str | None:
    """Why a red test whose traced run called `entries` (`file::function`) is the task's, or None: it runs a file or
    a function the instructions name, or a file the task changed."""
    files = files_run(entries)
    for file in files:
        if mentions_file(instructions, file):
            return f"it runs `{file}`, which the instructions name"
    for file, func in functions_run(entries):
        if mentions_code(instructions, func):
            return f"it runs `{func}()` of `{file}`, which the instructions name"
    changed = [c.removeprefix("./") for c in changed]
    for file in files:
        if file in changed:
            return f"it runs `{file}`, which the task changed"
    return None


def not_ran_reason(test_id: str, entries: list[str]) -> str:
    """Why a traced red test is not the task's: the code it runs (past its own file), none of it named by the
    instructions or changed by the task."""
    own = test_file_of(test_id)
    files = [f for f in files_run(entries) if f != own]
    if not files:
        return "it runs no code of the checkout beyond its own file, none named by the instructions or changed"
    shown = ", ".join(f"`{f}`" for f in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    if len(files) == 1:
        return f"it runs {shown}, which the instructions do not name and the task did not change"
    return f"it runs {shown}, none of them named by the instructions or changed by the task"
