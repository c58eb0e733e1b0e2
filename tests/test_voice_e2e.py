"""Voice end to end: a note sent to the fake Telegram is fetched, decoded, transcribed, echoed and routed as voice."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import threading
from pathlib import Path

import pytest

from agents.core.models import InputMethod, Proposal, ProposalStatus
from agents.core.protocols import ModelState
from agents.inputs.speed_log import read_speeds
from agents.inputs.voice import (
    AudioError,
    FasterWhisperTranscriber,
    OpenAIWhisperTranscriber,
    ResidentTranscriber,
    SpeechProcess,
    make_transcriber,
    speed_log_path,
)
from tests.conftest import USER_ID, BotHarness, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.fakes.whisper_checkpoint import FakeTranscriber, make_ogg_opus, speech, tone_mix
from tests.scripted import RoleScript
from tests.support.attachments import answer_or_apology

pytestmark = pytest.mark.slow
# a shared library each engine's model runs on: mapped in the speech process once its model is loaded
MODEL_LIBRARY = {"openai-whisper": "libtorch", "faster-whisper": "ctranslate2"}


@functools.cache
def faster_whisper_missing() -> str | None:
    """Why faster-whisper cannot be used here, or None. Asked when the test runs (not in a skipif mark, which is
    evaluated at collection and would make every xdist worker import it)."""
    try:
        import faster_whisper  # noqa: F401
    except Exception as exc:  # an optional extra: absent where it does not install
        return f"faster-whisper is not importable ({type(exc).__name__}: {exc})"
    return None


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(OpenAIWhisperTranscriber, id="openai-whisper"),
        pytest.param(FasterWhisperTranscriber, id="faster-whisper"),
    ],
)
async def test_voice_note_through_the_real_whisper_pipeline(
    fake_telegram,
    fake_anthropic,
    tmp_path,
    workspace_root,
    tiny_checkpoint,
    engine: type[ResidentTranscriber],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    from telegram_bot.app import stop_application

    if engine is FasterWhisperTranscriber and (why := faster_whisper_missing()) is not None:
        pytest.skip(why)
    # faster-whisper is given the checkpoint already converted (a CTranslate2 folder, used as is): converting in the
    # speech process would cost it torch's import; the conversion is tested in test_voice.py, in the same engine class
    weights = request.getfixturevalue("tiny_ct2_folder") if engine is FasterWhisperTranscriber else tiny_checkpoint
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)  # the tests' own setting: the bot must set it by itself
    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        whisper_model=str(weights),
        whisper_language="en",
        voice_engine=engine.engine,
    )
    transcriber = make_transcriber(settings)  # the bot's: the engine in a speech process of its own
    assert isinstance(transcriber, SpeechProcess) and transcriber.config["engine"] == engine.engine
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=transcriber)
    try:
        model = RoleScript()
        bot.claude.handler = model
        model.add("orchestrator", claude_says.text("Got your voice note."), claude_says.text("And your text."))
        samples = speech("add logging to the group therapy project")
        note = make_ogg_opus(samples if samples is not None else tone_mix(3.0))
        bot.tg.send_voice(USER_ID, note, duration=3)
        echo = await bot.tg.await_for(
            lambda: next((m for m in bot.tg.messages(USER_ID) if "I heard" in (m.text or "")), None), timeout=300
        )
        answer = await bot.tg.await_for(
            lambda: next((m for m in bot.tg.messages(USER_ID) if m.text == "Got your voice note."), None), timeout=60
        )
        assert bot.tg.calls("getFile"), "the note was fetched with getFile"
        speech_pid = transcriber.pid
        assert speech_pid is not None and speech_pid != os.getpid(), "the model runs in a process of its own"
        assert MODEL_LIBRARY[engine.engine] in Path(f"/proc/{speech_pid}/maps").read_text()
        environment = Path(f"/proc/{speech_pid}/environ").read_bytes().split(b"\0")
        assert b"OMP_WAIT_POLICY=PASSIVE" in environment, "its idle OpenMP threads sleep instead of spinning"
        assert echo.reply_to_message_id is not None and answer is not None
        content = model.requests["orchestrator"][0]["messages"][-1]["content"]
        heard = echo.text.split("I heard:", 1)[1].strip()
        assert heard, "the test weights always decode to text"
        assert content[0]["text"].strip() == heard, (
            "the transcript (garbage from random weights) reaches the orchestrator"
        )
        assert "input_method: voice" in content[1]["text"]
        stored = await bot.runtime.store.all_messages(USER_ID)
        assert stored[0].input_method is InputMethod.VOICE

        bot.tg.send_voice(USER_ID, b"OggS\x00\x02garbage-not-really-opus" * 10, duration=2)
        refusal = await bot.tg.await_for(
            lambda: next(
                (
                    m
                    for m in bot.tg.messages(USER_ID)
                    if m.text and m.text not in ("Got your voice note.",) and "I heard" not in m.text
                ),
                None,
            ),
            timeout=60,
        )
        assert "Traceback" not in refusal.text and len(refusal.text) < 200
        bot.say("typed after the corrupt note")
        await bot.tg.await_for(lambda: any(m.text == "And your text." for m in bot.tg.messages(USER_ID)), timeout=30)

        bot.tg.send_command(USER_ID, "/status")
        status = await bot.tg.await_for(
            lambda: next((m for m in bot.tg.messages(USER_ID) if "Speech model" in (m.text or "")), None), timeout=30
        )
        assert f"on {engine.engine} (ready)" in status.text
        assert "last note: real-time factor" in status.text and f"(latest, {engine.engine})" in status.text
        kept = read_speeds(speed_log_path(settings))  # for `agentlab doctor`, another process
        assert [(s.engine, s.tokens) for s in kept] == [(engine.engine, 224)]  # decoded to the cap
    finally:
        await stop_application(bot.app)


async def test_the_speech_process_starts_with_the_first_note_ends_when_idle_and_is_started_again_after_a_kill(
    fake_telegram,
    fake_anthropic,
    tmp_path,
    workspace_root,
    tiny_checkpoint,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bot idles without the model: nothing runs before the first note; after VOICE_IDLE_MINUTES without notes
    the speech process ends (its memory returned); the next note starts it again and is transcribed. Then the
    kernel's OOM killer (here: SIGKILL) takes the speech process between notes: the next note starts a new one and is
    transcribed; the bot itself never noticed more than a log line. (One test: each start of a speech process costs
    CPU.) The process's life is the same whatever engine it runs: faster-whisper on the converted checkpoint where it
    is installed (a start costs about 1.3 s of CPU), else openai-whisper (about 3 s: torch's import); each engine's
    own start in a speech process is in test_voice_note_through_the_real_whisper_pipeline."""
    from telegram_bot.app import stop_application

    if faster_whisper_missing() is None:
        engine, weights = FasterWhisperTranscriber.engine, request.getfixturevalue("tiny_ct2_folder")
    else:
        engine, weights = OpenAIWhisperTranscriber.engine, tiny_checkpoint
    settings = make_settings(
        fake_telegram,
        fake_anthropic,
        tmp_path,
        workspace_root,
        whisper_model=str(weights),
        whisper_language="en",
        voice_engine=engine,
        voice_idle_minutes=0.02,  # 1.2 s
    )
    # the bot runs from a folder holding another project's `agents/` package: its speech process is still the bot's
    elsewhere = tmp_path / "elsewhere"
    planted = elsewhere / "agents" / "inputs"
    planted.mkdir(parents=True)
    for init in (elsewhere / "agents" / "__init__.py", planted / "__init__.py"):
        init.write_text("")
    ran = tmp_path / "the-planted-speech-server-ran"
    (planted / "speech_server.py").write_text(f"open({str(ran)!r}, 'w').close()\nraise SystemExit(3)\n")
    monkeypatch.chdir(elsewhere)
    transcriber = make_transcriber(settings, max_tokens_per_window=8)
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=transcriber)
    try:
        await bot.runtime.start_up_done()
        assert transcriber.state is ModelState.not_loaded and transcriber.pid is None, "no VOICE_PRELOAD: idle"
        model = RoleScript()
        bot.claude.handler = model
        model.add("orchestrator", claude_says.text("First."), claude_says.text("Second."), claude_says.text("Third."))
        note = make_ogg_opus(tone_mix(2.0))
        bot.tg.send_voice(USER_ID, note, duration=2)
        await bot.tg.await_for(lambda: any(m.text == "First." for m in bot.tg.messages(USER_ID)), timeout=300)
        first_pid = transcriber.pid
        assert first_pid is not None
        await bot.tg.await_for(lambda: transcriber.pid is None or None, timeout=120)
        assert not Path(f"/proc/{first_pid}").exists(), "the idle speech process ended and was reaped"
        assert transcriber.state is ModelState.not_loaded

        # from here on the process is kept until the bot stops (VOICE_IDLE_MINUTES=0), so only the kill ends it
        transcriber.idle_seconds = 0
        bot.tg.send_voice(USER_ID, note, duration=2)
        await bot.tg.await_for(lambda: any(m.text == "Second." for m in bot.tg.messages(USER_ID)), timeout=300)
        assert [m.text for m in bot.tg.messages(USER_ID)].count(
            "Loading the speech model… your note will be transcribed as soon as it's ready."
        ) == 2
        killed = transcriber.pid
        assert killed not in (None, first_pid)
        os.kill(killed, signal.SIGKILL)
        await bot.tg.await_for(lambda: not transcriber.running)
        bot.tg.send_voice(USER_ID, note, duration=2)
        await bot.tg.await_for(lambda: any(m.text == "Third." for m in bot.tg.messages(USER_ID)), timeout=300)
        assert transcriber.pid not in (None, killed)
    finally:
        await stop_application(bot.app)
    assert transcriber.pid is None or not Path(f"/proc/{transcriber.pid}").exists(), "stopping the bot ends it"
    assert not ran.exists(), "a speech process ran the working folder's agents/ package, not the bot's"


