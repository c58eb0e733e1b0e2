"""Streamed answers: the draft grows while Claude writes, every frame is valid Telegram HTML, the final answer
is a normal message; through the real PTB and SDK against the fakes (and the frame renderer on its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telegram_bot.app import stop_application
from telegram_bot.streaming import ChatDraft, draft_html
from tests.conftest import USER_ID, BotHarness, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_html import parse_telegram_html, plain_length
from tests.fakes.telegram_server import FakeTelegram

GROUP_ID = -100555
ANSWER = (
    "Here is the fix for `add` in calc.py: it returned a - b & never a + b. Compare <old> and <new>:\n\n"
    "```python\ndef add(a, b):\n    return a + b  # <fixed> & tested\n```\n\n"
    "See [the docs](https://docs.python.org/3/?a=1&b=2) and **run** the tests."
)


@pytest.fixture
async def fast_bot(
    request: pytest.FixtureRequest,
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
    workspace_root: Path,
) -> AsyncIterator[BotHarness]:
    marker = request.node.get_closest_marker("settings")
    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        **{
            "stream_draft_interval_seconds": 0.05,
            "stream_edit_interval_seconds": 0.2,
            "stream_group_edit_interval_seconds": 1.0,
            **(marker.kwargs if marker else {}),
        },
    )
    harness = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        yield harness
    finally:
        await stop_application(harness.app)


def streamed(text: str, tg: FakeTelegram, seen: dict[str, bool], chat_id: int = USER_ID, **extra: object) -> dict:
    """A reply whose last word is only generated once the chat already shows its first words."""
    first = text.split()[0]

    def chat_shows_first_words() -> None:
        def shown() -> bool:
            drafts = any(first in d.text for d in tg.drafts if d.chat_id == chat_id)
            previews = any(first in (m.text or "") for m in tg.messages(chat_id))
            return drafts or previews

        try:
            tg.wait_for(shown, timeout=10)
            seen["before_last_token"] = True
        except TimeoutError:
            seen["before_last_token"] = False

    return {**claude_says.text(text), "token_delay": 0.005, "before_last_token": chat_shows_first_words, **extra}


async def test_first_words_are_in_the_chat_before_the_last_token_is_generated(fast_bot: BotHarness) -> None:
    seen: dict[str, bool] = {}
    fast_bot.claude.script(streamed(ANSWER, fast_bot.tg, seen))
    fast_bot.say("what was wrong with add?")
    [reply] = await fast_bot.replies(1)
    assert seen == {"before_last_token": True}
    request = fast_bot.claude.requests[0]
    assert request.body["stream"] is True
    first_draft = next(d for d in fast_bot.tg.drafts if d.text)
    assert first_draft.at < request.last_token_at  # the order of events, not a speed
    assert {d.draft_id for d in fast_bot.tg.drafts} == {1}  # the user's message id: one animated draft
    assert parse_telegram_html(reply.html).startswith("Here is the fix for add in calc.py")
    assert "<pre>" in reply.html or "<pre><code" in reply.html
    assert fast_bot.tg.refused == []
    assert len(fast_bot.tg.messages(USER_ID)) == 1, "drafts are not messages; the answer is one normal message"
    stored = await fast_bot.runtime.store.all_messages(USER_ID)
    assert stored[-1].content == ANSWER


async def test_a_tool_call_after_some_text_shows_what_is_being_done(fast_bot: BotHarness) -> None:
    seen: dict[str, bool] = {}
    fast_bot.claude.script(
        {
            **claude_says.tool_use(
                "read_file", {"workspace": "calc", "path": "calc.py"}, text="Let me look at calc.py."
            ),
            "token_delay": 0.005,
        },
        streamed("add() subtracts: it returns a - b.", fast_bot.tg, seen),
    )
    fast_bot.say("what does add do?")
    [reply] = await fast_bot.replies(1)
    assert reply.text == "add() subtracts: it returns a - b."
    texts = [d.text for d in fast_bot.tg.drafts]
    working = next(i for i, t in enumerate(texts) if "reading calc.py…" in t)
    assert texts[0].startswith("Let") and "Let me look at calc.py." in texts[working]
    assert any("add() subtracts" in t and "Let me look" in t for t in texts[working:]), texts
    tool_result = fast_bot.claude.requests[1].body["messages"][-1]["content"][0]
    assert "return a - b" in str(tool_result["content"])
    assert fast_bot.tg.refused == []


async def test_the_frame_with_a_tools_line_shows_the_text_before_it_whole(fast_bot: BotHarness) -> None:
    """While text streams its last word may still be arriving (not shown); once a tool call has ended the text, the
    frame that shows the tool's line shows that last word too, rather than "Let me look at" over "reading calc.py"."""
    draft = ChatDraft(fast_bot.app.bot, fast_bot.runtime.secrets, USER_ID, private=True, draft_id=8)
    try:
        await draft.text("Let me look at calc.py.")
        assert draft.frame_for("") == "Let me look at"
        await draft.activity("reading calc.py")
        assert draft.frame_for(draft.status) == "Let me look at calc.py.\n\n<i>reading calc.py…</i>"
    finally:
        await draft.stop()


