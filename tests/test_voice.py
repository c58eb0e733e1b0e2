"""Voice notes: PyAV decoding and its user-facing errors, both resident speech engines, and FakeTranscriber.

Transcriber tests run for each engine (openai-whisper; faster-whisper, skipped with the reason where it is not
installed) on a seeded random-weight checkpoint through the real load path (no network, no ffmpeg; faster-whisper
converts it to a CTranslate2 folder first). Its text is garbage but the same on every run, so they assert
behaviour (states, types, bounds, threads) and sameness (run to run, engine to engine), not words.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agents.core.protocols import ModelState, SpeechToText, Transcript
from agents.inputs import audio, voice
from agents.inputs.voice import (
    DAMAGED_MESSAGE,
    EMPTY_MESSAGE,
    NO_AUDIO_MESSAGE,
    SAMPLE_RATE,
    SILENCE_MESSAGE,
    UNREADABLE_MESSAGE,
    UNSUPPORTED_MESSAGE,
    AudioError,
    ModelUnavailable,
    ResidentTranscriber,
    Transcriber,
    decode_audio,
    format_duration,
)
from tests.conftest import run_folder
from tests.fakes.whisper_checkpoint import (
    FakeTranscriber,
    build_tiny_checkpoint,
    make_m4a,
    make_mp3,
    make_ogg_opus,
    make_video_without_audio,
    make_wav,
    make_wav_with_unknown_codec,
    shared_checkpoint,
    silence,
    speech,
    tone,
    tone_mix,
)
from tests.support.settings import offline_settings

if TYPE_CHECKING:  # numpy and PyAV are imported by the tests that use them: every xdist worker collects this module
    import numpy as np

GENEROUS_SECONDS = 120.0  # an upper bound for "it finishes", not a speed target


def dominant_frequency(samples: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    import numpy as np

    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[int(np.argmax(spectrum))])


def error_of(data: bytes, max_seconds: float = 60.0) -> str:
    with pytest.raises(AudioError) as caught:
        decode_audio(data, max_seconds)
    return caught.value.user_message


# --------------------------------------------------------------------------------------------------------------
# decoding


@pytest.mark.parametrize(
    ("make", "rate"),
    [
        (make_ogg_opus, 16_000),
        (make_ogg_opus, 48_000),
        (make_wav, 16_000),
        (make_wav, 44_100),
        (make_mp3, 16_000),
        (make_mp3, 44_100),
        (make_m4a, 16_000),
    ],
    ids=["ogg-opus-16k", "ogg-opus-48k", "wav-16k", "wav-44k", "mp3-16k", "mp3-44k", "m4a-16k"],
)
def test_decodes_common_formats_to_16k_mono_float32(make, rate: int) -> None:
    import numpy as np

    data = make(tone(3.0, 440.0, rate=rate), rate)

    samples = decode_audio(data, max_seconds=60)

    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(samples.size / SAMPLE_RATE - 3.0) < 0.15  # codec padding only
    assert 0.2 < float(np.abs(samples).max()) < 0.45
    assert abs(dominant_frequency(samples) - 440.0) < 5  # resampled, not just relabelled


def test_stereo_is_mixed_down_to_mono() -> None:
    import numpy as np

    stereo = np.stack([tone(2.0, 440.0, rate=44_100), tone(2.0, 440.0, rate=44_100)])
    samples = decode_audio(make_wav(stereo, 44_100), max_seconds=60)
    assert samples.ndim == 1 and abs(samples.size - 2 * SAMPLE_RATE) < 10
    assert abs(dominant_frequency(samples) - 440.0) < 5


def test_decodes_espeak_speech_in_ogg_opus() -> None:
    spoken = speech("Please run the tests and tell me what fails.")
    if spoken is None:
        pytest.skip("espeak-ng is not installed")
    samples = decode_audio(make_ogg_opus(spoken, 48_000), max_seconds=60)
    assert abs(samples.size / SAMPLE_RATE - spoken.size / 48_000) < 0.1


def test_speech_fixture_without_espeak(monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.fakes.whisper_checkpoint as fixtures

    monkeypatch.setattr(fixtures.shutil, "which", lambda name: None)
    assert speech("hello") is None


def test_empty_input() -> None:
    assert error_of(b"") == EMPTY_MESSAGE


@pytest.mark.parametrize(
    "data",
    [random.Random(7).randbytes(4000), b"Hello, this is a text file renamed to note.ogg.\n" * 40, b"\x00" * 500],
    ids=["random-bytes", "text-file-renamed-ogg", "zeros"],
)
def test_data_that_is_not_audio(data: bytes) -> None:
    assert error_of(data) == UNREADABLE_MESSAGE


@pytest.mark.parametrize("cut", ["headers", "half", "last-byte"])
def test_truncated_ogg_is_reported_as_cut_off(cut: str) -> None:
    data = make_ogg_opus(tone(3.0))
    end = {"headers": 60, "half": len(data) // 2, "last-byte": len(data) - 1}[cut]
    assert error_of(data[:end]) == DAMAGED_MESSAGE


def test_container_without_audio_stream() -> None:
    assert error_of(make_video_without_audio()) == NO_AUDIO_MESSAGE


def test_codec_without_decoder() -> None:
    assert error_of(make_wav_with_unknown_codec()) == UNSUPPORTED_MESSAGE


def test_too_long_from_the_container_duration() -> None:
    message = error_of(make_ogg_opus(tone(5.0)), max_seconds=3.0)
    assert message == "That voice note is 5 seconds long, and I can only transcribe up to 3 seconds."


def test_slightly_over_the_limit_is_accepted() -> None:
    """Containers round (Opus pre-skip, AAC priming): a note at the limit must not be refused."""
    assert decode_audio(make_m4a(tone(3.0)), max_seconds=3.0).size > 0


def test_too_long_without_a_container_duration_stops_decoding_early(monkeypatch: pytest.MonkeyPatch) -> None:
    import av

    data = make_ogg_opus(tone(30.0))
    fed: list[int] = []
    real_resampler = av.AudioResampler

    class CountingResampler:
        def __init__(self, **kwargs: object) -> None:
            self._inner = real_resampler(**kwargs)

        def resample(self, frame: av.AudioFrame | None) -> list[av.AudioFrame]:
            if frame is not None:
                fed.append(frame.samples / frame.sample_rate)
            return self._inner.resample(frame)

    monkeypatch.setattr(audio, "_declared_seconds", lambda container, stream: None)
    monkeypatch.setattr(av, "AudioResampler", CountingResampler)

    assert error_of(data, max_seconds=2.0) == "That voice note is longer than 2 seconds, the most I can transcribe."
    assert 2.0 < sum(fed) < 5.0  # stopped just past the limit, not after 30 s


@pytest.mark.parametrize("make", [make_ogg_opus, make_wav], ids=["ogg-opus", "wav"])
def test_silence(make) -> None:
    assert error_of(make(silence(2.0))) == SILENCE_MESSAGE


def test_quiet_but_audible_speech_is_not_silence() -> None:
    import numpy as np

    quiet = np.concatenate([silence(1.0), tone(0.5, 300.0, amplitude=0.02), silence(1.0)])
    assert decode_audio(make_wav(quiet), max_seconds=60).size == 2.5 * SAMPLE_RATE


def test_error_messages_are_single_sentences() -> None:
    for message in (
        EMPTY_MESSAGE,
        UNREADABLE_MESSAGE,
        DAMAGED_MESSAGE,
        NO_AUDIO_MESSAGE,
        UNSUPPORTED_MESSAGE,
        SILENCE_MESSAGE,
    ):
        body = message.rstrip(".")
        assert message.endswith(".") and "." not in body and "\n" not in message, message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "0 seconds"),
        (1, "1 second"),
        (45, "45 seconds"),
        (60, "1 minute"),
        (600, "10 minutes"),
        (725, "12:05 minutes"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


# --------------------------------------------------------------------------------------------------------------
# Transcriber (real engine code, seeded random tiny weights), for each engine


@functools.cache
def faster_whisper_missing() -> str | None:
    """Why the faster-whisper engine cannot be tested here, or None when it can."""
    try:
        import faster_whisper  # noqa: F401
    except Exception as exc:  # an optional extra: absent where it does not install
        return f"faster-whisper is not importable ({type(exc).__name__}: {exc})"
    return None


def require_faster_whisper() -> None:
    """Skip the running test where faster-whisper is not importable. Asked when a test runs, not in a skipif mark:
    a mark is evaluated at collection, and importing faster-whisper (CTranslate2, tokenizers, huggingface_hub) there
    would cost every xdist worker, most of which never run a faster-whisper test."""
    if (why := faster_whisper_missing()) is not None:
        pytest.skip(why)


ENGINES = [
    pytest.param(voice.OpenAIWhisperTranscriber, id="openai-whisper"),
    pytest.param(voice.FasterWhisperTranscriber, id="faster-whisper"),
]


@pytest.fixture(scope="session")
def convert_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the faster-whisper engine converts checkpoints (shared: each checkpoint is converted once)."""
    return tmp_path_factory.mktemp("ct2")