async def test_voice_preload_starts_the_speech_process_with_the_bot(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root, voice_preload=True)
    transcriber = FakeTranscriber()
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=transcriber)
    try:
        await bot.runtime.start_up_done()
        assert transcriber.state is ModelState.ready
    finally:
        await stop_application(bot.app)


async def test_without_preload_the_start_up_work_leaves_the_speech_model_unloaded(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    transcriber = FakeTranscriber()
    bot = await start_bot(
        make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root),
        fake_telegram,
        fake_anthropic,
        transcriber=transcriber,
    )
    try:
        await bot.runtime.start_up_done()
        assert transcriber.state is ModelState.not_loaded, "the bot idles without the speech model"
    finally:
        await stop_application(bot.app)


async def test_a_voice_note_is_transcribed_while_another_turn_is_in_flight(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    """The note is fetched and transcribed beside the chat's turn in flight, then answered in its place in order."""
    from telegram_bot.app import stop_application

    transcriber = FakeTranscriber("and this is the note")
    bot = await start_bot(
        make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root),
        fake_telegram,
        fake_anthropic,
        transcriber=transcriber,
    )
    go = threading.Event()
    try:
        model = RoleScript()
        bot.claude.handler = model
        model.add("orchestrator", _held_until(go, claude_says.text("Typed answer.")), claude_says.text("Voice answer."))
        bot.say("a long typed question")
        await bot.tg.await_for(lambda: len(model.requests["orchestrator"]) == 1)
        bot.tg.send_voice(USER_ID, b"ogg", duration=1)
        await bot.tg.await_for(lambda: transcriber.received or None, timeout=30)
        assert not any(m.text == "Typed answer." for m in bot.tg.messages(USER_ID)), "the typed turn is in flight"
        go.set()
        await bot.tg.await_for(lambda: any(m.text == "Voice answer." for m in bot.tg.messages(USER_ID)))
        texts = [m.text for m in bot.tg.messages(USER_ID)]
        assert texts.index("Typed answer.") < texts.index("Voice answer."), "answered in the chat's order"
    finally:
        go.set()
        await stop_application(bot.app)


