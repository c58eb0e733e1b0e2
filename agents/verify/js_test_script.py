"""A JavaScript project's test script read as steps, without running anything: `package.json` `scripts.test`
followed through `npm run X` / `pnpm X` / `yarn X` chains and split at `&&`, each step's kind guessed from its tool
(xo, eslint = lint; tsc = typecheck; rollup, `vite build` = build), and the test framework named where one is known
(node's built-in test framework, mocha, jest, vitest, ava) so the bot can add the reporter flag that gives per-test
outcomes (`reporter_command`). A step with other shell syntax (pipes, `||`, `;`) is run as written, whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from agents.sandbox.safe_paths import unlink_file, write_file

FRAMEWORKS = ("node", "mocha", "jest", "vitest", "ava")  # `node` is node's built-in test framework (`node --test`)
REPORTERS = Path(__file__).parent / "reporters"  # our own small reporters (node --test, mocha): file + suite titles
_PROGRAM_FRAMEWORKS = {"mocha": "mocha", "_mocha": "mocha", "jest": "jest", "vitest": "vitest", "ava": "ava"}
_WRAPPERS = {"cross-env", "npx", "nyc", "c8", "env", "dotenv", "bunx", "pnpx", "tsx-watch"}
_EXEC_WRAPPERS = {("pnpm", "exec"), ("npm", "exec"), ("yarn", "exec"), ("bun", "x")}
_LINT = {"xo", "eslint", "prettier", "biome", "standard", "semistandard", "stylelint", "tslint", "oxlint", "jshint"}
_LINT |= {"dprint", "markdownlint", "markdownlint-cli2", "lint-staged", "publint", "attw"}
_TYPECHECK = {"tsc", "vue-tsc", "tsd", "svelte-check", "flow"}
_BUILD = {"rollup", "tsup", "webpack", "esbuild", "babel", "parcel", "unbuild", "swc", "microbundle", "tsdx"}
_SHELL_SYNTAX = re.compile(r"\|\||[|;&<>()`]|\$\(")  # after `&&` splitting: anything else a shell would interpret
_MAX_DEPTH = 6


@dataclass(frozen=True)
class ScriptStep:
    """One `&&`-separated step of the test script, as written (`command`) and what it is."""

    command: str
    kind: str = "other"  # lint / build / typecheck / other
    framework: str | None = None  # one of FRAMEWORKS when the step runs tests the bot can read per test
    script: str = "test"  # the package.json script it came from

    @property
    def has_framework(self) -> bool:
        return self.framework is not None


def read_scripts(package_json: Path) -> dict[str, str]:
    try:
        data = json.loads(package_json.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    scripts = data.get("scripts") if isinstance(data, dict) else None
    if not isinstance(scripts, dict):
        return {}
    return {k: v for k, v in scripts.items() if isinstance(k, str) and isinstance(v, str)}


def plan_script(checkout: Path, manager: str = "npm") -> list[ScriptStep]:
    """The steps of the checkout's `test` script, in order ([] when it has none); `npm` also runs pretest/posttest."""
    scripts = read_scripts(Path(checkout) / "package.json")
    if not scripts.get("test", "").strip():
        return []
    return _expand("test", scripts, manager, 0, "")


def _expand(name: str, scripts: dict[str, str], manager: str, depth: int, extra: str) -> list[ScriptStep]:
    steps: list[ScriptStep] = []
    if manager == "npm" and f"pre{name}" in scripts and not name.startswith("pre"):
        steps += _expand_text(scripts[f"pre{name}"], f"pre{name}", scripts, manager, depth + 1)
    steps += _expand_text(f"{scripts[name]} {extra}".strip(), name, scripts, manager, depth + 1)
    if manager == "npm" and f"post{name}" in scripts and not name.startswith("post"):
        steps += _expand_text(scripts[f"post{name}"], f"post{name}", scripts, manager, depth + 1)
    return steps


def _expand_text(text: str, name: str, scripts: dict[str, str], manager: str, depth: int) -> list[ScriptStep]:
    steps: list[ScriptStep] = []
    for part in split_and(text):
        called = _called_script(part, scripts)
        if called is not None and depth < _MAX_DEPTH:
            target, extra = called
            expanded = _expand(target, scripts, manager, depth, extra)
            if not extra or len([s for s in expanded if not s.script.startswith(("pre", "post"))]) == 1:
                steps += expanded
                continue
        steps.append(classify(part, name))
    return steps