@pytest.fixture(scope="session")
def note_3s() -> bytes:
    """Three seconds of espeak-ng speech when it is installed, else a speech-like tone mix."""
    import numpy as np

    spoken = speech("Please run the tests and tell me what fails.")
    samples = tone_mix(3.0) if spoken is None else np.pad(spoken, (0, max(0, 3 * SAMPLE_RATE - spoken.size)))
    return make_ogg_opus(samples[: 3 * SAMPLE_RATE])


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> type[ResidentTranscriber]:
    if request.param is voice.FasterWhisperTranscriber:
        require_faster_whisper()
    return request.param


@pytest.fixture
def transcribers(engine: type[ResidentTranscriber], convert_root: Path):
    made: list[ResidentTranscriber] = []

    def make(model: str | Path, language: str | None = None, **kwargs: object) -> ResidentTranscriber:
        kwargs.setdefault("max_tokens_per_window", 24)
        if engine is voice.FasterWhisperTranscriber:
            kwargs.setdefault("convert_root", convert_root)
        transcriber = engine(str(model), language, 60.0, "cpu", **kwargs)
        made.append(transcriber)
        return transcriber

    yield make
    for transcriber in made:
        transcriber.close()


def gate_model_loading(monkeypatch: pytest.MonkeyPatch, engine: type[ResidentTranscriber]) -> threading.Event:
    """Make the engine's model load (on its worker thread) wait until the returned event is set."""
    release = threading.Event()
    real_load = engine._load_model

    def gated(self: ResidentTranscriber) -> object:
        assert release.wait(GENEROUS_SECONDS)
        return real_load(self)

    monkeypatch.setattr(engine, "_load_model", gated)
    return release