async def test_refused_drafts_fall_back_to_edits_without_losing_a_word(fast_bot: BotHarness) -> None:
    fast_bot.tg.fail_next("sendMessageDraft", 400, description="Bad Request: method not available", times=1000)
    words = " ".join(f"word{i}" for i in range(120))
    seen: dict[str, bool] = {}
    fast_bot.claude.script(streamed(words, fast_bot.tg, seen, token_delay=0.01))
    fast_bot.say("count to 120")

    # the preview's last frame may already be the whole answer: wait for it to be gone and the answer sent
    def answered() -> bool:
        sent = fast_bot.tg.messages(USER_ID)
        return bool(sent) and sent[0].deleted and [m.text for m in sent if not m.deleted] == [words]

    await fast_bot.tg.await_for(answered)
    assert seen == {"before_last_token": True}
    preview = fast_bot.tg.messages(USER_ID)[0]
    frames = [v.text for v in preview.edits]
    assert len(frames) >= 2 and preview.deleted, "a preview message edited as the answer grew, removed at the end"
    assert all(words.startswith(f) for f in frames), "every frame is a prefix of the answer: no word lost"
    assert [r.method for r in fast_bot.tg.refused] == ["sendMessageDraft"]
    final = [m for m in fast_bot.tg.messages(USER_ID) if not m.deleted]
    assert [m.text for m in final] == [words]


async def test_in_a_group_one_message_is_edited_then_the_answer_is_sent(fast_bot: BotHarness) -> None:
    seen: dict[str, bool] = {}
    fast_bot.claude.script(streamed(ANSWER, fast_bot.tg, seen, chat_id=GROUP_ID))
    fast_bot.tg.send_text(USER_ID, "@test_bot what was wrong with add?", chat_id=GROUP_ID)
    await fast_bot.tg.await_for(lambda: [m.deleted for m in fast_bot.tg.messages(GROUP_ID)] == [True, False])
    assert seen == {"before_last_token": True}
    assert fast_bot.tg.drafts == [] and fast_bot.tg.refused == []
    preview, answer = fast_bot.tg.messages(GROUP_ID)
    assert preview.deleted and not answer.deleted
    assert parse_telegram_html(answer.html).startswith("Here is the fix")


# the whole answer comes in one burst, so it completes within the first-frame time even on a loaded machine
@pytest.mark.settings(stream_first_frame_seconds=30.0)
async def test_an_answer_that_arrives_whole_is_sent_without_a_draft_before_it(fast_bot: BotHarness) -> None:
    fast_bot.claude.script(claude_says.text(ANSWER))  # the whole answer at once, well within the first-frame time
    fast_bot.say("what was wrong with add?")
    [reply] = await fast_bot.replies(1)
    assert parse_telegram_html(reply.html).startswith("Here is the fix for add in calc.py")
    assert fast_bot.tg.drafts == [], "no sendMessageDraft right before the final message"
    assert fast_bot.tg.refused == []


# the whole answer comes in one burst, so it completes within the first-frame time even on a loaded machine
@pytest.mark.settings(stream_first_frame_seconds=30.0)
async def test_in_a_group_an_answer_that_arrives_whole_has_no_preview_message(fast_bot: BotHarness) -> None:
    fast_bot.claude.script(claude_says.text(ANSWER))
    fast_bot.tg.send_text(USER_ID, "@test_bot what was wrong with add?", chat_id=GROUP_ID)
    [answer] = await fast_bot.tg.wait_for_message(GROUP_ID, count=1)
    assert parse_telegram_html(answer.html).startswith("Here is the fix")
    assert [m.deleted for m in fast_bot.tg.messages(GROUP_ID)] == [False], "one message: the answer, no preview"
    assert fast_bot.tg.drafts == [] and fast_bot.tg.refused == []


