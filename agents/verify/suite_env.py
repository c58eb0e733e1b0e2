"""The workspace's own test environment: which command runs its tests, with which interpreter or package manager,
and what a checkout (a task worktree or a base-commit copy) borrows from the main checkout to run them.

Detection order: `.agentlab.toml` `[tests]`, a workspace `.venv`/`venv`, uv (`uv.lock`), Poetry, tox/nox,
`package.json` scripts run by the package manager its lock file names (the test script read as steps by
agents/verify/js_test_script.py), a Makefile `test` target, Go, Cargo, and only then the bot's own interpreter (said so
in `notes`). The code under test is always the checkout's: its source roots come first on `PYTHONPATH`, and
borrowed folders (`.venv`, `node_modules`) are links hidden from git.

Why one module over 400 lines: the detection order (toml, venv, uv, Poetry, tox, npm/pnpm/yarn/bun, make, Go, Cargo)
is one ranked list and reads best in one place.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.sandbox.safe_paths import UnsafePath, append_lines, checkout_venv, make_symlink, real_folder
from agents.verify.js_test_script import JS_TEST_ENV, ScriptStep, plan_script
from agents.verify.node_modules_links import is_links_folder, plant
from agents.workspaces.file_walk import SKIP_DIRS, walk_tree
from agents.workspaces.folders import names_a_credential

CONFIG_FILE = ".agentlab.toml"
MAX_TEST_TIMEOUT_S = 86_400  # a repository's own [tests] timeout: a day bounds the slowest suite
PYTEST_ARGS = "-m pytest -q --no-header -p no:cacheprovider -rfE"
NPM_DEFAULT_TEST = "no test specified"
EXCLUDE_MARKER = "# agentlab: environment links borrowed by task worktrees"
_MAX_FILES_SCANNED = 20_000
_VENV_NAMES = (".venv", "venv")
# Variables the bot sets for its own commands (agents/sandbox/shell.py CHILD_ENV_HINTS) that change what tests see:
# never in a test run. (CI stays: it is what keeps jest and vitest from watching.)
# the bot's own environment, not a contributor's: colour hints, and pytest plugins the bot's process names (the
# only plugin a run gets that way is the bot's tracer, agents/verify/tracer.py)
NOT_A_CONTRIBUTORS = frozenset({"NO_COLOR", "FORCE_COLOR", "NODE_DISABLE_COLORS", "PYTEST_PLUGINS"})
_LOCKFILES = (
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("bun.lockb", "bun"),
    ("bun.lock", "bun"),
    ("package-lock.json", "npm"),
)


class TestConfigError(ValueError):
    """`.agentlab.toml` exists but its [tests] section cannot be used."""

    __test__ = False


@dataclass(frozen=True)
class TestConfig:
    """The `[tests]` table of `.agentlab.toml`: a command (e.g. a fast subset), a JUnit file it writes, a timeout,
    and `keep`: files of the workspace the tests need that are not committed (`.env.test`, generated code), copied
    into the clean room each verdict run tests (agents/verify/clean_room.py)."""

    __test__ = False

    command: str | None = None
    junit: str | None = None
    timeout: float | None = None
    keep: tuple[str, ...] = ()
    source: str = "base commit"  # or "workspace (untracked)"


def parse_config(text: str, source: str = "base commit") -> TestConfig | None:
    """The `[tests]` table of a `.agentlab.toml` text; None when it has none. Raises TestConfigError when malformed."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise TestConfigError(f"{CONFIG_FILE} cannot be read: {err}") from None
    tests = data.get("tests")
    if tests is None:
        return None
    if not isinstance(tests, dict):
        raise TestConfigError(f'{CONFIG_FILE}: [tests] must be a table with a `command = "..."` key')
    command, junit, timeout = tests.get("command"), tests.get("junit"), tests.get("timeout")
    keep = tests.get("keep", [])
    if not isinstance(keep, list) or not all(isinstance(k, str) and _plain_relative(k) for k in keep):
        raise TestConfigError(
            f'{CONFIG_FILE}: [tests] keep must be a list of paths inside the workspace, e.g. keep = [".env.test"]'
        )
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise TestConfigError(f"{CONFIG_FILE}: [tests] command must be a non-empty string")
    # the report is read after the run: a path out of the checkout would have the bot read a file of the host's
    if junit is not None and (not isinstance(junit, str) or not _plain_relative(junit)):
        raise TestConfigError(
            f'{CONFIG_FILE}: [tests] junit must be a path inside the workspace, e.g. junit = "reports/junit.xml"'
        )
    # `not 0 < timeout <= MAX`, not `timeout <= 0`: TOML's nan and inf are floats that would pass the latter and bound
    # nothing (a NaN deadline in asyncio's timers fires at the wrong time)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TEST_TIMEOUT_S
    ):
        raise TestConfigError(
            f"{CONFIG_FILE}: [tests] timeout must be a number of seconds above 0 and at most {MAX_TEST_TIMEOUT_S:,}"
        )
    return TestConfig(
        command=command.strip() if command else None,
        junit=junit.strip() if junit else None,
        timeout=float(timeout) if timeout else None,
        keep=tuple(dict.fromkeys(k.strip().strip("/") for k in keep)),
        source=source,
    )