@pytest.mark.slow
async def test_loads_in_background_then_transcribes(
    tiny_checkpoint: Path, note_3s: bytes, transcribers, engine, monkeypatch
) -> None:
    release = gate_model_loading(monkeypatch, engine)
    transcriber = transcribers(tiny_checkpoint)
    assert transcriber.state is ModelState.not_loaded

    transcriber.start_loading()
    assert transcriber.state is ModelState.loading  # returned at once, the load waits on the gate
    release.set()
    await asyncio.wait_for(transcriber.wait_ready(), GENEROUS_SECONDS)
    assert transcriber.state is ModelState.ready and transcriber.load_error is None

    transcript = await asyncio.wait_for(transcriber.transcribe(note_3s), GENEROUS_SECONDS)

    assert isinstance(transcript, Transcript)
    assert isinstance(transcript.text, str) and transcript.text  # the test weights decode to the cap: never empty
    assert isinstance(transcript.language, str) and transcript.language  # detected (garbage, but a code)
    assert abs(transcript.audio_seconds - 3.0) < 0.1
    assert transcript.decode_seconds >= 0 and transcript.transcribe_seconds > 0
    assert [s.engine for s in transcriber.recent] == [engine.engine]  # the speed of the note is kept
    assert transcriber.recent[0].tokens == 24  # decoded to the cap, exactly, in either engine


@pytest.mark.slow
async def test_transcribe_loads_the_model_on_demand_and_a_closed_one_refuses_work(
    tiny_checkpoint: Path, note_3s: bytes, transcribers
) -> None:
    """(One test: a loaded model is what a closed transcriber must refuse to use, and loading it is the cost.)"""
    transcriber = transcribers(tiny_checkpoint, language="English")
    transcript = await asyncio.wait_for(transcriber.transcribe(note_3s), GENEROUS_SECONDS)
    assert transcriber.state is ModelState.ready
    assert transcript.language == "en"  # a language name is mapped to whisper's code and used as given

    transcriber.close()
    with pytest.raises(ModelUnavailable) as caught:
        await transcriber.transcribe(note_3s)
    assert caught.value.user_message == "The speech model has been shut down."