def _held_until(go: threading.Event, reply: dict):
    """A scripted reply the fake model sends only once the test says so (the turn is in flight meanwhile)."""

    def answer(body: dict) -> dict:
        go.wait(30)
        return reply

    return answer


async def test_spoken_go_ahead_approves_the_pending_proposal(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=FakeTranscriber("go ahead"))
    try:
        await bot.runtime.store.add_proposal(
            Proposal(chat_id=USER_ID, workspace="group-therapy", request="logging", body="## Summary\nAdd logging.")
        )
        model = RoleScript()
        bot.claude.handler = model
        model.add("orchestrator", claude_says.tool_use("approve_proposal", {}), claude_says.text("Approved."))
        bot.tg.send_voice(USER_ID, b"fake-ogg", duration=1)
        await bot.tg.await_for(lambda: any(m.text == "Approved." for m in bot.tg.messages(USER_ID)))
        assert "I heard: go ahead" in bot.tg.messages(USER_ID)[0].text
        assert (await bot.runtime.store.get_proposal(1)).status is ProposalStatus.APPROVED
    finally:
        await stop_application(bot.app)


async def test_bad_audio_and_unloadable_model_get_one_sentence(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    fake = FakeTranscriber([AudioError("I couldn't hear anything in that voice note.")], load_error=None)
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=fake)
    try:
        bot.tg.send_voice(USER_ID, b"silence", duration=1)
        await bot.tg.await_for(lambda: any("couldn't hear" in (m.text or "") for m in bot.tg.messages(USER_ID)))
        bot.tg.send_document(USER_ID, b"\0" * (20 * 1024 * 1024 + 1), "talk.mp3", mime="audio/mpeg")
        await bot.tg.await_for(lambda: any("at most 20 MB" in (m.text or "") for m in bot.tg.messages(USER_ID)))
        assert len(fake.received) == 1, "the oversized file was never downloaded or transcribed"
        assert bot.claude.calls == 0
    finally:
        await stop_application(bot.app)

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path / "second", workspace_root)
    bot = await start_bot(
        settings,
        fake_telegram,
        fake_anthropic,
        transcriber=FakeTranscriber(load_error="The speech model 'base' could not be loaded: no network."),
    )
    try:
        before = len(bot.tg.messages(USER_ID))
        bot.tg.send_voice(USER_ID, b"anything", duration=1)
        reply = await bot.tg.await_for(lambda: bot.tg.messages(USER_ID)[before:] or None)
        assert "could not be loaded" in reply[0].text
    finally:
        await stop_application(bot.app)