def _plain_relative(path: str) -> bool:
    """A path inside the workspace: relative, no `..`, not the git folder."""
    parts = Path(path.strip().strip("/")).parts
    return bool(parts) and not Path(path).is_absolute() and ".." not in parts and parts[0] != ".git"


def read_config_file(checkout: Path, source: str = "checkout") -> TestConfig | None:
    path = Path(checkout) / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TestConfigError(f"{CONFIG_FILE} cannot be read: {err}") from None
    return parse_config(text, source)


@dataclass
class TestEnvironment:
    """How to run one workspace's tests. `command` is run by bash in the checkout; `display` is what a phone shows."""

    __test__ = False

    kind: str  # e.g. "workspace .venv", "pnpm", "bot's Python"
    command: str
    display: str
    pytest: bool = False  # per-test outcomes through --junitxml; failing ids can be re-run
    rerunnable: bool = False  # `command + ids` runs exactly those ids (our own pytest command)
    junit: str | None = None  # a JUnit file the command writes (relative to the checkout), from .agentlab.toml
    timeout: float | None = None
    workspace: Path | None = None  # the main checkout things are borrowed from
    python_env: Path | None = None  # the virtual environment used (borrowed or the bot's)
    python_base: Path | None = None  # the host's Python installation a borrowed environment was made from
    borrowed: list[str] = field(default_factory=list)  # checkout-relative folders linked from the main checkout
    notes: list[str] = field(default_factory=list)
    fallback: bool = False  # the bot's interpreter stands in for a missing environment
    script: list[ScriptStep] = field(default_factory=list)  # a package.json test script, step by step (js_test_script)
    keep: tuple[str, ...] = ()  # the workspace's uncommitted files the tests need (`.agentlab.toml [tests] keep`)
    # whether `keep` may copy credential files (`.env`, keys): only when the owner's untracked `.agentlab.toml` says so
    keep_credentials: bool = False

    @property
    def read_only_paths(self) -> list[Path]:
        """What the tests read outside the checkout: borrowed folders and the interpreter's environment (for a
        sandbox to mount read-only)."""
        paths: list[Path] = []
        if self.workspace is not None:  # real folders of the main checkout (checked by detect_environment)
            paths += [found for rel in self.borrowed if (found := real_folder(self.workspace, rel)) is not None]
        if self.python_env is not None:
            paths.append(self.python_env if not self.fallback else self.python_env.resolve())
            if self.python_base is not None:
                paths.append(self.python_base)
            if self.fallback:
                paths.append(Path(sys.base_prefix).resolve())
        return list(dict.fromkeys(paths))

    def env_for(self, checkout: Path, base: dict[str, str]) -> dict[str, str]:
        """`base` plus what puts the checkout's code first: PYTHONPATH with its source roots, the environment's
        `bin` and the checkout's `node_modules/.bin` on PATH. Without the hints the bot gives its own commands that a
        contributor's shell does not have (NO_COLOR: colour tests that pass for the contributor must pass here)."""
        env = {k: v for k, v in base.items() if k not in NOT_A_CONTRIBUTORS}
        roots = [str(p) for p in source_roots(checkout)]
        if env.get("PYTHONPATH"):
            roots.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(roots)
        path = [str(checkout / "node_modules" / ".bin")]
        if self.python_env is not None and not self.fallback:
            path.insert(0, str(self.python_env / "bin"))
            env["VIRTUAL_ENV"] = str(self.python_env)
        env["PATH"] = os.pathsep.join([*path, env.get("PATH", os.defpath)])
        if self.kind in ("npm", "pnpm", "yarn", "bun"):  # offline, the installed package manager, no prompts
            env.update(JS_TEST_ENV)
        if self.fallback:  # the bot's own pytest plugins (hypothesis, xdist, …) are not the workspace's: not loaded
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        return env

    def with_ids(self, ids: list[str]) -> str:
        """The command that re-runs only `ids` (our own pytest command; anything else re-runs whole)."""
        if not (self.rerunnable and ids):
            return self.command
        return f"{self.command} {' '.join(shlex.quote(i) for i in ids)}"