def split_and(text: str) -> list[str]:
    """`a && b && c` → [a, b, c], outside quotes; one part when there is no top-level `&&`."""
    parts, current, quote, i = [], [], "", 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and quote == '"' and i + 1 < len(text):
                current.append(text[i : i + 2])
                i += 2
                continue
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif text.startswith("&&", i):
            parts.append("".join(current).strip())
            current, i = [], i + 2
            continue
        current.append(char)
        i += 1
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _tokens(command: str) -> list[str] | None:
    try:
        return shlex.split(command)
    except ValueError:
        return None


def _called_script(part: str, scripts: dict[str, str]) -> tuple[str, str] | None:
    """(script name, extra args) when the step runs another script of this package.json."""
    tokens = _tokens(part)
    if not tokens or _SHELL_SYNTAX.search(part):
        return None
    program, rest = Path(tokens[0]).name, tokens[1:]
    if program in ("npm", "pnpm", "yarn", "bun") and rest and rest[0] in ("run", "run-script"):
        rest = rest[1:]
    elif program == "npm" and rest and rest[0] in ("test", "t"):
        pass
    elif program not in ("pnpm", "yarn") or not rest:
        return None
    while rest and rest[0] in ("-s", "--silent", "--if-present"):
        rest = rest[1:]
    if not rest or rest[0] not in scripts:
        return None
    extra = [t for t in rest[1:] if t != "--"]
    return rest[0], shlex.join(extra)


def classify(part: str, script: str = "test") -> ScriptStep:
    """One step: the framework it starts (when it is a plain command the bot can add a reporter flag to), its kind."""
    tokens = _tokens(part) or []
    program, args = _program(tokens)
    framework = None if _SHELL_SYNTAX.search(part) else _framework(program, args)
    return ScriptStep(command=part, kind=_kind(program, args, script), framework=framework, script=script)


def _program(tokens: list[str]) -> tuple[str, list[str]]:
    """The program a step really runs (past `VAR=x`, cross-env, npx, `pnpm exec`, nyc/c8 and their options)."""
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name = Path(token).name
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", token) or token == "--":
            i += 1
        elif name in _WRAPPERS:
            i += 1
            while i < len(tokens) and tokens[i].startswith("-"):
                i += 1
        elif i + 1 < len(tokens) and (name, tokens[i + 1]) in _EXEC_WRAPPERS:
            i += 2
        else:
            return name, tokens[i + 1 :]
    return "", []


def _framework(program: str, args: list[str]) -> str | None:
    if program == "node" and "--test" in args:
        return "node"
    if program in _PROGRAM_FRAMEWORKS:
        framework = _PROGRAM_FRAMEWORKS[program]
        if framework == "vitest" and args and args[0] in ("bench", "typecheck", "list", "init"):
            return None
        if framework == "jest" and ("--watch" in args or "--watchAll" in args):
            return None
        return framework
    return None


def _kind(program: str, args: list[str], script: str) -> str:
    if program in _LINT:
        return "lint"
    if program in _TYPECHECK:
        return "typecheck"
    if program in _BUILD or (program == "vite" and args[:1] == ["build"]):
        return "build"
    lowered = script.lower()
    if program in ("node", "tsx", "ts-node", "bun") and args and not args[0].startswith("-"):
        lowered = f"{lowered} {Path(args[0]).stem.lower()}"  # `node scripts/lint.js`
    if "lint" in lowered or "format" in lowered or "style" in lowered:
        return "lint"
    if "type" in lowered or "tsc" in lowered:
        return "typecheck"
    if "build" in lowered or "compile" in lowered or "bundle" in lowered:
        return "build"
    return "other"


def test_steps(steps: list[ScriptStep]) -> list[ScriptStep]:
    """The steps that are the tests: those with a known framework; without one, every step that is not lint, build
    or typecheck; a script made only of those (e.g. `xo`) is its own test."""
    frameworks = [s for s in steps if s.has_framework]
    if frameworks:
        return frameworks
    others = [s for s in steps if s.kind == "other"]
    return others or list(steps)


