"""Shared fixtures: the loopback fakes, workspaces with real git repositories, and the real bot running against them."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import textwrap
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agents.core.settings import Settings
from tests.fakes import unserved
from tests.fakes.anthropic_server import FakeAnthropic, fake_anthropic  # noqa: F401  (fixture)
from tests.fakes.telegram_server import FakeTelegram, fake_telegram  # noqa: F401  (fixture)
from tests.run_order import SecondsRecorder, add_option, run_order
from tests.support.mounts import unmount_under

if TYPE_CHECKING:  # the xdist controller runs no test: importing the runtime (the Anthropic SDK) costs it ~2 s of CPU
    from agents.repo_map.maps import RepoMap
    from agents.runtime import Runtime
    from agents.sandbox.bwrap import SandboxProbe
    from agents.store.database import Store

# a task's worktree as a file system of its own (SANDBOX_DISK_FS=auto, a loop-mounted image) costs about 0.1 s and a
# loop device per task: the tests that are about it turn it on themselves; every other bot, in process or not, is off
os.environ.setdefault("SANDBOX_DISK_FS", "off")
# torch in the test process (the voice tests run both engines in process too) waits like the bot's speech process
# (speech_process.OPENMP_DEFAULTS, not imported here: the xdist controller stays light): its OpenMP threads sleep
# between operations instead of spinning on the cores the workers share. Read when torch is first imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

USER_ID = 1001
STRANGER_ID = 6666
MODEL = "claude-sonnet-4-6"
BOTH_FAKES = {"fake_telegram", "fake_anthropic"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the end-to-end tests `e2e`, so `pytest -m "not e2e"` is the fast inner loop: every test of a `*_e2e.py`
    module, and every test that uses both fake servers (through its fixtures too): it runs the whole bot (PTB, the
    SDK, git, bwrap, the real test frameworks) or a real bot process against them."""
    for item in items:
        if item.path.name.endswith("_e2e.py") or BOTH_FAKES <= set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
    items[:] = run_order(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--store-module-seconds") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SecondsRecorder(), "module-seconds")


CALL_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[CALL_PASSED] = report.passed
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    unserved.begin()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """After a test that passed, every model reply it scripted was served or marked spare (`tests.fakes.unserved`):
    checked once its fixtures are torn down (the bot stopped), so a reply served during teardown counts as served."""
    result = yield
    left = unserved.end()
    if left and item.stash.get(CALL_PASSED, False):
        shown = left if len(left) <= 20 else [*left[:20], f"… and {len(left) - 20} more lines"]
        pytest.fail(
            "scripted model replies were never served (mark one `spare(reply, why=...)` where it may "
            "stay unused):\n" + "\n".join(shown),
            pytrace=False,
        )
    return result


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection to a non-loopback address fails the test."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else address
        if (
            isinstance(host, str)
            and not (host.startswith("127.") or host in ("localhost", "::1", ""))
            and self.family in (socket.AF_INET, socket.AF_INET6)
        ):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    for key in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(autouse=True)
def _no_mount_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test with a folder of its own: whatever it left mounted there is unmounted (tests.support.mounts says
    why: a bot stopped mid-task keeps its task's worktree mounted, as it should; the test's folder must not)."""
    folder = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if folder is not None:
        unmount_under(folder)


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
    }
    # no `git maintenance run --auto` process after each commit (a test's repositories never need one)
    quiet = ["-c", "maintenance.auto=false", "-c", "gc.auto=0"]
    return subprocess.run(["git", *quiet, *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def text_now(path: Path) -> str:
    """The file's text, or "" while it is missing (a merge or checkout replaces a file by unlink + create)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, content in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(content))
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


CALC_BUGGY = {
    "calc.py": """\
        def add(a, b):
            return a - b
        """,
    "test_calc.py": """\
        from calc import add


        def test_add():
            assert add(2, 3) == 5
        """,
}


# The calc workspace of a test marked `quick_tests`: the same buggy calc and its pytest file, plus a committed
# `.agentlab.toml` whose [tests] command is one check run by the system's python3. A task there gets a real verdict
# through the same path (the run at the base commit, the run after each turn, the re-run at the base of what it
# fixed), at a small part of the CPU of a pytest run (about 0.015 s in the sandbox instead of 0.25 s, plus the
# sandbox's own start-up, the same for both). For the many tests about something other than the verdict; tests
# about test runs and verdict lines keep pytest.
CALC_QUICK = {
    **CALC_BUGGY,
    ".agentlab.toml": """\
        [tests]
        command = "python3 -c 'from calc import add; assert add(2, 3) == 5'"
        """,
}


# The calc workspace of a test marked `untested_calc`: calc.py alone, no tests at all. A task there runs none (its
# verdict is ⚠ unverified: "no tests found"), so it starts no sandboxed process for them. For tests whose tasks are
# incidental (buttons, questions, limits, MCP) and that look at neither the verdict nor the task's final status.
CALC_UNTESTED = {"calc.py": CALC_BUGGY["calc.py"]}


# calc's own test functions (each `test_*` of its `test_*.py`, called with no arguments) run by a few lines of the
# system's python3 instead of pytest, which write the JUnit report `.agentlab.toml` names: `test_calc.py::test_add`
# passed, or failed with its traceback, as pytest reports it.
_NAMED_TESTS_RUNNER = r"""
import glob, importlib, traceback; from html import escape; cases, failed = [], 0
for path in sorted(glob.glob("test_*.py")):
    tests = vars(importlib.import_module(path[:-3]))
    for name in sorted(n for n in tests if n.startswith("test_")):
        failure = ""
        try:
            tests[name]()
        except Exception:
            failed, text = failed + 1, traceback.format_exc()
            failure = "<failure message=\"%s\">%s</failure>" % (escape(text.splitlines()[-1]), escape(text))
        cases.append("<testcase classname=\"%s\" name=\"%s\">%s</testcase>" % (path[:-3], name, failure))
open("junit.xml", "w").write("<testsuite>%s</testsuite>" % "".join(cases))
raise SystemExit(1 if failed else 0)
""".strip()

# The calc workspace of a test marked `quick_named_tests`: CALC_QUICK's idea for tests whose verdict must tell a right
# fix from a wrong one by the test it names (an attempt that leaves `test_add` red, when the instructions name it, is
# ✗ and gets a correction, as under pytest; a whole-suite check that fails at the base and after is only ⚠). About
# 0.035 CPU-s a run instead of pytest's 0.25. What stays pytest's own (its JUnit option, re-running failing ids,
# tracing what a red test runs) is kept by the tests on the plain calc.
CALC_QUICK_NAMED = {
    **CALC_BUGGY,
    ".agentlab.toml": f"[tests]\njunit = \"junit.xml\"\ncommand = '''python3 -c '{_NAMED_TESTS_RUNNER}' '''\n",
}


@pytest.fixture
def workspace_root(request: pytest.FixtureRequest, tmp_path: Path, repo_templates: Path) -> Path:
    """The workspaces folder: `calc` and `group-therapy`. Under `@pytest.mark.quick_tests` calc's tests are one quick
    check; under `@pytest.mark.quick_named_tests` a quick run that names them; under `@pytest.mark.untested_calc` calc
    has no tests."""
    root = tmp_path / "workspaces"
    root.mkdir()
    calc = "calc"
    if request.node.get_closest_marker("untested_calc"):
        calc = "calc-untested"
    elif request.node.get_closest_marker("quick_tests"):
        calc = "calc-quick"
    elif request.node.get_closest_marker("quick_named_tests"):
        calc = "calc-quick-named"
    copy_repo(repo_templates, calc, root / "calc")
    copy_repo(repo_templates, "group-therapy", root / "group-therapy")
    return root


@pytest.fixture
def bot_repo(tmp_path: Path, repo_templates: Path) -> Path:
    return copy_repo(repo_templates, "agentlab-self", tmp_path / "agentlab-self")


TEMPLATE_REPOS = {
    "calc": CALC_BUGGY,
    "calc-quick": CALC_QUICK,
    "calc-quick-named": CALC_QUICK_NAMED,
    "calc-untested": CALC_UNTESTED,
    "group-therapy": {"README.md": "# Group therapy\n", "app.py": "print('hi')\n"},
    "agentlab-self": {"telegram_bot/handlers.py": "# handlers\n", "README.md": "# me\n"},
}


@pytest.fixture(scope="session")
def repo_templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repositories most tests start from, made once per test process and copied per test (three per `bot`).

    Each is made lean, since every file and folder is paid again at each copy: no sample hooks (git's inert
    `*.sample` scripts) nor description, and the objects in one pack instead of a folder per loose object. The
    `hooks/` and `info/` folders stay, as in any repository `git init` makes."""
    folder = tmp_path_factory.mktemp("repo-templates")
    for name, files in TEMPLATE_REPOS.items():
        repo = make_repo(folder / name, files)
        git(repo, "repack", "-a", "-d", "-n", "-q")  # -d: the loose objects go; -n: no dumb-HTTP index files
        for sample in (repo / ".git" / "hooks").glob("*.sample"):
            sample.unlink()
        for leftover in ("description", "COMMIT_EDITMSG"):
            (repo / ".git" / leftover).unlink(missing_ok=True)
    return folder


def copy_repo(templates: Path, name: str, target: Path) -> Path:
    return Path(shutil.copytree(templates / name, target, symlinks=True))


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Temporal dev server per test process (each xdist worker), started by the first test that asks for it and
    shared by all the Temporal tests after it: each test keeps to task queues named after itself, and the bot's
    workflow and schedule ids carry its own database's token, so no test sees another's work. A server costs about
    3 s to start; one per module was a good part of these modules' time."""
    from tests.temporal_dev import dev_server, free_port

    with dev_server(tmp_path_factory.mktemp("temporal"), free_port()) as address:
        yield address


def run_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder of this name shared by every test process of the run (the xdist workers' temporary folders are
    side by side in the run's own)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def node_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned JavaScript test frameworks (`tests.js_tools.npm_tools`) where the tests' temporary folders can
    hard-link them: on their own file system, copied there once per run and shared by the xdist workers."""
    from tests.js_tools import npm_tools, tools_on

    return tools_on(npm_tools(), run_folder(tmp_path_factory, "npm"))


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded random-weight whisper checkpoint (`build_tiny_checkpoint`'s defaults), built once per run: the
    xdist workers share it, so a worker whose voice tests run only speech processes never imports torch itself."""
    from tests.fakes.whisper_checkpoint import shared_checkpoint

    return shared_checkpoint(run_folder(tmp_path_factory, "whisper"), "tiny-random.pt")


@pytest.fixture(scope="session")
def tiny_ct2_folder(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path) -> Path:
    """`tiny_checkpoint` converted for faster-whisper (a CTranslate2 folder), once per run like the checkpoint:
    converting imports torch, about 2 s of CPU in a speech process that would otherwise need only CTranslate2."""
    import fcntl

    from agents.inputs.ct2_convert import convert_checkpoint

    root = run_folder(tmp_path_factory, "ct2")
    with open(root / "convert.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker converts, the others wait and find the folder there
        return convert_checkpoint(tiny_checkpoint, root)


def make_settings(
    tg: FakeTelegram, claude: FakeAnthropic, tmp_path: Path, workspace_root: Path, **overrides: object
) -> Settings:
    values: dict[str, object] = dict(
        telegram_bot_token=tg.token,
        telegram_api_base_url=tg.url,
        anthropic_api_key="sk-test",
        anthropic_base_url=claude.url,
        anthropic_max_retries=0,
        allowed_user_ids=str(USER_ID),
        workspace_path=workspace_root,
        database_path=tmp_path / "data" / "agentlab.db",
        orchestrator_model=MODEL,
        worker_model=MODEL,
        whisper_model=str(tmp_path / "no-such-checkpoint.pt"),
        test_timeout_seconds=120,
    )
    values.update(overrides)
    return Settings(_env_file=None, **values)


@dataclass
class BotHarness:
    """The real PTB Application, polling the fake Telegram, with Claude played by the fake Anthropic server."""

    app: object
    tg: FakeTelegram
    claude: FakeAnthropic
    settings: Settings
    chat_id: int = USER_ID
    user_id: int = USER_ID

    @property
    def runtime(self) -> Runtime:
        return self.app.bot_data.runtime

    def say(self, text: str, user_id: int | None = None) -> dict:
        return self.tg.send_text(user_id or self.user_id, text)

    async def replies(self, count: int = 1, timeout: float = 15.0) -> list:
        return await self.tg.wait_for_message(self.chat_id, count=count, timeout=timeout)


async def start_bot(
    settings: Settings,
    tg: FakeTelegram,
    claude: FakeAnthropic,
    transcriber: object | None = None,
    sandbox_probe: SandboxProbe | None = None,
) -> BotHarness:
    """The bot polling the fake Telegram. `sandbox_probe`: a test about the probe gives a fresh one; the others
    share the test process's (the machine does not change under the tests: bwrap and node are probed once)."""
    from telegram_bot.app import build_application, start_polling
    from tests.support.sandbox import PROBE

    app = build_application(settings)
    app.bot_data.sandbox_probe = sandbox_probe or PROBE
    if transcriber is not None:
        app.bot_data.transcriber = transcriber
    await start_polling(app)
    return BotHarness(app=app, tg=tg, claude=claude, settings=settings)


@contextlib.asynccontextmanager
async def running_bot(
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
    bot_repo: Path,
    **overrides: Any,
) -> AsyncIterator[BotHarness]:
    """The bot with `overrides` on the test settings, polling the fake Telegram until the block ends."""
    from telegram_bot.app import stop_application

    settings = make_settings(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repository=bot_repo, **overrides
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        yield harness
    finally:
        await stop_application(harness.app)


@pytest.fixture
async def bot(
    request: pytest.FixtureRequest,
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
    bot_repo: Path,
) -> AsyncIterator[BotHarness]:
    """The bot on the test settings; `@pytest.mark.settings(max_corrections=0, …)` overrides some for one test."""
    from telegram_bot.app import stop_application
    from tests.fakes.whisper_checkpoint import FakeTranscriber

    transcriber = FakeTranscriber()
    marker = request.node.get_closest_marker("settings")
    overrides = marker.kwargs if marker else {}
    settings = make_settings(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, bot_repository=bot_repo, **overrides
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=transcriber)
    try:
        yield harness
    finally:
        await stop_application(harness.app)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    """The bot's store, empty, in the test's folder (a module may define its own `store` instead)."""
    from agents.store.database import Store

    db = await Store.open(tmp_path / "state" / "agentlab.db")
    yield db
    await db.close()


@pytest.fixture
def repo_map(store: Store) -> RepoMap:
    """The repository maps over the test's `store`."""
    from agents.repo_map.maps import RepoMap

    return RepoMap(store)


@pytest.fixture
def model(fake_anthropic: FakeAnthropic) -> Any:
    """The scripted model (`tests.scripted.RoleScript`) playing Claude behind the fake Anthropic server: strict both
    ways, so a call the test did not script fails it, and so does a reply it scripted that no call took."""
    from tests.scripted import RoleScript

    scripted = RoleScript()
    fake_anthropic.handler = scripted
    return scripted