def source_roots(checkout: Path) -> list[Path]:
    """The checkout's own import roots, first on the path: `src/` in a src layout, and the checkout itself."""
    src = checkout / "src"
    roots = (
        [src]
        if src.is_dir()
        and any(
            p.suffix == ".py" or (p / "__init__.py").is_file() or p.is_dir()
            for p in src.iterdir()
            if not p.name.startswith(".")
        )
        else []
    )
    return [*roots, checkout]


# ----------------------------------------------------------------------------------------------------------------------
# detection


def _without_credentials(keep: tuple[str, ...], notes: list[str]) -> tuple[str, ...]:
    """A committed `keep` less its credential files (anyone's commit may name them; the tests it runs would print
    the owner's untracked `.env` to the worker and the chat), each left out said in `notes`."""
    kept = tuple(rel for rel in keep if not names_a_credential(rel))
    for rel in keep:
        if rel not in kept:
            notes.append(
                f"`{rel}` was not copied into the test run: a committed {CONFIG_FILE} cannot hand the workspace's "
                f"credential files to the tests (an untracked {CONFIG_FILE}, the owner's own, can)"
            )
    return kept


def detect_environment(
    checkout: Path, workspace: Path | None = None, config: TestConfig | None | bool = True
) -> TestEnvironment | None:
    """The environment that runs the tests of `checkout` (files as of the base commit), borrowing what is untracked
    from `workspace` (the main checkout; default: the checkout itself). `config=True` reads `.agentlab.toml` from
    the checkout; pass the base commit's parsed config (or None) instead. None: no tests."""
    checkout = Path(checkout)
    workspace = Path(workspace) if workspace is not None else checkout
    if config is True:
        config = read_config_file(checkout)
    config = config or None
    venv, base, refused = _own_venv(workspace)
    borrowed = [venv.name] if venv is not None and venv.parent == workspace else []
    borrowed += _node_modules(checkout, workspace)
    common = {"workspace": workspace, "borrowed": borrowed}
    env = _choose(checkout, workspace, config, venv, common)
    if env is None:
        return None
    if env.python_env is not None and env.python_env == venv:
        env.python_base = base
    if refused:
        env.notes.append(f"the workspace's environment was not used: {refused}")
    if config is not None:
        env.junit = config.junit
        env.timeout = config.timeout
        env.keep_credentials = config.source != "base commit"
        env.keep = config.keep if env.keep_credentials else _without_credentials(config.keep, env.notes)
        if config.source != "base commit":
            env.notes.append(f"{CONFIG_FILE} read from the {config.source}")
    if env.python_env is not None and not env.fallback and (editable := _editable_of(env.python_env, workspace)):
        env.notes.append(
            f"the editable install of {editable} in the environment is overridden by the worktree's own sources"
        )
    return env


