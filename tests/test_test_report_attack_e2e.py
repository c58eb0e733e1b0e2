"""The bot's own test run writes its JUnit report in the sandbox and reads it outside: what the tests leave in the
report's place must not hang the bot or lead it out of the report's folder.

Through the real bot and real bwrap, the scripted model playing the worker: it plants a `conftest.py` whose last hook
(after pytest wrote the report) puts a FIFO in the report's place. A read of it by name, outside the sandbox, waits
for a writer that never comes: the task's check never ends, and the bot's thread stays blocked after the task (the
bot cannot even stop). Whatever the outcome, the test opens any such FIFO for writing at the end, so that a blocked
reader gets its end of file and the bot below the test can stop.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from agents.core.models import TaskStatus
from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.forgers import forged_at_exit
from tests.support.sandbox import needs_bwrap
from tests.support.tasks import ended, final_summary, start_task, write_file

pytestmark = needs_bwrap

CONFTEST = """\
import os


def pytest_unconfigure(config):
    report = getattr(config.option, "xmlpath", None)
    if report and os.path.exists(report):
        os.remove(report)
        os.mkfifo(report)
"""


@pytest.mark.settings(max_corrections=0)
async def test_a_fifo_in_place_of_the_report_does_not_hang_the_check(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "conftest.py", "content": CONFTEST}),
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed add()."),
    )
    bot.say("fix calc")
    try:
        task = await ended(bot, 1)  # fails after the hang guard where the check waits on the FIFO
    finally:
        release_fifos()
    assert task.status.is_final and task.status is not TaskStatus.FAILED, task.error


def release_fifos() -> None:
    """Open every FIFO in this process's report folders for writing and close it: a reader blocked on one ends."""
    for report in Path(tempfile.gettempdir()).glob(f"agentlab-junit-{os.getpid()}-*/junit.xml"):
        try:
            if stat.S_ISFIFO(report.lstat().st_mode):
                os.close(os.open(report, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader waiting (ENXIO): nothing to release
            pass


FORGED_AT_EXIT = forged_at_exit()


@pytest.mark.settings(max_corrections=0)  # calc's real pytest suite: the report and pytest's closing line
async def test_code_that_rewrites_the_report_at_exit_never_makes_a_pass(bot: BotHarness, model: RoleScript) -> None:
    """The code under test (no test file, no configuration touched) registers an exit hook that strips the failures
    from the JUnit report pytest just wrote and exits 0. pytest printed its closing line before: "1 failed". The bot
    compares the two, so the unfixed add() is no ✔ and the summary says the bot cannot tell."""
    model.add("orchestrator", start_task("calc", "Fix add() so test_add passes."), claude_says.text("started"))
    model.add("code", write_file("calc.py", FORGED_AT_EXIT), claude_says.text("Fixed add()."))
    bot.say("fix add in calc")
    task, summary = await final_summary(bot, 1, timeout=90)
    assert task.status is not TaskStatus.COMPLETED and not summary.text.startswith("✔"), summary.text
    assert "disagrees with what pytest printed" in summary.text, summary.text
