"""Voice notes to text: in-process audio decoding (PyAV) and one resident openai-whisper model.

`decode_audio` turns the bytes of a voice note (OGG/Opus, mp3, m4a, wav, ...) into 16 kHz mono float32 samples
without the `ffmpeg` binary, and rejects unusable input with an `AudioError` whose message is one sentence meant
for the user. `Transcriber` owns one whisper model and a single worker thread: loading and inference both run
there (one at a time), audio decoding runs in asyncio's default thread pool, so the event loop never blocks.

Decoding is bounded so that garbage never runs for long: one temperature (no fallback loop), no conditioning on
the previous window, no timestamps (each 30 s window is decoded exactly once) and at most `max_tokens_per_window`
tokens per window. The work is therefore at most ceil(seconds / 30) windows of that many tokens.

torch and whisper are imported lazily, inside the worker thread, so importing this module is cheap.

Why one module over 400 lines: decoding and the resident model share limits and error wording; splitting them would
split one pipeline.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import logging
import os
import queue
import threading
import time
import urllib.error
from pathlib import Path
from typing import Any

import av
import numpy as np

from agents.core.protocols import ModelState, Transcript

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
# Container durations are estimates (Opus pre-skip, mp3 bitrate guesses): allow this much over the limit.
DURATION_GRACE_SECONDS = 0.5
# A note is silent when its loudest 100 ms stretch stays below -50 dBFS.
SILENCE_FRAME_SAMPLES = SAMPLE_RATE // 10
SILENCE_RMS = 10 ** (-50 / 20)
# whisper's own ceiling is n_text_ctx // 2 = 224 tokens per 30 s window; real speech needs far fewer.
DEFAULT_MAX_TOKENS_PER_WINDOW = 224
WHISPER_MODEL_NAMES = ("tiny", "base", "small", "medium", "large", "turbo")

EMPTY_MESSAGE = "The voice note is empty."
UNREADABLE_MESSAGE = "I couldn't read that file as audio; it may be damaged or in a format I don't support."
DAMAGED_MESSAGE = "That voice note seems damaged or cut off; please send it again."
NO_AUDIO_MESSAGE = "That file has no audio track in it."
UNSUPPORTED_MESSAGE = "That audio is in a format I can't decode; please send a regular voice note."
TOO_LONG_MESSAGE = "That voice note is {length} long, and I can only transcribe up to {limit}."
TOO_LONG_UNKNOWN_MESSAGE = "That voice note is longer than {limit}, the most I can transcribe."
SILENCE_MESSAGE = "I couldn't hear anything in that voice note."


class VoiceError(Exception):
    """A voice note could not be turned into text; `user_message` is one sentence to show the user."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class AudioError(VoiceError):
    """The audio itself is unusable: empty, damaged, not audio, too long or silent."""


class ModelUnavailable(VoiceError):
    """The speech model cannot be loaded (or has been shut down)."""


class TranscriptionFailed(VoiceError):
    """The model was loaded but failed while transcribing (e.g. out of memory)."""


# --------------------------------------------------------------------------------------------------------------
# decoding


def decode_audio(data: bytes, max_seconds: float) -> np.ndarray:
    """Decode an audio file held in memory to 16 kHz mono float32 samples in [-1, 1].

    Raises AudioError (with a one-sentence user message) for empty, damaged, truncated or non-audio input, an
    unsupported codec, audio longer than `max_seconds` (checked from the container up front when it states a
    duration, and while decoding otherwise, stopping early) and silence.
    """
    if not data:
        raise AudioError(EMPTY_MESSAGE)
    if _ogg_is_truncated(data):
        raise AudioError(DAMAGED_MESSAGE)
    try:
        samples = _decode(data, max_seconds)
    except AudioError:
        raise
    except Exception as exc:  # anything PyAV/FFmpeg throws: the user gets one sentence, the log gets the detail
        log.warning("audio decoding failed: %s: %s", type(exc).__name__, exc)
        raise AudioError(UNREADABLE_MESSAGE) from exc
    if _is_silent(samples):
        raise AudioError(SILENCE_MESSAGE)
    return samples