def _choose(
    checkout: Path, workspace: Path, config: TestConfig | None, venv: Path | None, common: dict[str, Any]
) -> TestEnvironment | None:
    if config is not None and config.command:
        return TestEnvironment(
            kind=CONFIG_FILE,
            command=config.command,
            display=short_command(config.command),
            pytest=runs_pytest(config.command),
            python_env=venv,
            **common,
        )
    python_tests = looks_like_pytest(checkout)
    if venv is not None and python_tests:
        python = venv / "bin" / "python"
        return TestEnvironment(
            kind=f"workspace {venv.name}",
            command=f"{shlex.quote(str(python))} {PYTEST_ARGS}",
            display="pytest",
            pytest=True,
            rerunnable=True,
            python_env=venv,
            **common,
        )
    if python_tests and (checkout / "uv.lock").is_file() and shutil.which("uv"):
        return TestEnvironment(
            kind="uv",
            command=f"uv run --frozen python {PYTEST_ARGS}",
            display="uv run pytest",
            pytest=True,
            rerunnable=True,
            **common,
        )
    if python_tests and _pyproject_has(checkout, "poetry") and shutil.which("poetry"):
        return TestEnvironment(
            kind="Poetry",
            command=f"poetry run python {PYTEST_ARGS}",
            display="poetry run pytest",
            pytest=True,
            rerunnable=True,
            **common,
        )
    if (checkout / "tox.ini").is_file() and shutil.which("tox"):
        return TestEnvironment(kind="tox", command="tox", display="tox", **common)
    if (checkout / "noxfile.py").is_file() and shutil.which("nox"):
        return TestEnvironment(kind="nox", command="nox", display="nox", **common)
    if has_npm_test_script(checkout):
        manager = next((pm for lock, pm in _LOCKFILES if (checkout / lock).is_file()), "npm")
        command = "npm test --silent" if manager == "npm" else f"{manager} test"
        script = plan_script(checkout, manager)
        return TestEnvironment(kind=manager, command=command, display=f"{manager} test", script=script, **common)
    if _makefile_has_test(checkout):
        return TestEnvironment(kind="make", command="make test", display="make test", **common)
    if (checkout / "go.mod").is_file():
        return TestEnvironment(kind="Go", command="go test ./...", display="go test", **common)
    if (checkout / "Cargo.toml").is_file():
        return TestEnvironment(kind="Cargo", command="cargo test", display="cargo test", **common)
    if python_tests:
        bot_env = Path(sys.prefix)
        return TestEnvironment(
            kind="bot's Python",
            command=f"{shlex.quote(sys.executable)} {PYTEST_ARGS}",
            display="pytest",
            pytest=True,
            rerunnable=True,
            python_env=bot_env,
            fallback=True,
            notes=["the workspace has no environment of its own: ran with the bot's Python (pytest without plugins)"],
            **common,
        )
    return None


def _own_venv(workspace: Path) -> tuple[Path | None, Path | None, str | None]:
    """(venv, its base installation, why a venv present was not used): only a real folder of the checkout made
    from a Python the host provides counts (`safe_paths.checkout_venv`); a committed `pyvenv.cfg` or a symlink
    never decides what the sandbox binds."""
    refused = []
    for name in _VENV_NAMES:
        venv, base, why_not = checkout_venv(workspace, name)
        if venv is not None:
            return venv, base, None
        if why_not:
            refused.append(why_not)
    return None, None, "; ".join(refused) or None


def _node_modules(checkout: Path, workspace: Path) -> list[str]:
    """Checkout-relative folders whose `node_modules` the main checkout has (a real folder) and the checkout lacks
    or holds as the bot's links (a resumed task's worktree: borrowed again), monorepos included: every folder with a
    package.json, three levels deep."""
    found = []
    for package in _package_dirs(checkout):
        rel = package.relative_to(checkout)
        source = real_folder(workspace, rel / "node_modules")  # never through a symlink the repository chose
        own = package / "node_modules"
        if source is not None and (own.is_symlink() or not os.path.lexists(own) or is_links_folder(own)):
            found.append(str(rel / "node_modules") if str(rel) != "." else "node_modules")
    return found