class _StillLoading(FakeTranscriber):
    """The real model's first minutes: loading; the note waits for it, then is transcribed."""

    def __init__(self) -> None:
        super().__init__("status please")
        self.loaded = asyncio.Event()

    def start_loading(self) -> None:
        if self._state is ModelState.not_loaded:
            self._state = ModelState.loading

    async def wait_ready(self) -> None:
        await self.loaded.wait()
        self._state = ModelState.ready


async def test_first_note_while_the_model_loads_says_so_and_text_stays_responsive(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    transcriber = _StillLoading()
    transcriber.start_loading()
    bot = await start_bot(
        make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root),
        fake_telegram,
        fake_anthropic,
        transcriber=transcriber,
    )
    try:
        model = RoleScript()
        bot.claude.handler = model
        model.add("orchestrator", claude_says.text("Typed answer."), claude_says.text("Voice answer."))
        bot.tg.send_voice(USER_ID, b"ogg", duration=1, chat_id=USER_ID + 1)
        await bot.tg.await_for(
            lambda: any("Loading the speech model" in (m.text or "") for m in bot.tg.messages(USER_ID + 1))
        )
        bot.say("a typed question meanwhile")
        await bot.tg.await_for(lambda: any(m.text == "Typed answer." for m in bot.tg.messages(USER_ID)))
        transcriber.loaded.set()
        await bot.tg.await_for(lambda: any(m.text == "Voice answer." for m in bot.tg.messages(USER_ID + 1)))
    finally:
        await stop_application(bot.app)