COULD_NOT_REACH = "I couldn't reach Claude (network problem); try again in a minute."


async def test_an_answer_cut_before_its_end_is_not_sent_nor_kept_as_the_answer(fast_bot: BotHarness) -> None:
    """The connection ends cleanly after a few words (a proxy's cut, a load balancer's timeout): no `message_delta`,
    no `message_stop`. The half answer is neither delivered nor stored as the answer; the user reads that Claude could
    not be reached, and the message is kept for the next turn, as in an outage."""
    fast_bot.claude.script(
        {**claude_says.text("Delete the whole branch, then do not run anything else."), "cut_after": 4}
    )
    fast_bot.say("how do I clean up?")
    [reply] = await fast_bot.replies(1)
    assert reply.text == COULD_NOT_REACH
    assert [m.content for m in await fast_bot.runtime.store.all_messages(USER_ID)] == ["how do I clean up?"]
    assert fast_bot.claude.calls == 1, "a request whose answer was read in part is not sent again by itself"


async def test_a_garbled_event_in_a_group_leaves_no_half_answer_preview(fast_bot: BotHarness) -> None:
    """One malformed event mid-answer in a group, once the preview message shows the first words: the preview does not
    stay in the chat as if it were the answer; the user reads that Claude could not be reached."""
    seen: dict[str, bool] = {}
    words = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda GARBLE mu nu xi omicron pi"
    broken = streamed(words, fast_bot.tg, seen, chat_id=GROUP_ID, token_delay=0.05, garbled_after=11)
    broken["before_break"] = broken.pop("before_last_token")  # the preview shows before the broken event is sent
    fast_bot.claude.script(broken)
    fast_bot.tg.send_text(USER_ID, "@test_bot what comes after lambda?", chat_id=GROUP_ID)
    await fast_bot.tg.await_for(lambda: [m.deleted for m in fast_bot.tg.messages(GROUP_ID)] == [True, False])
    assert seen == {"before_last_token": True}
    preview, reply = fast_bot.tg.messages(GROUP_ID)
    assert "Alpha" in (preview.text or "") and preview.deleted
    assert reply.text == COULD_NOT_REACH