@pytest.mark.slow
async def test_decoding_is_bounded_the_same_way_every_time(tiny_checkpoint: Path, monkeypatch) -> None:
    import whisper

    seen: list[dict] = []
    tokens: list[int] = []
    real_transcribe = whisper.transcribe

    def spy(model, audio, **options):
        seen.append(options)
        result = real_transcribe(model, audio, **options)
        tokens.extend(len(segment["tokens"]) for segment in result["segments"])
        return result

    monkeypatch.setattr(whisper, "transcribe", spy)
    transcriber = voice.OpenAIWhisperTranscriber(str(tiny_checkpoint), "de", 60.0, "cpu", max_tokens_per_window=16)
    try:
        await asyncio.wait_for(transcriber.transcribe(make_ogg_opus(tone_mix(31.0))), GENEROUS_SECONDS)
    finally:
        transcriber.close()

    assert seen == [voice.transcribe_options("de", 16, fp16=False)]
    assert seen[0]["temperature"] == 0.0 and seen[0]["condition_on_previous_text"] is False
    assert tokens == [16, 16]  # two 30 s windows, each decoded once to the cap


@pytest.mark.slow
async def test_faster_decoding_is_bounded(tiny_checkpoint: Path, convert_root: Path, monkeypatch) -> None:
    """The same bounds as openai-whisper's: greedy, one temperature, 16 tokens per window (CTranslate2 halves)."""
    require_faster_whisper()
    import faster_whisper

    from agents.inputs import voice_faster

    seen: list[dict] = []
    tokens: list[int] = []
    real_transcribe = faster_whisper.WhisperModel.transcribe

    def spy(self, audio, **options):
        seen.append(options)
        segments, info = real_transcribe(self, audio, **options)
        segments = list(segments)
        tokens.extend(len(segment.tokens) for segment in segments)
        return iter(segments), info

    monkeypatch.setattr(faster_whisper.WhisperModel, "transcribe", spy)
    transcriber = voice.FasterWhisperTranscriber(
        str(tiny_checkpoint), "de", 60.0, "cpu", max_tokens_per_window=16, convert_root=convert_root
    )
    try:
        await asyncio.wait_for(transcriber.transcribe(make_ogg_opus(tone_mix(31.0))), GENEROUS_SECONDS)
    finally:
        transcriber.close()
    assert seen == [voice_faster.transcribe_options("de", 16)]
    assert seen[0]["beam_size"] == 1 and seen[0]["temperature"] == 0.0 and not seen[0]["vad_filter"]
    assert tokens == [16, 16]  # two 30 s windows, each decoded once to the cap


@pytest.mark.slow
async def test_event_loop_keeps_running_while_transcribing(
    tiny_checkpoint: Path, note_3s: bytes, transcribers, engine, monkeypatch
) -> None:
    """The transcription runs on the worker thread; the loop keeps ticking while that thread is busy in it."""
    ticks = 0
    busy_threads: list[threading.Thread] = []
    ticks_while_busy: list[int] = []
    real_run = engine._run

    def busy_run(self, model, samples):
        busy_threads.append(threading.current_thread())
        start_ticks = ticks
        result = real_run(self, model, samples)
        deadline = time.monotonic() + 30  # still "busy": the loop must be able to tick meanwhile
        while ticks - start_ticks < 5 and time.monotonic() < deadline:
            time.sleep(0.005)
        ticks_while_busy.append(ticks - start_ticks)
        return result

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    monkeypatch.setattr(engine, "_run", busy_run)
    loop_thread = threading.current_thread()
    transcriber = transcribers(tiny_checkpoint)
    await asyncio.wait_for(transcriber.wait_ready(), GENEROUS_SECONDS)
    ticking = asyncio.create_task(ticker())
    try:
        await asyncio.wait_for(transcriber.transcribe(note_3s), GENEROUS_SECONDS)
    finally:
        ticking.cancel()

    assert len(busy_threads) == 1 and busy_threads[0] is not loop_thread
    assert len(ticks_while_busy) == 1 and ticks_while_busy[0] >= 5


