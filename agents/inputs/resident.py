"""The resident-model transcriber both speech engines share: one model, one worker thread, the `SpeechToText` life.

`ResidentTranscriber` owns one model and a single daemon worker thread: loading and inference both run there (one
at a time), audio decoding runs in asyncio's default thread pool, so the event loop never blocks. An engine module
(voice_openai, voice_faster) subclasses it with two methods run on that thread: `_load_model()` (returns the
model or raises ModelUnavailable with one sentence for the user) and `_run(model, samples)` (returns the text and
the language). Everything else, state, waiting, errors, shutdown and the speed record, is here, so the two engines
behave the same.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # numpy comes with the model, not with the bot's start
    import numpy as np

from agents.core.protocols import ModelState, Transcript
from agents.inputs.audio import SAMPLE_RATE, ModelUnavailable, TranscriptionFailed, decode_audio
from agents.inputs.speed_log import KEEP, NoteSpeed, append_speed, summary

log = logging.getLogger(__name__)

# whisper's own ceiling is n_text_ctx // 2 = 224 tokens per 30 s window; real speech needs far fewer.
DEFAULT_MAX_TOKENS_PER_WINDOW = 224


_Job = tuple[concurrent.futures.Future[Any], Any, tuple[Any, ...]]  # (its future, the function, its arguments)


class DaemonExecutor:
    """One daemon worker thread running submitted calls in order.

    Unlike ThreadPoolExecutor (whose threads Python joins at exit), a model load or download in progress never
    holds the process up when the bot is asked to stop.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
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

    def submit(self, fn: Any, *args: Any) -> concurrent.futures.Future[Any]:
        if self._closed:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
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


class ResidentTranscriber:
    """One resident speech model behind a single worker thread; implements `SpeechToText` (engines subclass it).

    `model` is a model name ("base") or a path (what each engine accepts); `language` a code or name ("en",
    "german"), None to detect it per note. Call `start_loading()` early; `transcribe()` waits for the model.
    `speed_log`: a JSON file where the timing of each note is kept for `agentlab doctor` (None: memory only).
    """

    engine: ClassVar[str] = ""

    def __init__(
        self,
        model: str,
        language: str | None,
        max_seconds: float,
        device: str | None = None,
        *,
        download_root: str | os.PathLike[str] | None = None,
        max_tokens_per_window: int = DEFAULT_MAX_TOKENS_PER_WINDOW,
        speed_log: Path | None = None,
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
        self.speed_log = speed_log
        self.recent: deque[NoteSpeed] = deque(maxlen=KEEP)
        self._device = device
        self._executor = DaemonExecutor(self.engine or "speech")
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

    def speed_summary(self) -> str | None:
        """How fast the last notes went (`summary` of the ones kept in memory); None before the first one."""
        return summary(list(self.recent)) if self.recent else None

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
            detail = f"{type(exc).__name__}: {first_line(exc)}"
            self._fail(f"The speech model '{self.model_name}' could not be loaded: {detail}.")
            raise ModelUnavailable(self._load_error or "") from exc
        with self._lock:
            if self._closed:
                return
            self._model = model
            self._state = ModelState.ready
        log.info("speech model %r loaded on %s in %.1f s", self.model_name, self._device, time.perf_counter() - started)

    def _load_model(self) -> Any:
        """Load and return the model (worker thread); raise ModelUnavailable with one sentence for the user."""
        raise NotImplementedError

    def _run(self, model: Any, samples: np.ndarray) -> tuple[str, str | None, int]:
        """Transcribe `samples` with `model` (worker thread); returns the text, the language code and the number
        of tokens decoded."""
        raise NotImplementedError

    def _transcribe_blocking(self, samples: np.ndarray) -> tuple[str, str | None, float]:
        model = self._model
        if model is None:
            raise ModelUnavailable("The speech model has been shut down.")
        started = time.perf_counter()
        try:
            text, language, tokens = self._run(model, samples)
        except Exception as exc:
            log.exception("transcription failed")
            raise TranscriptionFailed(
                f"The speech model failed on that voice note ({type(exc).__name__}); please try again."
            ) from exc
        seconds = time.perf_counter() - started
        self._record(samples.size / SAMPLE_RATE, seconds, tokens)
        return text.strip(), language or self._language_code, seconds

    def _record(self, audio_seconds: float, transcribe_seconds: float, tokens: int) -> None:
        speed = NoteSpeed(
            engine=self.engine,
            model=self.model_name,
            audio_seconds=audio_seconds,
            transcribe_seconds=transcribe_seconds,
            tokens=tokens,
        )
        self.recent.append(speed)
        if self.speed_log is not None:
            append_speed(self.speed_log, speed)


def looks_like_path(name: str) -> bool:
    return (
        os.sep in name or "/" in name or name.startswith(("~", ".")) or name.endswith((".pt", ".pth", ".bin", ".ckpt"))
    )


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= 200 else line[:197] + "..."