def _package_dirs(checkout: Path, depth: int = 3) -> list[Path]:
    dirs = [checkout] if (checkout / "package.json").is_file() else []
    frontier = [checkout]
    for _ in range(depth):
        nxt = []
        for folder in frontier:
            try:
                children = [
                    c
                    for c in folder.iterdir()
                    if c.is_dir() and not c.is_symlink() and c.name not in SKIP_DIRS and not _not_a_source_dir(c.name)
                ]
            except OSError:
                continue
            nxt += children
            dirs += [c for c in children if (c / "package.json").is_file()]
        frontier = nxt
    return dirs


def _editable_of(venv: Path, workspace: Path) -> str | None:
    """The main checkout path an editable install in `venv` points at (a `.pth` or `__editable__` finder), if any."""
    needle = str(workspace.resolve())
    for site in venv.glob("lib/python*/site-packages"):
        for path in [*site.glob("*.pth"), *site.glob("__editable__*.py")]:
            try:
                if needle in path.read_text(encoding="utf-8", errors="replace"):
                    return needle
            except OSError:
                continue
    return None


def runs_pytest(command: str) -> bool:
    """Whether the command runs pytest (`python -m pytest`, `pytest`, `.venv/bin/pytest`, `py.test`)."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    return any(Path(token).name in ("pytest", "py.test") for token in tokens)


def short_command(command: str) -> str:
    """A command as a phone shows it: paths into environments reduced to the program name (`pytest`, `python`)."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return command[:60]
    shown = [Path(tokens[0]).name, *tokens[1:]] if tokens else []  # the program, not the path into an environment
    if len(shown) >= 3 and shown[0].startswith("python") and shown[1:3] == ["-m", "pytest"]:
        shown = ["pytest", *[t for t in shown[3:] if not t.startswith("-")]]
    text = " ".join(shown)
    return text if len(text) <= 60 else text[:59] + "…"


def looks_like_pytest(checkout: Path) -> bool:
    if (checkout / "pytest.ini").is_file() or (checkout / "conftest.py").is_file():
        return True
    if _pyproject_has(checkout, "pytest"):
        return True
    if _ini_has_section(checkout / "setup.cfg", "tool:pytest") or _ini_has_section(checkout / "tox.ini", "pytest"):
        return True
    tests_dir = checkout / "tests"
    if tests_dir.is_dir() and _find_file(tests_dir, lambda name: name.endswith(".py")):
        return True
    return _find_file(checkout, is_test_file_name)


def is_test_file_name(name: str) -> bool:
    name = Path(name).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _not_a_source_dir(name: str) -> bool:
    """Folders tests are not looked for in, beyond the walker's own skips: hidden ones and build outputs."""
    return name.startswith(".") or name in ("build", "dist", "site-packages")


def _find_file(root: Path, wanted: Callable[[str], bool]) -> bool:
    scanned = 0
    for _folder, _dirs, filenames in walk_tree(root, skip=_not_a_source_dir):
        if any(wanted(name) for name in filenames):
            return True
        scanned += len(filenames)
        if scanned > _MAX_FILES_SCANNED:
            return False
    return False


def pyproject_table(text: str, name: str) -> object:
    try:
        tool = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        return None
    return tool.get(name) if isinstance(tool, dict) else None


def _pyproject_has(checkout: Path, name: str) -> bool:
    path = checkout / "pyproject.toml"
    if not path.is_file():
        return False
    try:
        return pyproject_table(path.read_text(encoding="utf-8"), name) is not None
    except (OSError, UnicodeDecodeError):
        return False


def _ini_has_section(path: Path, section: str) -> bool:
    if not path.is_file():
        return False
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(rf"^\[{re.escape(section)}\]\s*$", text, re.MULTILINE) is not None