@pytest.mark.slow
async def test_one_transcription_at_a_time(
    tiny_checkpoint: Path, note_3s: bytes, transcribers, engine, monkeypatch
) -> None:
    active = 0
    most_active = 0
    lock = threading.Lock()
    real_run = engine._run

    def counting(self, model, samples):
        nonlocal active, most_active
        with lock:
            active += 1
            most_active = max(most_active, active)
        try:
            time.sleep(0.05)
            return real_run(self, model, samples)
        finally:
            with lock:
                active -= 1

    monkeypatch.setattr(engine, "_run", counting)
    transcriber = transcribers(tiny_checkpoint)
    results = await asyncio.wait_for(
        asyncio.gather(*(transcriber.transcribe(note_3s) for _ in range(3))), GENEROUS_SECONDS
    )
    assert len(results) == 3 and most_active == 1


@pytest.mark.slow
async def test_cancelled_waiter_does_not_cancel_the_load_and_bad_audio_is_refused_before_the_model_is_ready(
    tiny_checkpoint: Path, transcribers, engine, monkeypatch
) -> None:
    """(One test: both need a load held back, and the load is the cost.)"""
    release = gate_model_loading(monkeypatch, engine)
    transcriber = transcribers(tiny_checkpoint)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(transcriber.wait_ready(), 0.05)
    assert transcriber.state is ModelState.loading

    with pytest.raises(AudioError) as caught:  # while the model is still held back: the note is not waited on
        await asyncio.wait_for(transcriber.transcribe(make_ogg_opus(silence(2.0))), GENEROUS_SECONDS)
    assert caught.value.user_message == SILENCE_MESSAGE
    assert transcriber.state is ModelState.loading

    release.set()
    await asyncio.wait_for(transcriber.wait_ready(), GENEROUS_SECONDS)  # the load goes on, the worker is unharmed
    assert transcriber.state is ModelState.ready


async def expect_unavailable(transcriber: ResidentTranscriber, note: bytes) -> str:
    with pytest.raises(ModelUnavailable) as waited:
        await asyncio.wait_for(transcriber.wait_ready(), GENEROUS_SECONDS)
    with pytest.raises(ModelUnavailable) as transcribed:  # and again, without crashing or hanging
        await asyncio.wait_for(transcriber.transcribe(note), GENEROUS_SECONDS)
    assert transcriber.state is ModelState.failed
    assert waited.value.user_message == transcribed.value.user_message == transcriber.load_error
    return waited.value.user_message


@pytest.mark.slow
async def test_missing_checkpoint_file(tmp_path: Path, note_3s: bytes, transcribers) -> None:
    missing = tmp_path / "models" / "absent.pt"
    message = await expect_unavailable(transcribers(missing), note_3s)
    assert message == f"The speech model '{missing}' could not be loaded: there is no such file."


@pytest.mark.slow
async def test_file_that_is_not_a_checkpoint(tmp_path: Path, note_3s: bytes, transcribers) -> None:
    bogus = tmp_path / "model.pt"
    bogus.write_text("not a checkpoint")
    message = await expect_unavailable(transcribers(bogus), note_3s)
    assert message.startswith(f"The speech model '{bogus}' could not be loaded: the file is not a valid whisper")


@pytest.mark.slow
async def test_unknown_model_name(note_3s: bytes, transcribers) -> None:
    message = await expect_unavailable(transcribers("huge-v9"), note_3s)
    assert message.startswith("The speech model 'huge-v9' could not be loaded: it is neither a checkpoint file")


@pytest.mark.slow
async def test_known_model_name_without_weights_or_network(
    tmp_path: Path, note_3s: bytes, transcribers, engine, monkeypatch
) -> None:
    attempts: list[str] = []

    def offline(url: object, *args: object, **kwargs: object) -> object:
        attempts.append(str(url))
        raise urllib.error.URLError("no network")

    if engine is voice.FasterWhisperTranscriber:
        import huggingface_hub.constants

        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # the hub says: not cached, offline
    else:
        monkeypatch.setattr(urllib.request, "urlopen", offline)
    message = await expect_unavailable(transcribers("base", download_root=tmp_path / "cache"), note_3s)

    assert message.startswith("The speech model 'base' could not be loaded: it is not downloaded yet and downloading")
    if engine is voice.OpenAIWhisperTranscriber:
        assert attempts and attempts[0].endswith("/base.pt")  # whisper did try to fetch the weights
        assert message.endswith("failed (no network).")


