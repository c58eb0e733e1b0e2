"""How the user's words are read for the decisions that are theirs (agents/work/own_words.py): what asks for one,
what agrees to one, and what never does ("thanks", and words that refuse it)."""

from __future__ import annotations

import pytest

from agents.work.own_words import (
    APPROVE,
    CANCEL_SCHEDULE,
    CANCEL_TASK,
    CREATE_WORKSPACE,
    DISCARD,
    FORGET,
    MERGE,
    PAUSE,
    PULL_REQUEST,
    REJECT,
    REMEMBER,
    RESUME,
    REWORK,
    SCHEDULE,
    Decision,
    item_of,
    names_item,
    words_ask_for,
)

ASKING = [
    (MERGE, "merge it"),
    (MERGE, "Ship it!"),
    (MERGE, "yes, go ahead"),
    (MERGE, "ok"),
    (MERGE, "don't wait, merge it"),
    (DISCARD, "throw it away"),
    (DISCARD, "delete the branch"),
    (APPROVE, "go ahead"),
    (APPROVE, "looks good, implement it"),
    (APPROVE, "approve the group therapy one"),
    (REJECT, "no thanks, drop it"),
    (REJECT, "reject it"),
    (REWORK, "refine it: use sqlite"),
    (REWORK, "good, but skip the middleware part"),
    (REWORK, "instead of writing retries by hand, use a library"),
    (REWORK, "no, don't add a table; keep it in memory"),  # a "don't" that is itself the change asked for
    (REWORK, "change the plan to cover the CLI too"),
    (REWORK, "what about a simpler approach?"),
    (REWORK, "yes, rework it"),
    (PULL_REQUEST, "open a PR"),
    (PULL_REQUEST, "push it to github"),
    (SCHEDULE, "every weekday at 9 run the tests in calc"),
    (SCHEDULE, "in two seconds research calc"),
    (SCHEDULE, "remind me tomorrow to check the build"),
    (SCHEDULE, "run the tests nightly"),
    (PAUSE, "pause the nightly run"),
    (PAUSE, "hold it for now"),
    (RESUME, "resume schedule 1"),
    (RESUME, "turn it back on"),
    (CANCEL_SCHEDULE, "stop the nightly run"),
    (CANCEL_SCHEDULE, "delete schedule 2"),
    (REMEMBER, "remember that in site we use pnpm"),
    (REMEMBER, "from now on use tabs"),
    (REMEMBER, "never push to main"),
    (REMEMBER, "don't forget: we deploy on fridays"),
    (FORGET, "forget the pnpm note"),
    (FORGET, "remove note 3"),
    (CREATE_WORKSPACE, "build me a portfolio site"),
    (CREATE_WORKSPACE, "new project: a todo app"),
    (CANCEL_TASK, "stop it"),
    (CANCEL_TASK, "cancel task 3"),
    (CANCEL_TASK, "never mind"),
]

NOT_ASKING = [
    (MERGE, "thanks"),
    (MERGE, "what's new?"),
    (MERGE, "thanks, but don't merge it yet"),
    (MERGE, "do not merge"),
    (MERGE, "ok, but wait"),
    (MERGE, "no need to merge it"),
    (MERGE, "I didn’t ask you to merge"),  # a typographic apostrophe
    (MERGE, "merge it? no, wait: don't merge it"),  # any clause that refuses decides against
    (DISCARD, "please don't delete it"),
    (APPROVE, "thanks"),
    (APPROVE, "hmm, interesting"),
    (APPROVE, "don't implement it yet"),
    (REJECT, "thanks"),
    (REJECT, "don't reject it"),
    (REWORK, "thanks"),
    (REWORK, "go ahead"),
    (REWORK, "yes"),
    (REWORK, "looks good, implement it"),
    (REWORK, "no thanks, drop it"),
    (REWORK, "don't change it, approve it as is"),
    (REWORK, "no need to refine it"),
    (REWORK, "hmm, interesting"),
    (PULL_REQUEST, "thanks"),
    (PULL_REQUEST, "no need to open a PR"),
    (SCHEDULE, "thanks"),
    (SCHEDULE, "fix the bug in a file"),
    (PAUSE, "thanks"),
    (PAUSE, "don't pause it"),
    (RESUME, "thanks"),
    (CANCEL_SCHEDULE, "thanks"),
    (CANCEL_SCHEDULE, "do not cancel the nightly run"),
    (REMEMBER, "thanks"),
    (REMEMBER, "what do you know about pnpm?"),
    (FORGET, "thanks"),
    (FORGET, "please don't forget it"),
    (CREATE_WORKSPACE, "thanks"),
    (CANCEL_TASK, "thanks"),
    (CANCEL_TASK, "don't stop it"),
    (CANCEL_TASK, "how is it going?"),
]


@pytest.mark.parametrize(("decision", "said"), ASKING, ids=[f"{d.verb}: {s}" for d, s in ASKING])
def test_words_that_ask_for_the_decision(decision: Decision, said: str) -> None:
    assert words_ask_for(said, decision)


@pytest.mark.parametrize(("decision", "said"), NOT_ASKING, ids=[f"{d.verb}: {s}" for d, s in NOT_ASKING])
def test_words_that_do_not_ask_for_the_decision(decision: Decision, said: str) -> None:
    assert not words_ask_for(said, decision)


def test_no_words_decide_nothing() -> None:
    """A turn with no words of the user's (a forwarded message, a request from GitHub) decides none of them."""
    everything = [MERGE, DISCARD, APPROVE, REJECT, REWORK, PULL_REQUEST, SCHEDULE, PAUSE, RESUME, CANCEL_SCHEDULE]
    assert not any(words_ask_for("", d) for d in [*everything, REMEMBER, FORGET, CREATE_WORKSPACE, CANCEL_TASK])


NAMING = [
    ("approve 2", True),
    ("yes, #2", True),
    ("go ahead with proposal 2", True),
    ("number 2 please", True),
    ("go ahead, 2 small tweaks are fine", False),  # a number that says something else
    ("approve 12", False),
    ("use v2 of the plan", False),
    ("approve it", False),
]


@pytest.mark.parametrize(("said", "names"), NAMING)
def test_words_that_name_the_item_by_its_number(said: str, names: bool) -> None:
    """A reply to another proposal's message, or a bare agreement among several, decides a proposal only when the
    words name it."""
    assert names_item(said, ("proposal", 2), APPROVE) is names


def test_the_item_a_decision_is_on_is_read_from_its_subject() -> None:
    assert item_of("**proposal #3**") == ("proposal", 3)
    assert item_of("**task #17**") == ("task", 17)
    assert item_of("**schedule #2**") is None  # no reply points at a schedule: only the words decide
    assert item_of("a workspace named planted") is None