async def test_a_stop_while_a_note_is_transcribed_is_quick_and_the_note_is_told_at_the_next_start(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    """A long note on CPU whisper takes a while: the stop (SIGTERM's steps: workers interrupted, the turns in
    `turns` cancelled, then PTB's stop) must not wait for its transcription. The note was on record from its
    arrival, so the next start says it was not answered."""
    from telegram_bot.app import stop_application

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)
    slow = FakeTranscriber("deploy the thing", delay=30.0)
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=slow)
    loop = asyncio.get_running_loop()
    try:
        bot.tg.send_voice(USER_ID, b"OggS" + b"\0" * 200, duration=3)
        await bot.tg.await_for(lambda: slow.received or None, timeout=30)
        assert bot.app.bot_data.turns, "a note being transcribed is one of the turns a stop cancels"
    finally:
        started = loop.time()
        bot.app.bot_data.stopping = True  # SIGTERM's steps (app._graceful_stop), then PTB's stop
        await bot.runtime.stop_workers()
        for turn in list(bot.app.bot_data.turns):
            turn.cancel()
        await stop_application(bot.app)
        took = loop.time() - started
    assert took < 10, f"the stop waited {took:.1f} s for the transcription"
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=FakeTranscriber("unused"))
    try:
        told = await bot.tg.await_for(
            lambda: next((m for m in bot.tg.messages(USER_ID) if "your voice note" in (m.text or "")), None)
        )
        assert "send it again" in told.text
    finally:
        await stop_application(bot.app)


async def test_a_5xx_on_fetching_a_note_is_tried_again(fake_telegram, fake_anthropic, tmp_path, workspace_root) -> None:
    """Telegram unwell for a moment (one 502 from getFile): the note is still fetched, transcribed and answered."""
    from telegram_bot.app import stop_application

    bot = await start_bot(
        make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root),
        fake_telegram,
        fake_anthropic,
        transcriber=FakeTranscriber("what is in calc"),
    )
    try:
        model = RoleScript()
        bot.claude.handler = model
        model.add("orchestrator", claude_says.text("Got it."))
        bot.tg.fail_next("getFile", error_code=502, description="Bad Gateway")
        bot.tg.send_voice(USER_ID, b"OggS" + b"\0" * 200, duration=2)
        await bot.tg.await_for(lambda: any(m.text == "Got it." for m in bot.tg.messages(USER_ID)), timeout=20)
        assert len(bot.tg.calls("getFile")) == 2
    finally:
        await stop_application(bot.app)