@pytest.mark.slow
async def test_unknown_language(tiny_checkpoint: Path, note_3s: bytes, transcribers) -> None:
    message = await expect_unavailable(transcribers(tiny_checkpoint, language="klingon"), note_3s)
    assert "'klingon' is not a language whisper knows" in message


@pytest.fixture(scope="session")
def twice_built(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path) -> tuple[Path, Path]:
    """The tiny checkpoint built twice under one seed, in two folders (both engines' tests read the same pair): the
    run's shared one, and one more built here under the same name (faster-whisper's conversions are named after the
    file and keyed by its content: the same bytes reuse the first one's, different bytes would be converted again)."""
    return tiny_checkpoint, build_tiny_checkpoint(tmp_path_factory.mktemp("twice") / tiny_checkpoint.name)


@pytest.mark.slow
def test_same_checkpoint_on_every_build(twice_built: tuple[Path, Path]) -> None:
    """The test checkpoint is reproducible: the checkpoint built twice under one seed is the same, every parameter
    finite. (Before the fix the decoder's positional embedding was torch.empty memory: 1.6e37, inf, 1.9e-40 across
    runs.)"""
    import torch

    states = [torch.load(path, map_location="cpu", weights_only=True)["model_state_dict"] for path in twice_built]
    assert states[0].keys() == states[1].keys()
    for name, tensor in states[0].items():
        assert torch.equal(tensor, states[1][name]), f"{name} differs between two builds with the same seed"
        assert bool(torch.isfinite(tensor.float()).all()), f"{name} holds non-finite values"


@pytest.mark.slow
async def test_same_transcript_on_every_run(twice_built: tuple[Path, Path], note_3s: bytes, transcribers) -> None:
    """Each engine gives the same text for the same note from either build of the test checkpoint, and again."""
    first, second = twice_built
    texts = []
    for path in (first, second, first):
        transcript = await asyncio.wait_for(transcribers(path, language="en").transcribe(note_3s), GENEROUS_SECONDS)
        texts.append(transcript.text)
    assert texts[0] and texts[0] == texts[1] == texts[2]


@pytest.mark.slow
async def test_both_engines_read_the_same_weights_the_same_way(
    tiny_checkpoint: Path, convert_root: Path, note_3s: bytes
) -> None:
    """The converted CTranslate2 model (float32) decodes the very tokens openai-whisper does: the conversion,
    the tokenizer.json ids and the token cap all agree with the original."""
    require_faster_whisper()
    openai = voice.OpenAIWhisperTranscriber(str(tiny_checkpoint), "en", 60.0, "cpu", max_tokens_per_window=24)
    faster = voice.FasterWhisperTranscriber(
        str(tiny_checkpoint),
        "en",
        60.0,
        "cpu",
        max_tokens_per_window=24,
        convert_root=convert_root,
        compute_type="float32",
    )
    try:
        ours = await asyncio.wait_for(openai.transcribe(note_3s), GENEROUS_SECONDS)
        theirs = await asyncio.wait_for(faster.transcribe(note_3s), GENEROUS_SECONDS)
    finally:
        openai.close()
        faster.close()
    assert ours.text and ours.text == theirs.text