async def test_a_turn_that_fails_after_its_preview_showed_deletes_the_preview(
    fast_bot: BotHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn that raises (a bug of ours) once its preview is in the group: the preview goes, as after an answer, and
    the apology is the only word of it left."""
    orchestrator = fast_bot.runtime.orchestrator
    answer = orchestrator.handle

    async def failing(*args: Any, **kwargs: Any) -> Any:
        await answer(*args, **kwargs)
        raise RuntimeError("a bug of ours, after the answer was written")

    monkeypatch.setattr(orchestrator, "handle", failing)
    seen: dict[str, bool] = {}
    fast_bot.claude.script(streamed(ANSWER, fast_bot.tg, seen, chat_id=GROUP_ID))
    fast_bot.tg.send_text(USER_ID, "@test_bot what was wrong with add?", chat_id=GROUP_ID)
    await fast_bot.tg.await_for(lambda: [m.deleted for m in fast_bot.tg.messages(GROUP_ID)] == [True, False])
    assert seen == {"before_last_token": True}
    preview, apology = fast_bot.tg.messages(GROUP_ID)
    assert "Here is the fix" in (preview.text or "") and preview.deleted
    assert "something went wrong" in (apology.text or "")


# ---- every frame is valid ---------------------------------------------------------------------------

PIECES = st.sampled_from(
    [
        "word ",
        "**bold** ",
        "**half",
        "`code` ",
        "`half",
        "```python\n",
        "```\n",
        "x < y ",
        "a & b ",
        "&amp; ",
        "<b>not a tag</b> ",
        "[link](https://example.com/?a=1&b=2) ",
        "[half link](http://exa",
        "\n\n",
        "\n- item\n",
        "# Title\n",
        "> quote\n",
        "_em_ ",
        "~~gone~~ ",
        "|a|b|\n|-|-|\n|1|2|\n",
        "émoji 🎉 ",
        "<",
        "&",
        "]",
        ")",
        "*",
    ]
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, min_size=1, max_size=40), st.sampled_from(["", "reading calc.py", "running: a < b && c"]))
def test_every_frame_of_a_streamed_answer_is_accepted_by_telegram(pieces: list[str], status: str) -> None:
    answer = "".join(pieces)
    for cut in range(1, len(answer) + 1):
        frame = draft_html(answer[:cut], status)
        plain = parse_telegram_html(frame)  # raises like Telegram's "can't parse entities"
        assert plain_length(plain) <= 4096


def test_a_long_answer_shows_its_newest_part_within_the_limit() -> None:
    answer = "```python\n" + "\n".join(f"line_{i} = {i} < {i + 1} & True" for i in range(600))
    frame = draft_html(answer, "writing")
    plain = parse_telegram_html(frame)
    assert plain_length(plain) <= 4096 and "line_599" in plain and plain.startswith("…")


async def test_the_first_frame_goes_out_with_the_first_words_without_waiting_for_the_draft_interval(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> None:
    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        stream_first_frame_seconds=0.05,
        stream_draft_interval_seconds=30.0,  # a first frame that waited for an interval would never come in time
    )
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        seen: dict[str, bool] = {}
        # the model writes "Hello", " big", then waits (up to 10 s) until the chat shows "Hello" before writing the
        # rest; a frame shows a word once the next has begun (a secret still arriving is never shown in part)
        bot.claude.script(streamed("Hello big world", bot.tg, seen))
        bot.say("hi")
        [reply] = await bot.replies(1)
        assert seen == {"before_last_token": True}, "the first words showed while the model was still writing"
        assert [d.text for d in bot.tg.drafts if d.text][0] == "Hello"
        assert reply.text == "Hello big world"
    finally:
        await stop_application(bot.app)


VALUE = "p4ss&w0rd<x>"  # an added value made of what HTML escapes
KEY = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape


async def test_frames_are_drawn_from_masked_text_and_never_show_a_secret_in_part(fast_bot: BotHarness) -> None:
    """A frame is masked before it becomes HTML (escaped, `p4ss&amp;w0rd` is a string the filter never finds), and
    the word still being written is held back until the next one begins: a token whose first characters have come
    and whose rest has not is not shown at all."""
    fast_bot.runtime.secrets.add([VALUE])
    seen: dict[str, bool] = {}
    fast_bot.claude.script(streamed(f"Saved {VALUE} and {KEY} for you, all done now.", fast_bot.tg, seen))
    fast_bot.say("save them")
    [reply] = await fast_bot.replies(1)
    frames = [d.text for d in fast_bot.tg.drafts if d.text]
    assert frames and seen == {"before_last_token": True}
    for shown in [*frames, reply.text]:
        assert "p4ss" not in shown and "A1b2C3d4" not in shown, shown
    assert reply.text == "Saved «masked» and «masked» for you, all done now."

    draft = ChatDraft(fast_bot.app.bot, fast_bot.runtime.secrets, USER_ID, private=True, draft_id=7)
    try:
        await draft.text(f"the key is {KEY[:14]}")  # its first characters; the rest has not come yet
        assert draft.frame_for("") == "the key is"
        await draft.text(f"{KEY[14:]} and")
        shown = draft.frame_for("running: export TOKEN=" + KEY)
        assert shown == "the key is «masked»\n\n<i>running: export TOKEN=«masked»…</i>", shown
    finally:
        await draft.stop()


async def test_in_a_topic_the_preview_is_sent_to_the_topic(fast_bot: BotHarness) -> None:
    """In a forum topic the growing answer names its topic itself, not only through the message it replies to: a
    reply whose message is gone (or the plain-text retry after an entity error) would land in the general topic."""
    seen: dict[str, bool] = {}
    fast_bot.tg.make_forum(GROUP_ID)
    topic = fast_bot.tg.create_topic(GROUP_ID, "calc", USER_ID)
    fast_bot.claude.script(streamed(ANSWER, fast_bot.tg, seen, chat_id=GROUP_ID))
    fast_bot.tg.send_text(USER_ID, "@test_bot what was wrong with add?", chat_id=GROUP_ID, thread_id=topic)
    await fast_bot.tg.await_for(
        lambda: [m.deleted for m in fast_bot.tg.messages_in_topic(GROUP_ID, topic)] == [True, False]
    )
    preview, answer = fast_bot.tg.calls("sendMessage")
    assert preview.params.get("message_thread_id") == topic, preview.params
    assert seen == {"before_last_token": True} and not fast_bot.tg.messages_in_topic(GROUP_ID, None)