async def test_a_recording_that_cannot_be_heard_keeps_its_caption_and_none_is_fetched_past_the_limits(
    fake_telegram, fake_anthropic, tmp_path, workspace_root, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An audio file's caption is the user's own typed words: it reaches Claude, with a note, when the recording
    cannot be transcribed or is too big to fetch (it was dropped with the recording). A note Telegram says is longer
    than VOICE_MAX_SECONDS is refused before it is fetched; a file whose message states no size is fetched only up to
    the download limit (getFile's size, then the bytes: a local Bot API server serves files up to 2 GB)."""
    import tests.fakes.telegram_server as fake_server
    from telegram_bot.app import stop_application

    monkeypatch.setattr(fake_server, "MAX_DOWNLOAD_BYTES", 200 * 1024 * 1024)  # a local Bot API server
    caption = "summarise the meeting in this recording and file a task"
    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root, voice_max_seconds=60.0)
    fake = FakeTranscriber([AudioError("I couldn't hear anything in that voice note."), "never used"])
    bot = await start_bot(settings, fake_telegram, fake_anthropic, transcriber=fake)
    asked: list[str] = []

    def claude(body: dict) -> dict:
        asked.append(str(body["messages"][-1]["content"]))
        return claude_says.text("Answered.")

    bot.claude.handler = claude

    def audio(data: bytes, **extra: object) -> dict:
        fields = bot.tg.file_fields(data, "music", "mp3", "audio/mpeg")
        return {**fields, "duration": 5, "mime_type": "audio/mpeg", "file_name": "meeting.mp3", **extra}

    def said(part: str) -> bool:
        return any(part in (m.text or "") for m in bot.tg.messages(USER_ID))

    try:
        bot.tg.send_content(USER_ID, {"audio": audio(b"ID3" + b"\0" * 500), "caption": caption})
        await bot.tg.await_for(lambda: said("couldn't hear") and len(asked) == 1)
        assert caption in asked[0] and "could not be transcribed" in asked[0]

        big = audio(b"ID3" + b"\0" * 500, file_size=25 * 1024 * 1024)
        bot.tg.send_content(USER_ID, {"audio": big, "caption": "and this one"})
        await bot.tg.await_for(lambda: said("That file is 26 MB") and len(asked) == 2)
        assert "and this one" in asked[1]
        fetched = len(bot.tg.calls("getFile"))

        bot.tg.send_voice(USER_ID, b"OggS" + b"\0" * 300, duration=7200)
        await bot.tg.await_for(lambda: said("can only transcribe up to"))
        assert len(bot.tg.calls("getFile")) == fetched == 1, "a note stated as 2 hours long (limit 60 s) was fetched"

        unstated = bot.tg.file_fields(b"OggS" + b"\0" * (21 * 1024 * 1024), "voice", "oga", "audio/ogg")
        unstated.pop("file_size")
        bot.tg.send_content(USER_ID, {"voice": {**unstated, "duration": 5, "mime_type": "audio/ogg"}})
        await bot.tg.await_for(lambda: said("That file is 22 MB; I download at most"))
        assert len(fake.received) == 1, "only the first recording reached the speech model"
        assert len(asked) == 2
    finally:
        await stop_application(bot.app)


async def test_a_5xx_on_the_voice_echo_does_not_lose_the_voice_note(bot: BotHarness) -> None:
    """Telegram answers 502 once, to the "🎙 I heard: …" echo: the transcript must still reach Claude and be answered
    (the echo is a courtesy; losing the user's request over it is not)."""
    bot.tg.fail_next("sendMessage", error_code=502, when=lambda p: str(p.get("text", "")).startswith("🎙"))
    bot.claude.script(claude_says.text("Heard you."))
    bot.tg.send_voice(USER_ID, b"OggS-fake-voice-note", duration=2)
    said = await answer_or_apology(bot, "Heard you.")
    assert "Heard you." in said, f"the voice note never reached Claude after a 502 on its echo; the chat got: {said}"


async def test_a_voice_note_deleted_by_its_sender_while_transcribed_is_still_answered(bot: BotHarness) -> None:
    """The user sends a voice note and deletes it before the bot echoes it ("🎙 I heard: …" quotes it): Telegram
    refuses a quote of a deleted message (400 "message to be replied not found"). What the note said must still
    reach Claude and be answered, as a typed message deleted meanwhile is (its answer is sent without the reply)."""
    bot.claude.script(claude_says.text("Heard you."))
    sent = bot.tg.send_voice(USER_ID, b"OggS-fake-voice-note", duration=2)
    bot.tg.delete_user_message(USER_ID, sent["message"]["message_id"])  # before the bot's echo quotes it
    said = await answer_or_apology(bot, "Heard you.")
    assert "Heard you." in said, (
        f"a voice note deleted by its sender was never answered; the chat got: {said}; refused: {bot.tg.refused}"
    )