def _decode(data: bytes, max_seconds: float) -> np.ndarray:
    try:
        container = av.open(io.BytesIO(data), mode="r", metadata_errors="ignore")
    except av.error.EOFError as exc:  # the headers end early: cut off
        raise AudioError(DAMAGED_MESSAGE) from exc
    except (av.error.FFmpegError, ValueError, OSError) as exc:
        raise AudioError(UNREADABLE_MESSAGE) from exc
    with container:
        if not container.streams.audio:
            raise AudioError(NO_AUDIO_MESSAGE)
        stream = container.streams.audio[0]
        if stream.codec_context is None:
            raise AudioError(UNSUPPORTED_MESSAGE)
        limit = max_seconds + DURATION_GRACE_SECONDS
        declared = _declared_seconds(container, stream)
        if declared is not None and declared > limit:
            length, most = format_duration(declared), format_duration(max_seconds)
            raise AudioError(TOO_LONG_MESSAGE.format(length=length, limit=most))
        return _decode_stream(container, stream, max_samples=int(limit * SAMPLE_RATE), max_seconds=max_seconds)


def _decode_stream(container: Any, stream: Any, *, max_samples: int, max_seconds: float) -> np.ndarray:
    """Decode and resample `stream`, stopping as soon as it runs past `max_samples`."""
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    chunks: list[np.ndarray] = []
    total = 0
    too_long = AudioError(TOO_LONG_UNKNOWN_MESSAGE.format(limit=format_duration(max_seconds)))
    try:
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
                total += chunks[-1].size
            if total > max_samples:
                raise too_long
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
            total += chunks[-1].size
    except av.error.DecoderNotFoundError as exc:
        raise AudioError(UNSUPPORTED_MESSAGE) from exc
    except av.error.FFmpegError as exc:
        raise AudioError(DAMAGED_MESSAGE if chunks else UNREADABLE_MESSAGE) from exc
    if total > max_samples:
        raise too_long
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    return np.ascontiguousarray(np.concatenate(chunks), dtype=np.float32)


def _declared_seconds(container: Any, stream: Any) -> float | None:
    """The duration the container states (or estimates), in seconds; None when it states none."""
    if stream.duration is not None and stream.time_base is not None and stream.duration > 0:
        return float(stream.duration * stream.time_base)
    if container.duration is not None and container.duration > 0:
        return container.duration / av.time_base
    return None


def _ogg_is_truncated(data: bytes) -> bool:
    """True when `data` is an Ogg stream whose last page runs past the end of the data (it was cut off).

    FFmpeg silently decodes such a file up to the cut; we would rather ask for the whole note. Walks page headers
    only (27 bytes + segment table each); gives up (False) at anything that isn't a clean page boundary.
    """
    if not data.startswith(b"OggS"):
        return False
    size, pos = len(data), 0
    while pos < size:
        remaining = size - pos
        if remaining < 4:
            return b"OggS".startswith(data[pos:])
        if data[pos : pos + 4] != b"OggS":
            return False
        if remaining < 27:
            return True
        segments = data[pos + 26]
        body_start = pos + 27 + segments
        if body_start > size:
            return True
        pos = body_start + sum(data[pos + 27 : body_start])
    return pos > size


def _is_silent(samples: np.ndarray) -> bool:
    """True when no 100 ms stretch of `samples` is louder than SILENCE_RMS (also for no samples at all)."""
    if samples.size == 0:
        return True
    usable = samples.size - samples.size % SILENCE_FRAME_SAMPLES
    frames = samples[:usable].reshape(-1, SILENCE_FRAME_SAMPLES) if usable else samples.reshape(1, -1)
    loudest = float(np.sqrt(np.mean(np.square(frames, dtype=np.float64), axis=1)).max())
    return loudest < SILENCE_RMS


def format_duration(seconds: float) -> str:
    """`45 seconds`, `1 minute`, `10 minutes`, `12:05 minutes`."""
    whole = max(0, int(round(seconds)))
    if whole < 60:
        return f"{whole} second" if whole == 1 else f"{whole} seconds"
    minutes, rest = divmod(whole, 60)
    if rest:
        return f"{minutes}:{rest:02d} minutes"
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


# --------------------------------------------------------------------------------------------------------------
# transcription


def transcribe_options(language: str | None, max_tokens_per_window: int, fp16: bool) -> dict[str, Any]:
    """The keyword arguments for `whisper.transcribe` that bound decoding (shared with bench/voice.py)."""
    return {
        "verbose": None,  # no printing, no progress bar
        "temperature": 0.0,  # a single temperature: no fallback loop
        "condition_on_previous_text": False,
        "without_timestamps": True,  # every 30 s window is decoded once, then the next one
        "sample_len": max_tokens_per_window,
        "language": language,
        "fp16": fp16,
    }