def npm_test_script(text: str) -> str | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    scripts = data.get("scripts") if isinstance(data, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    return test if isinstance(test, str) else None


def has_npm_test_script(checkout: Path) -> bool:
    path = checkout / "package.json"
    if not path.is_file():
        return False
    try:
        test = npm_test_script(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return False
    return test is not None and bool(test.strip()) and NPM_DEFAULT_TEST not in test


def _makefile_has_test(checkout: Path) -> bool:
    for name in ("Makefile", "makefile", "GNUmakefile"):
        path = checkout / name
        if path.is_file():
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return False
            return re.search(r"^test\s*:", text, re.MULTILINE) is not None
    return False


# ----------------------------------------------------------------------------------------------------------------------
# borrowing


def link_borrowed(env: TestEnvironment, checkout: Path) -> list[str]:
    """Borrow the main checkout's folders into `checkout`, hidden from git (the repository's `info/exclude` names
    each, anchored, so `git add -A` never commits it and Diff never shows it): a `node_modules` as a folder of links
    of the checkout's own (agents/verify/node_modules_links.py: writable for caches, workspace packages resolved to
    the checkout's), anything else (`.venv`) as one link."""
    if env.workspace is None or Path(checkout).resolve() == env.workspace.resolve():
        return []
    linked = []
    for rel in env.borrowed:
        link, source = Path(checkout) / rel, real_folder(env.workspace, rel)
        parent = Path(rel).parent
        if source is None or (str(parent) != "." and real_folder(Path(checkout), parent) is None):
            continue  # nothing real to borrow, or a link's folder is itself a link: never followed
        if Path(rel).name == "node_modules":
            if link.is_symlink():
                link.unlink()  # one link to the whole folder (a worker's, or an older bot's): links per entry now
            if (os.path.lexists(link) and not is_links_folder(link)) or not plant(
                Path(checkout), rel, source, env.workspace
            ):
                continue  # the checkout's own real node_modules is never touched
            linked.append(rel)
            continue
        if link.is_symlink() and os.readlink(link) != str(source):
            link.unlink()  # a link the worker re-pointed: borrowed again from the main checkout
        if os.path.lexists(link):
            continue
        try:  # the link's folders are walked without following symlinks: it lands inside the checkout or nowhere
            make_symlink(Path(checkout), rel, source)
        except (UnsafePath, OSError):
            continue
        linked.append(rel)
    if linked:  # the main checkout's repository (shared by its worktrees), never the one a worker's `.git` names
        hide_from_git(env.workspace, linked)
    return linked


def hide_from_git(checkout: Path, paths: list[str]) -> None:
    """Add `/path` lines to the `info/exclude` of the checkout's repository (shared by its worktrees), written
    without following a symlink anywhere under the git folder."""
    common = _git_common_dir(checkout)
    if common is None:
        return
    exclude = common / "info" / "exclude"
    try:
        existing = exclude.read_text(encoding="utf-8") if exclude.is_file() and not exclude.is_symlink() else ""
    except OSError:
        return
    lines = set(existing.splitlines())
    wanted = [f"/{p}" for p in paths if f"/{p}" not in lines]
    if not wanted:
        return
    block = ([EXCLUDE_MARKER] if EXCLUDE_MARKER not in lines else []) + wanted
    text = ("" if not existing or existing.endswith("\n") else "\n") + "\n".join(block) + "\n"
    try:
        append_lines(common, "info/exclude", text)
    except OSError:  # a symlinked info folder or exclude file: the links stay visible to git rather than follow it
        return


def _git_common_dir(checkout: Path) -> Path | None:
    dot_git = checkout / ".git"
    if dot_git.is_dir():
        return dot_git
    if not dot_git.is_file():
        return None
    text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    gitdir = (checkout / text.split(":", 1)[1].strip()).resolve()
    commondir = gitdir / "commondir"
    if commondir.is_file():
        return (gitdir / commondir.read_text(encoding="utf-8").strip()).resolve()
    return gitdir