def reporter_command(step: ScriptStep, report: Path, folder: Path) -> str:
    """The step's command with the flag that makes its framework write per-test outcomes to `report`, a file: the
    output the bot keeps is capped, a report is read whole (ava prints TAP on stdout only: a copy of its output goes
    to `report`, the step's exit status kept). Our own reporters (node --test, mocha) are copied into `folder`, which
    the run can read."""
    quoted = shlex.quote(str(report))
    if step.framework == "node":
        reporter = _copy_reporter("node_test_reporter.mjs", folder)
        tokens = _tokens(step.command) or []
        theirs = sum(t == "--test-reporter" or t.startswith("--test-reporter=") for t in tokens)
        their_destinations = sum(t.startswith("--test-reporter-destination") for t in tokens)
        flags = f"--test-reporter={shlex.quote(str(reporter))} --test-reporter-destination={quoted}"
        if theirs:  # node pairs reporters and destinations in order: theirs keep stdout
            flags += " --test-reporter-destination=stdout" * max(0, theirs - their_destinations)
        else:
            flags = f"--test-reporter=spec --test-reporter-destination=stdout {flags}"
        return re.sub(r"(?<=\s)--test(?=\s|$)", lambda _m: f"--test {flags}", step.command, count=1)
    if step.framework == "mocha":
        reporter = _copy_reporter("mocha_reporter.js", folder)
        return f"{step.command} --reporter {shlex.quote(str(reporter))} --reporter-option output={quoted}"
    if step.framework == "jest":
        return f"{step.command} --ci --json --outputFile={quoted}"
    if step.framework == "vitest":
        tokens = _tokens(step.command) or []
        once = "" if {"run", "--run"} & set(tokens) else " --run"
        return f"{step.command}{once} --reporter=default --reporter=json --outputFile={quoted}"
    if step.framework == "ava":
        # ava's stderr goes into the pipe too: node makes its stdio non-blocking, which for a pipe it shares with
        # tee's stdout made tee fail ("Resource temporarily unavailable") once the bot read the output late, and a
        # run whose every test passed exited 1
        return f"set -o pipefail; {step.command} --tap 2>&1 | tee {quoted}"
    return step.command


FILE_SELECTING = ("node", "jest", "vitest", "ava")  # frameworks told which test files to run by arguments


def with_files(step: ScriptStep, files: list[str]) -> ScriptStep | None:
    """The step running only `files`, for a framework that takes them as arguments and a step naming no files of its
    own (else None: the step runs whole). Its reporter is added after (`reporter_command`)."""
    tokens = _tokens(step.command)
    if step.framework not in FILE_SELECTING or not files or tokens is None or _SHELL_SYNTAX.search(step.command):
        return None
    _program_name, args = _program(tokens)
    own = [a for a in args if not a.startswith("-") and not (step.framework == "vitest" and a in ("run", "watch"))]
    if own:
        return None
    quoted = " ".join(shlex.quote(f) for f in files)
    flag = " --runTestsByPath" if step.framework == "jest" else ""
    return dataclasses.replace(step, command=f"{step.command}{flag} {quoted}")


def _copy_reporter(name: str, folder: Path) -> Path:
    """Our reporter `name` copied into the run's report folder afresh, whatever a step before left at its name: every
    step may write that folder, and a copy by name would write through a link out of it, or wait for a reader of a
    FIFO on the bot's event loop. The name is deleted by the folder's descriptor and a fresh file renamed over it."""
    with contextlib.suppress(FileNotFoundError):
        unlink_file(Path(folder), name)
    write_file(Path(folder), name, (REPORTERS / name).read_bytes())
    return Path(folder) / name


def describe_step(step: ScriptStep) -> str:
    """`xo` (lint): how a step is named in a sentence."""
    return f"`{step.command}` ({step.kind})" if step.kind != "other" else f"`{step.command}`"


# What a JavaScript test run gets in its environment: the package manager installed here is used as it is (never a
# self-download of the version `packageManager` pins: pnpm's manage-package-manager-versions, corepack), offline,
# no prompts or update checks; CI makes jest/vitest run once instead of watching.
JS_TEST_ENV = {
    "npm_config_manage_package_manager_versions": "false",
    "npm_config_package_manager_strict": "false",
    "npm_config_package_manager_strict_version": "false",
    "npm_config_offline": "true",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
    "COREPACK_ENABLE_STRICT": "0",
    "COREPACK_ENABLE_DOWNLOAD_PROMPT": "0",
    "COREPACK_ENABLE_AUTO_PIN": "0",
    "COREPACK_ENABLE_NETWORK": "0",
    "YARN_ENABLE_OFFLINE_MODE": "1",
    "YARN_ENABLE_TELEMETRY": "0",
    "CI": "true",
}
