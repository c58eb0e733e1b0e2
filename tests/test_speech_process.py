"""Ending the speech process: what the bot waits for when its speech process will not end. And what it is started
with: none of the bot's secrets."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

import pytest

from agents.inputs import speech_process
from agents.inputs.speech_process import SpeechProcess
from tests.support.processes import own_sleep
from tests.support.sandbox import secret_environment, secrets_in  # noqa: F401  (fixture)

HANG_GUARD = 30.0  # the old wait after the kill had no bound: this guard is what fails then


async def test_a_killed_process_that_does_not_end_is_left_after_a_bounded_wait(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A process stuck in the kernel (a hung GPU driver) does not end when killed: the reaper gives it STOP_SECONDS
    after the kill and goes on, so that the note waiting behind it gets a new speech process instead of a hang."""
    monkeypatch.setattr(speech_process, "STOP_SECONDS", 0.2)
    process = await asyncio.create_subprocess_exec("sleep", own_sleep("1"), stdin=asyncio.subprocess.PIPE)
    kills: list[int] = []
    monkeypatch.setattr(process, "kill", lambda: kills.append(process.pid))  # the kill does not end it
    try:
        with caplog.at_level(logging.WARNING, logger=speech_process.__name__):
            async with asyncio.timeout(HANG_GUARD):
                await SpeechProcess._reap(process)
        assert kills == [process.pid], "it was killed once its stdin's close did not end it"
        assert process.returncode is None, "the stand-in for a process stuck in the kernel is still running"
        assert f"speech process {process.pid}: killed, and still not ended" in caplog.text
    finally:
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()


async def test_a_process_that_ends_when_its_stdin_closes_is_never_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    process = await asyncio.create_subprocess_exec("cat", stdin=asyncio.subprocess.PIPE)
    monkeypatch.setattr(process, "kill", lambda: pytest.fail("a process that ended on its own was killed"))
    async with asyncio.timeout(HANG_GUARD):
        await SpeechProcess._reap(process)
    assert process.returncode == 0


async def test_a_speech_process_that_never_answers_fails_the_note_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A speech process that stops answering (a deadlocked thread, a hung driver) held the note forever, and with it
    every later note of every chat and that chat's messages. The answer is awaited a bounded time (NOTE_SECONDS +
    NOTE_SECONDS_PER_AUDIO_SECOND × VOICE_MAX_SECONDS, shortened here): the note fails with one sentence and the hung
    process is killed, so the next note starts another."""
    monkeypatch.setattr(speech_process, "NOTE_SECONDS", 0.5)
    process = SpeechProcess({"engine": "openai-whisper", "model": "tiny", "max_seconds": 0.1}, idle_minutes=0)
    hung = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        "head -c 1 > /dev/null; exec sleep 3600",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    process._process, process.pid, process._state = hung, hung.pid, speech_process.ModelState.ready
    try:
        with pytest.raises(speech_process.TranscriptionFailed, match="took too long"):
            await asyncio.wait_for(process.transcribe(b"OggS" + b"\0" * 100), timeout=30)
        assert await asyncio.wait_for(hung.wait(), timeout=10) == -signal.SIGKILL
        assert process.pid is None and process.state is speech_process.ModelState.not_loaded
    finally:
        process.close()
        if hung.returncode is None:
            hung.kill()
            await hung.wait()


async def test_the_speech_process_gets_none_of_the_bots_secrets(
    secret_environment: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It runs outside the sandbox and needs none of the bot's keys: the bot's environment without them (PATH, the
    CUDA and OpenMP settings kept)."""
    seen: list[Any] = []

    async def not_started(*argv: Any, **options: Any) -> Any:
        seen.append(options.get("env"))
        raise OSError("not started")

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(speech_process.asyncio, "create_subprocess_exec", not_started)
    await SpeechProcess({"engine": "openai-whisper", "model": "tiny"}, idle_minutes=0)._start()
    assert seen and not secrets_in(seen[0]), secrets_in(seen[0])
    assert seen[0]["PATH"] == os.environ["PATH"] and seen[0]["CUDA_VISIBLE_DEVICES"] == "0"
    assert seen[0]["OMP_WAIT_POLICY"]