@pytest.mark.slow
async def test_checkpoint_is_converted_once_and_a_ct2_folder_is_used_as_is(
    tmp_path: Path, tiny_checkpoint: Path, note_3s: bytes, monkeypatch
) -> None:
    require_faster_whisper()
    from agents.inputs import ct2_convert

    checkpoint = tiny_checkpoint
    root = tmp_path / "data" / "voice" / "models"  # a conversion root of this test's own: nothing converted yet
    conversions: list[Path] = []
    real_write = ct2_convert.write_ct2_folder

    def counting(source: Path, out_dir: Path) -> None:
        conversions.append(source)
        real_write(source, out_dir)

    monkeypatch.setattr(ct2_convert, "write_ct2_folder", counting)
    texts = []
    folders = []
    for model in (checkpoint, checkpoint, None):
        transcriber = voice.FasterWhisperTranscriber(
            str(model or folders[0]), "en", 60.0, "cpu", max_tokens_per_window=8, convert_root=root
        )
        try:
            texts.append((await asyncio.wait_for(transcriber.transcribe(note_3s), GENEROUS_SECONDS)).text)
        finally:
            transcriber.close()
        folders.append(transcriber.model_folder)
    assert conversions == [checkpoint]  # the second start reused the converted folder
    assert folders[0] == folders[1] == folders[2] and folders[0].parent == root
    assert {p.name for p in folders[0].iterdir()} >= {"model.bin", "config.json", "tokenizer.json"}
    assert texts[0] and texts[0] == texts[1] == texts[2]

    empty = tmp_path / "not-a-model"
    empty.mkdir()
    lonely = voice.FasterWhisperTranscriber(str(empty), None, 60.0, "cpu", convert_root=root)
    try:
        message = await expect_unavailable(lonely, note_3s)
    finally:
        lonely.close()
    assert message.endswith("the folder holds no CTranslate2 model (model.bin and config.json).")


def test_tokenizer_json_gives_whisper_ids() -> None:
    """faster-whisper tokenizes with the tokenizer.json we write: its ids must be openai-whisper's own."""
    require_faster_whisper()
    from tokenizers import Tokenizer
    from whisper.tokenizer import get_tokenizer

    from agents.inputs.ct2_convert import tokenizer_json

    text = "Please run the tests, then fix   what fails: ÜBER-größe 123 日本語 👍"
    # 99 languages (tiny to large-v2), then 100 (large-v3, turbo): one vocabulary file, so the merges worked out for
    # the first are reused for the second, whose special tokens (one language more) must still be its own
    for n_vocab, languages in ((51865, 99), (51866, 100)):
        ours = get_tokenizer(True, num_languages=languages)
        built = Tokenizer.from_str(tokenizer_json(n_vocab))  # the text written as tokenizer.json
        assert built.encode(text).ids == ours.encode(text)
        assert built.decode(ours.encode(text)) == text
        names = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]
        names += ["<|yue|>"] if languages == 100 else []
        for name in names:
            assert built.token_to_id(name) == ours.encoding.encode_single_token(name), (n_vocab, name)


def test_rejects_nonsense_limits() -> None:
    with pytest.raises(ValueError):
        Transcriber("base", None, 0)
    with pytest.raises(ValueError):
        Transcriber("base", None, 60, max_tokens_per_window=0)


def test_the_setting_picks_the_engine(tmp_path: Path) -> None:

    for name, cls in voice.ENGINES.items():
        settings = offline_settings(tmp_path, database_path=tmp_path / "data" / "agentlab.db", voice_engine=name)
        transcriber = voice.make_engine(**voice.engine_config(settings))  # what the speech process runs
        try:
            assert type(transcriber) is cls and transcriber.engine == name
            assert transcriber.speed_log == settings.paths.voice_data_dir / "recent-notes.json"
            if isinstance(transcriber, voice.FasterWhisperTranscriber):  # a checkpoint file is converted there
                assert transcriber.convert_root == settings.paths.voice_data_dir / "models"
        finally:
            transcriber.close()
        process = voice.make_transcriber(settings)  # the bot's: that engine, in a process of its own
        assert isinstance(process, voice.SpeechProcess) and process.config["engine"] == name
        assert process.pid is None, "nothing is started before a note (or VOICE_PRELOAD)"


# --------------------------------------------------------------------------------------------------------------
# FakeTranscriber (used by the Telegram handler tests)


def test_both_transcribers_satisfy_the_protocol() -> None:
    real = Transcriber("base", None, 60)
    try:
        assert isinstance(real, SpeechToText)
    finally:
        real.close()
    assert isinstance(FakeTranscriber(), SpeechToText)
    assert isinstance(voice.SpeechProcess({}, 1.0), SpeechToText)


async def test_fake_transcriber_follows_its_script() -> None:
    fake = FakeTranscriber(["first note", AudioError(SILENCE_MESSAGE), "third note"])
    assert fake.state is ModelState.not_loaded

    assert (await fake.transcribe(b"one")).text == "first note"
    with pytest.raises(AudioError):
        await fake.transcribe(b"two")
    assert (await fake.transcribe(b"three")).text == "third note"
    assert fake.received == [b"one", b"two", b"three"] and fake.state is ModelState.ready
    with pytest.raises(AssertionError):
        await fake.transcribe(b"four")


