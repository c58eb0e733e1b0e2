"""The bot's transcriber: the speech model in a process of its own, started when needed and ended when idle.

torch and a whisper model cost the bot's process 250-600 MB for as long as it runs, though most hours bring no voice
note. `SpeechProcess` implements `SpeechToText` by starting `agents.inputs.speech_server` (the resident transcriber
of either engine, unchanged) on the first note, or at start with `VOICE_PRELOAD`, and ending it after
`VOICE_IDLE_MINUTES` without notes: the bot's own process never imports torch. Notes go to it one at a time over
its stdin/stdout (the format is the server's docstring); a note's errors come back as the same `VoiceError`
classes with the same one-sentence messages. A speech process that dies (out of memory, killed) fails the note in
flight with one sentence and is started again by the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections import deque
from typing import Any

from agents.core.protocols import ModelState, Transcript
from agents.inputs.audio import AudioError, ModelUnavailable, TranscriptionFailed, VoiceError
from agents.inputs.speed_log import KEEP, NoteSpeed, summary
from agents.sandbox.clean_env import child_env

log = logging.getLogger(__name__)

ERRORS: dict[str, type[VoiceError]] = {
    cls.__name__: cls for cls in (VoiceError, AudioError, ModelUnavailable, TranscriptionFailed)
}
ANSWER_LIMIT = 16 * 1024 * 1024  # one answer line (a transcript of VOICE_MAX_SECONDS of speech is far shorter)
STOP_SECONDS = 5.0  # an idle speech process is given this long to exit on its own before it is killed
# A note's answer is awaited at most NOTE_SECONDS + NOTE_SECONDS_PER_AUDIO_SECOND × VOICE_MAX_SECONDS: whisper works
# in 30-second windows, so even a short note costs one window, and a big model on a slow CPU may take longer than the
# audio lasts. A speech process that does not answer by then (a deadlocked thread, a hung driver) is killed and the
# note fails with one sentence: it held every later note of every chat, and its chat's messages, for as long.
NOTE_SECONDS = 120.0
NOTE_SECONDS_PER_AUDIO_SECOND = 4.0
# OpenMP's idle threads sleep instead of spinning: torch's threads (libgomp) otherwise busy-wait between the many small
# operations of decoding one token, which on a machine the bot shares with its workers' builds and tests doubles the
# CPU a note costs and makes it slower too (measured on 2 busy cores, a tiny-sized model, 10 s of audio: 3.7-5.2 CPU
# seconds in 5-8 s spinning, 1.5-1.9 in 2-4.6 s sleeping). A value set in the bot's environment is kept.
OPENMP_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


class SpeechProcess:
    """`SpeechToText` over a speech process. `config`: `agents.inputs.voice.make_engine`'s keyword arguments (JSON);
    `idle_minutes`: the process ends after this long without notes (0: kept until `close`)."""

    def __init__(self, config: dict[str, Any], idle_minutes: float) -> None:
        self.config = config
        self.idle_seconds = idle_minutes * 60
        self.recent: deque[NoteSpeed] = deque(maxlen=KEEP)
        self.pid: int | None = None  # the running speech process's, for benches and tests
        self._state = ModelState.not_loaded
        self._load_error: str | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Task[None] | None = None
        self._idle: asyncio.Task[None] | None = None
        self._turn = asyncio.Lock()  # one note at a time on the pipe
        self._last_used = time.monotonic()
        self._closed = False

    @property
    def state(self) -> ModelState:
        return self._state

    @property
    def load_error(self) -> str | None:
        return self._load_error

    @property
    def running(self) -> bool:
        """A speech process is started and has not exited (it may still be loading)."""
        return self._process is not None and self._process.returncode is None

    def speed_summary(self) -> str | None:
        return summary(list(self.recent)) if self.recent else None

    def start_loading(self) -> None:
        """Start the speech process (it loads the model); returns at once. Nothing if it runs or is starting."""
        if self._closed or self._state in (ModelState.loading, ModelState.ready):
            return
        self._state, self._load_error = ModelState.loading, None
        self._last_used = time.monotonic()
        self._starting = asyncio.get_running_loop().create_task(self._start(), name="speech-process-start")

    async def wait_ready(self) -> None:
        self.start_loading()
        if self._starting is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._starting)
        if self._state is not ModelState.ready:
            raise ModelUnavailable(self._load_error or "The speech model is not available.")

    async def transcribe(self, data: bytes) -> Transcript:
        """Send one note to the speech process (started if need be) and return its transcript."""
        async with self._turn:
            if self._process is not None and self._process.returncode is not None:  # died while idle (killed)
                await self._ended(f"the speech process had ended (exit {self._process.returncode}); starting it again")
            await self.wait_ready()
            process = self._process
            assert process is not None and process.stdin is not None and process.stdout is not None
            self._last_used = time.monotonic()
            bound = NOTE_SECONDS + NOTE_SECONDS_PER_AUDIO_SECOND * float(self.config.get("max_seconds") or 0)
            try:
                async with asyncio.timeout(bound):
                    process.stdin.write(json.dumps({"size": len(data)}).encode() + b"\n" + data)
                    await process.stdin.drain()
                    line = await process.stdout.readline()
            except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
                line = b""
                log.warning("speech process: %s", exc)
            except TimeoutError:  # hung: its late answer would be read as the next note's, so that process is done
                log.warning("speech process %s gave no answer within %.0f s: killed", process.pid, bound)
                self._drop(process)
                raise TranscriptionFailed(
                    "The speech model took too long on that note and was restarted; please resend it."
                ) from None
            except asyncio.CancelledError:  # its answer would be read as the next note's: that process is done
                self._drop(process)
                raise
            finally:
                self._last_used = time.monotonic()
            answer = _answer(line)
            if answer is None:  # it died under this note (or answered what it should not)
                await self._ended("the speech process ended while transcribing")
                raise TranscriptionFailed("The speech model stopped while transcribing that note; please resend it.")
        if "error" in answer:
            raise ERRORS.get(answer["error"], VoiceError)(answer["message"])
        if answer.get("speed"):
            self.recent.append(NoteSpeed.model_validate(answer["speed"]))
        return Transcript(
            text=answer["text"],
            language=answer["language"],
            audio_seconds=answer["audio_seconds"],
            decode_seconds=answer["decode_seconds"],
            transcribe_seconds=answer["transcribe_seconds"],
        )

    def _drop(self, process: asyncio.subprocess.Process) -> None:
        """Kill the speech process a note was given to and let the next note start another."""
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        self._process, self.pid = None, None
        if self._state is ModelState.ready:
            self._state = ModelState.not_loaded

    def close(self) -> None:
        """End the speech process (the bot stops); later notes get ModelUnavailable."""
        self._closed = True
        self._state, self._load_error = ModelState.failed, "The speech model has been shut down."
        for task in (self._starting, self._idle):
            if task is not None:
                task.cancel()
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()

    # --- the process's life ---------------------------------------------------------------------------------------

    async def _start(self) -> None:
        started = time.perf_counter()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-P",  # `-m` would put the working folder first on the module path: its `agents/`, if any, would run
                "-m",
                "agents.inputs.speech_server",
                json.dumps(self.config),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=ANSWER_LIMIT,
                env={**OPENMP_DEFAULTS, **child_env()},  # the bot's own secrets stay with the bot
            )
        except OSError as exc:
            self._state = ModelState.failed
            self._load_error = f"The speech process could not be started: {exc}."
            return
        self._process, self.pid = process, process.pid
        assert process.stdout is not None
        ended = "The speech process ended while loading the model."
        try:
            line = await process.stdout.readline()
            answer = json.loads(line) if line.strip() else {"message": ended}
        except (ValueError, OSError) as exc:  # not one of its answers: never left "loading"
            answer = {"message": f"The speech process answered what it should not ({type(exc).__name__})."}
        if not answer.get("ready"):
            self._state, self._load_error = ModelState.failed, answer.get("message") or ended
            log.warning("speech model not loaded: %s", self._load_error)
            await self._reap(process)
            self._process, self.pid = None, None  # the next note tries again
            return
        self._state = ModelState.ready
        log.info(
            "speech process %d: %r loaded on %s in %.1f s",
            process.pid,
            self.config.get("model"),
            answer.get("device"),
            time.perf_counter() - started,
        )
        if self.idle_seconds > 0:
            self._idle = asyncio.get_running_loop().create_task(self._end_when_idle(process), name="speech-idle")

    async def _end_when_idle(self, process: asyncio.subprocess.Process) -> None:
        """End the process once VOICE_IDLE_MINUTES pass without a note (a note in flight is waited for)."""
        while True:
            await asyncio.sleep(max(0.0, self._last_used + self.idle_seconds - time.monotonic()))
            async with self._turn:  # a note in flight finishes first (and counts as use)
                if process is not self._process:
                    return  # it died and another may run: that one has its own watch
                if time.monotonic() - self._last_used < self.idle_seconds:
                    continue
                await self._reap(process)
                log.info("speech process %d ended: no voice note for %g minutes", process.pid, self.idle_seconds / 60)
                self._state, self._process, self.pid = ModelState.not_loaded, None, None
                return

    async def wait_closed(self) -> None:
        """After `close`: wait until the killed speech process is reaped (bounded), before the event loop ends."""
        if self._process is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_SECONDS):
                    await self._process.wait()

    async def _ended(self, why: str) -> None:
        log.warning("speech process: %s", why)
        if self._process is not None:
            await self._reap(self._process)
        self._process, self.pid = None, None
        if self._state is ModelState.ready:
            self._state = ModelState.not_loaded  # the next note starts it again

    @staticmethod
    async def _reap(process: asyncio.subprocess.Process) -> None:
        """Close its stdin (it exits), kill it if it does not within STOP_SECONDS, and wait for it, at most STOP_SECONDS
        again: a killed process stuck in the kernel (a hung GPU driver, a dead disk) is left to end on its own, and
        the notes that follow start a new one rather than wait on it."""
        if process.stdin is not None:
            process.stdin.close()
        try:
            async with asyncio.timeout(STOP_SECONDS):
                await process.wait()
            return
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        try:
            async with asyncio.timeout(STOP_SECONDS):
                await process.wait()
        except TimeoutError:
            log.warning(
                "speech process %d: killed, and still not ended after %g s; left to end", process.pid, STOP_SECONDS
            )


def _answer(line: bytes) -> dict[str, Any] | None:
    """One answer line of the speech process; None for none (it ended) or for anything that is not an answer."""
    try:
        answer = json.loads(line) if line.strip() else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