class DaemonExecutor:
    """One daemon worker thread running submitted calls in order.

    Unlike ThreadPoolExecutor (whose threads Python joins at exit), a model load or download in progress never
    holds the process up when the bot is asked to stop.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[concurrent.futures.Future, Any, tuple] | None] = queue.SimpleQueue()
        self._closed = False
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the awaiting side
                future.set_exception(exc)

    def submit(self, fn: Any, *args: Any) -> concurrent.futures.Future:
        if self._closed:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((future, fn, args))
        return future

    def shutdown(self, wait: bool = False, cancel_futures: bool = True) -> None:
        """Stop taking work; queued calls are cancelled (the running one finishes unseen)."""
        self._closed = True
        if cancel_futures:
            pending = []
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    pending.append(item[0])
            for future in pending:
                future.cancel()
        self._queue.put(None)


class Transcriber:
    """One resident whisper model behind a single worker thread; implements `SpeechToText`.

    `model` is a whisper model name ("base") or the path of a checkpoint file; `language` a code or name
    ("en", "german"), None to detect it per note. Call `start_loading()` early; `transcribe()` waits for the model.
    """

    def __init__(
        self,
        model: str,
        language: str | None,
        max_seconds: float,
        device: str | None = None,
        *,
        download_root: str | os.PathLike[str] | None = None,
        max_tokens_per_window: int = DEFAULT_MAX_TOKENS_PER_WINDOW,
    ) -> None:
        if max_seconds <= 0:
            raise ValueError("max_seconds must be positive")
        if not 1 <= max_tokens_per_window <= DEFAULT_MAX_TOKENS_PER_WINDOW:
            raise ValueError(f"max_tokens_per_window must be between 1 and {DEFAULT_MAX_TOKENS_PER_WINDOW}")
        self.model_name = model
        self.language = language.strip() if language and language.strip() else None
        self.max_seconds = max_seconds
        self.max_tokens_per_window = max_tokens_per_window
        self.download_root = str(download_root) if download_root is not None else None
        self._device = device
        self._executor = DaemonExecutor("whisper")
        self._lock = threading.Lock()
        self._state = ModelState.not_loaded
        self._load_error: str | None = None
        self._load_future: concurrent.futures.Future[None] | None = None
        self._model: Any = None
        self._language_code: str | None = None
        self._closed = False

    # --- state --------------------------------------------------------------------------------------------------

    @property
    def state(self) -> ModelState:
        return self._state

    @property
    def load_error(self) -> str | None:
        return self._load_error

    @property
    def device(self) -> str | None:
        """The torch device in use (known once loading has begun, if it wasn't given)."""
        return self._device

    def start_loading(self) -> None:
        """Begin loading the model in the worker thread; returns at once. Does nothing if already begun."""
        with self._lock:
            if self._load_future is not None or self._closed:
                return
            self._state = ModelState.loading
            self._load_future = self._executor.submit(self._load_blocking)

    async def wait_ready(self) -> None:
        """Wait until the model is loaded (starting the load if needed); raises ModelUnavailable if it can't be."""
        self.start_loading()
        future = self._load_future
        if future is not None:
            try:
                # shield: a cancelled waiter must not cancel the load itself
                await asyncio.shield(asyncio.wrap_future(future))
            except ModelUnavailable:
                pass  # the state and message are set; raised below
            except asyncio.CancelledError:
                if not future.cancelled():  # our caller was cancelled, not the load
                    raise
        if self._state is not ModelState.ready:
            raise ModelUnavailable(self._load_error or "The speech model is not available.")

    async def transcribe(self, data: bytes) -> Transcript:
        """Decode a voice note and transcribe it. Raises AudioError, ModelUnavailable or TranscriptionFailed."""
        self.start_loading()  # the model loads while the audio decodes
        started = time.perf_counter()
        samples = await asyncio.to_thread(decode_audio, data, self.max_seconds)
        decode_seconds = time.perf_counter() - started
        await self.wait_ready()
        try:
            future = self._executor.submit(self._transcribe_blocking, samples)
        except RuntimeError as exc:  # the executor has been shut down
            raise ModelUnavailable("The speech model has been shut down.") from exc
        text, language, transcribe_seconds = await asyncio.wrap_future(future)
        return Transcript(
            text=text,
            language=language,
            audio_seconds=samples.size / SAMPLE_RATE,
            decode_seconds=decode_seconds,
            transcribe_seconds=transcribe_seconds,
        )

    def close(self) -> None:
        """Stop the worker thread and drop the model; queued work is cancelled, running work finishes unseen."""
        with self._lock:
            self._closed = True
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._model = None
            self._fail("The speech model has been shut down.")

    # --- worker thread --------------------------------------------------------------------------------------------

    def _fail(self, message: str) -> None:
        self._load_error = message
        self._state = ModelState.failed

    def _load_blocking(self) -> None:
        started = time.perf_counter()
        try:
            model = self._load_model()
        except ModelUnavailable as exc:
            log.warning("speech model not loaded: %s", exc.user_message)
            self._fail(exc.user_message)
            raise
        except Exception as exc:  # unforeseen: still a clear state and message, never a dead worker
            log.exception("speech model not loaded")
            detail = f"{type(exc).__name__}: {_first_line(exc)}"
            self._fail(f"The speech model '{self.model_name}' could not be loaded: {detail}.")
            raise ModelUnavailable(self._load_error or "") from exc
        with self._lock:
            if self._closed:
                return
            self._model = model
            self._state = ModelState.ready
        log.info("speech model %r loaded on %s in %.1f s", self.model_name, self._device, time.perf_counter() - started)

    def _load_model(self) -> Any:
        label = self.model_name
        try:
            import torch
            import whisper
            from whisper.tokenizer import LANGUAGES, TO_LANGUAGE_CODE
        except Exception as exc:  # a broken install: say so rather than crash the worker
            raise ModelUnavailable(
                f"The speech model '{label}' could not be loaded: whisper is not usable ({exc})."
            ) from exc

        if self.language is not None:
            code = self.language.lower()
            code = code if code in LANGUAGES else TO_LANGUAGE_CODE.get(code, "")
            if not code:
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: "
                    f"'{self.language}' is not a language whisper knows."
                )
            self._language_code = code

        source = self._resolve_source()
        if self._device is None:
            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            return whisper.load_model(source, device=self._device, download_root=self.download_root)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            if source in WHISPER_MODEL_NAMES or source in whisper.available_models():
                reason = getattr(exc, "reason", None) or exc
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: it is not downloaded yet and downloading it "
                    f"failed ({reason})."
                ) from exc
            raise ModelUnavailable(f"The speech model '{label}' could not be loaded: {exc}.") from exc
        except Exception as exc:
            if os.path.isfile(source):
                raise ModelUnavailable(
                    f"The speech model '{label}' could not be loaded: the file is not a valid whisper checkpoint "
                    f"({type(exc).__name__}: {_first_line(exc)})."
                ) from exc
            raise ModelUnavailable(
                f"The speech model '{label}' could not be loaded: {type(exc).__name__}: {_first_line(exc)}."
            ) from exc

    def _resolve_source(self) -> str:
        """The name or checkpoint path to hand to `whisper.load_model`; ModelUnavailable for a missing file."""
        import whisper

        name = self.model_name.strip()
        if name in whisper.available_models():
            return name
        path = Path(name).expanduser()
        if path.is_file():
            return str(path)
        if _looks_like_path(name):
            raise ModelUnavailable(f"The speech model '{self.model_name}' could not be loaded: there is no such file.")
        raise ModelUnavailable(
            f"The speech model '{self.model_name}' could not be loaded: it is neither a checkpoint file nor a whisper "
            f"model name ({', '.join(WHISPER_MODEL_NAMES)})."
        )

    def _transcribe_blocking(self, samples: np.ndarray) -> tuple[str, str | None, float]:
        import whisper

        model = self._model
        if model is None:
            raise ModelUnavailable("The speech model has been shut down.")
        started = time.perf_counter()
        options = transcribe_options(self._language_code, self.max_tokens_per_window, fp16=self._device != "cpu")
        try:
            result = whisper.transcribe(model, samples, **options)
        except Exception as exc:
            log.exception("transcription failed")
            raise TranscriptionFailed(
                f"The speech model failed on that voice note ({type(exc).__name__}); please try again."
            ) from exc
        text = str(result.get("text", "")).strip()
        language = result.get("language") or self._language_code
        return text, language, time.perf_counter() - started


def _looks_like_path(name: str) -> bool:
    return (
        os.sep in name or "/" in name or name.startswith(("~", ".")) or name.endswith((".pt", ".pth", ".bin", ".ckpt"))
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= 200 else line[:197] + "..."