async def test_fake_transcriber_failing_model_and_real_audio_checks() -> None:
    broken = FakeTranscriber("never", load_error="The speech model 'base' could not be loaded: offline.")
    broken.start_loading()
    assert broken.state is ModelState.failed
    with pytest.raises(ModelUnavailable, match="offline"):
        await broken.transcribe(b"x")

    strict = FakeTranscriber("hello", validate_audio=True)
    with pytest.raises(AudioError) as caught:
        await strict.transcribe(b"")
    assert caught.value.user_message == EMPTY_MESSAGE
    transcript = await strict.transcribe(make_ogg_opus(tone(1.0)))
    assert transcript.text == "hello" and abs(transcript.audio_seconds - 1.0) < 0.1


async def test_faster_engine_without_faster_whisper_says_so_in_one_sentence(
    tmp_path: Path, note_3s: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the optional extra did not install, VOICE_ENGINE=faster-whisper refuses notes with one clear sentence."""
    import sys

    monkeypatch.setitem(sys.modules, "faster_whisper", None)  # as if it were not installed
    transcriber = voice.FasterWhisperTranscriber("base", None, 60.0, "cpu", convert_root=tmp_path)
    try:
        message = await expect_unavailable(transcriber, note_3s)
    finally:
        transcriber.close()
    assert message.startswith("The speech model 'base' could not be loaded: faster-whisper is not usable (")
    assert message.endswith("or set VOICE_ENGINE=openai-whisper.") and "Traceback" not in message


# --------------------------------------------------------------------------------------------------------------
# large-v3's feature size, and the device faster-whisper proves at load


@pytest.fixture(scope="session")
def mel128_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random checkpoint shaped like large-v3 and turbo where it matters: 128 mel bins, 100 languages."""
    return shared_checkpoint(run_folder(tmp_path_factory, "whisper"), "tiny-128mel.pt", n_mels=128, n_vocab=51866)


@pytest.mark.slow
async def test_a_128_mel_checkpoint_transcribes_in_each_engine(
    mel128_checkpoint: Path, note_3s: bytes, transcribers, engine
) -> None:
    transcriber = transcribers(mel128_checkpoint)
    transcript = await asyncio.wait_for(transcriber.transcribe(note_3s), GENEROUS_SECONDS)
    assert transcriber.state is ModelState.ready, transcriber.load_error
    assert transcript.text and transcriber.recent[0].tokens == 24
    if engine is voice.FasterWhisperTranscriber:
        config = json.loads((transcriber.model_folder / "preprocessor_config.json").read_text())
        assert config["feature_size"] == 128, "the converted folder keeps the checkpoint's mel size"


@pytest.mark.slow
async def test_a_gpu_that_fails_at_load_falls_back_to_the_cpu(
    tiny_checkpoint: Path, note_3s: bytes, convert_root: Path, tmp_path: Path, caplog
) -> None:
    require_faster_whisper()
    import ctranslate2

    if ctranslate2.get_cuda_device_count() > 0:
        pytest.skip("this machine has a CUDA device: the fallback is not what would happen here")
    speed_log = tmp_path / "voice" / "recent-notes.json"
    transcriber = voice.FasterWhisperTranscriber(
        str(tiny_checkpoint),
        None,
        60.0,
        "cuda",
        convert_root=convert_root,
        speed_log=speed_log,
        max_tokens_per_window=24,
    )
    try:
        with caplog.at_level(logging.WARNING, logger="agents.inputs.voice_faster"):
            transcript = await asyncio.wait_for(transcriber.transcribe(note_3s), GENEROUS_SECONDS)
    finally:
        transcriber.close()
    assert transcript.text and transcriber.device == "cpu"
    fallbacks = [r for r in caplog.records if "falling back to the CPU" in r.getMessage()]
    assert len(fallbacks) == 1 and "\n" not in fallbacks[0].getMessage(), [r.getMessage() for r in caplog.records]
    assert "cuda failed its warm-up transcription" in transcriber.device_reason
    record = json.loads((speed_log.parent / "device.json").read_text())
    assert record["device"] == "cpu" and record["reason"] == transcriber.device_reason
