"""The scripted model is strict both ways: a call nobody scripted fails the test and says which call it was, in process
and behind the fake Anthropic server (through the real SDK); a scripted reply never served fails a test that passed
and is named, unless it was marked spare (a test session of its own, run in process, shows the check as a user sees it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

from agents.llm import prompts
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.scripted import RoleScript, UnscriptedCall, say, spare

pytest_plugins = ["pytester"]


def request(system: str, text: str) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 100, "system": system, "messages": [{"role": "user", "content": text}]}


def first_text(message: anthropic.types.Message) -> str:
    block = message.content[0]
    assert isinstance(block, anthropic.types.TextBlock), block
    return block.text


async def test_an_unscripted_call_in_process_fails_and_names_the_call() -> None:
    model = RoleScript([say("first answer")])
    model.add("code", spare(say("the code worker's answer"), why="only named in the error"))
    assert first_text(await model.create(**request(prompts.ORCHESTRATOR, "hello"))) == "first answer"
    with pytest.raises(UnscriptedCall) as caught:
        await model.create(**request(prompts.ORCHESTRATOR, "and again?"))
    said = str(caught.value)
    assert "orchestrator call #2" in said and "'and again?'" in said and "{'code': 1}" in said, said
    assert model.unexpected == [said]


async def test_a_role_takes_its_own_replies_first_then_the_shared_list() -> None:
    model = RoleScript([say("shared")]).add("code", claude_says.text("own"))
    code = request(prompts.CODE, "go")
    assert [first_text(await model.create(**code)) for _ in range(2)] == ["own", "shared"]
    assert len(model.requests["code"]) == 2 and len(model.calls) == 2


async def test_an_unscripted_call_through_the_fake_server_is_a_500_and_fails_the_test(
    fake_anthropic: FakeAnthropic,
) -> None:
    model = RoleScript().add("orchestrator", say("scripted"))  # an SDK message served by the fake as its JSON
    fake_anthropic.handler = model
    client = fake_anthropic.async_client()
    first = await client.messages.create(**request(prompts.ORCHESTRATOR, "hi"))
    assert first_text(first) == "scripted"
    with pytest.raises(anthropic.InternalServerError):
        await client.messages.create(**request(prompts.RESEARCH, "look around"))
    assert model.unexpected and "research call #1" in model.unexpected[0] and "'look around'" in model.unexpected[0]
    assert [type(e) for e in fake_anthropic.handler_errors] == [UnscriptedCall], "the fixture fails the test on it"
    fake_anthropic.handler_errors.clear()  # expected here: the fixture would fail this test


CHECKED = """
from tests.conftest import pytest_runtest_makereport, pytest_runtest_setup, pytest_runtest_teardown  # the check
from tests.fakes.anthropic_server import fake_anthropic
"""


def run_session(pytester: pytest.Pytester, tests: str) -> pytest.RunResult:
    pytester.makeconftest(CHECKED)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_leftovers="from tests.fakes import anthropic_server as claude_says\n" + tests)
    pytester.syspathinsert(str(Path(__file__).resolve().parents[1]))  # the repository, for `tests.…`
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist")


def test_replies_left_unused_fail_a_test_that_passed_and_are_named(pytester: pytest.Pytester) -> None:
    result = run_session(
        pytester,
        """
from tests.scripted import RoleScript, say, call, spare


def test_in_process():
    model = RoleScript([say("served")]).add("code", call("read_file", {"path": "a.py"}), say("never asked"))
    model.add("research", say("nor this"))
    model._take({"system": "", "messages": [{"role": "user", "content": "hi"}]})


def test_behind_the_server(fake_anthropic):
    fake_anthropic.script(claude_says.text("queued, never requested"), claude_says.overloaded())
    fake_anthropic.script(*[claude_says.text("again")] * 3, spare(claude_says.text("x"), why="spare"))
""",
    )
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "scripted model replies were never served*",
            'code queue, reply 1 of the 2 left: tool_use read_file({"path": "a.py"})',
            "code queue, reply 2 of the 2 left: text 'never asked'",
            "research queue, reply 1 of the 1 left: text 'nor this'",
            "scripted model replies were never served*",
            "the fake Anthropic server's queue, reply 1 of the 6 left: text 'queued, never requested'",
            "the fake Anthropic server's queue, reply 2 of the 6 left: error 529 overloaded_error",
            "the fake Anthropic server's queue, replies 3-5 of the 6 left: text 'again'",
        ]
    )


def test_spare_replies_may_stay_and_a_failed_test_reports_only_its_failure(pytester: pytest.Pytester) -> None:
    result = run_session(
        pytester,
        """
from tests.scripted import RoleScript, say, spare


def test_spare():
    RoleScript([spare(say("maybe"), why="the loop may stop first")])


def test_spare_behind_the_server(fake_anthropic):
    fake_anthropic.script(spare(claude_says.text("maybe"), why="the retry may not happen"))


def test_that_fails():
    RoleScript([say("left because the test failed first")])
    assert False, "its own failure"
""",
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*its own failure*"])
    result.stdout.no_fnmatch_line("*never served*")


def test_a_spare_reply_is_served_as_any_other() -> None:
    model = RoleScript([spare(say("spare but served"), why="served here")])
    assert model.unserved() == [] and model.remaining() == 1
    reply = model._take({"system": "", "messages": [{"role": "user", "content": "hi"}]})
    assert first_text(reply) == "spare but served" and model.remaining() == 0
    with pytest.raises(ValueError, match="say why"):
        spare(say("x"), why=" ")
